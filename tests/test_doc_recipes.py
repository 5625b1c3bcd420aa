"""The commands the docs give a user, run as written: docs/chat.md's chat fine-tune of a model
they have (a tiny Llama with a chat template standing in for it, in `my-model/`) and then
docs/adapters.md's adapters over it, resumed, sampled and exported, its Python loading the
adapter in peft, and docs/python.md's `api.load` of the adapters' checkpoint. Each command must exit 0; the resumed adapters must be the run's bytes."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from transformers_models import save_tiny_llama

pytestmark = pytest.mark.slow  # training runs and transformers

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def commands(document: str, after: str) -> list[list[str]]:
    """The commands of the first ```sh block after the line `after` of docs/`document`, each line
    continued by a backslash joined, comments dropped."""
    text = (ROOT / "docs" / document).read_text()
    block = re.search(r"```sh\n(.*?)```", text[text.index(after) :], re.S)
    assert block is not None, document
    lines = block.group(1).replace("\\\n", " ").splitlines()
    return [shlex.split(line, comments=True) for line in lines if line.strip()]


def python_blocks(document: str, after: str = "") -> list[str]:
    """The ```python blocks of docs/`document` after the line `after`."""
    text = (ROOT / "docs" / document).read_text()
    blocks = re.findall(r"```python\n(.*?)```", text[text.index(after) :], re.S)
    assert blocks, document
    return blocks


def run_python(code: str, cwd: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=300,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


def run_all(lines: list[list[str]], cwd: Path) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    for line in lines:
        assert line[0] == "zrodlo", line
        done = subprocess.run(
            [str(BIN / "zrodlo"), *line[1:]], cwd=cwd, env=env, capture_output=True, text=True,
            timeout=600, check=False,
        )  # fmt: skip
        assert done.returncode == 0, (line, done.stderr)


def test_the_chat_and_adapter_recipes_run_as_written(tmp_path):
    save_tiny_llama(tmp_path / "my-model", chat=True, positions=256)
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    run_all(commands("chat.md", "## A chat fine-tune in commands"), tmp_path)
    run_all(commands("adapters.md", "# Adapters"), tmp_path)
    for name in ("adapters.safetensors", "optimizer.safetensors"):
        written = (tmp_path / "adapted" / "step-40" / name).read_bytes()
        assert (tmp_path / "resumed" / "step-40" / name).read_bytes() == written, name
    assert not (tmp_path / "adapted" / "step-40" / "model.safetensors").exists()
    run_python(python_blocks("adapters.md")[0], tmp_path)
    for block in python_blocks("python.md", "## A model as a torch module"):
        # The pipeline's checkpoint in the first, where this recipe trained adapted/step-40.
        run_python(block.replace("run/step-350", "adapted/step-40"), tmp_path)

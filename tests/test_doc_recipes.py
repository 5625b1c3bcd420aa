"""The commands the docs give a user, run as written: docs/chat.md's chat fine-tune of a model
they have (a tiny Llama with a chat template standing in for it, in `my-model/`) and then
docs/adapters.md's adapters over it, resumed, sampled and exported, and its Python loading the
adapter in peft. Each command must exit 0; the resumed adapters must be the run's bytes."""

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


def python_block(document: str) -> str:
    text = (ROOT / "docs" / document).read_text()
    block = re.search(r"```python\n(.*?)```", text, re.S)
    assert block is not None, document
    return block.group(1)


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
    done = subprocess.run(
        [sys.executable, "-c", python_block("adapters.md")], cwd=tmp_path, capture_output=True,
        text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr

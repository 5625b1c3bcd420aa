"""The stages whose params choose between two commands, each one `zrodlo pipeline` command, through
the real command line: dvc.yaml's commands read as commands, with no shell test of a param; each
writes, byte for byte, what the command it chose writes; and the resume check turned off leaves an
empty run and a report that says so."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from conftest import zrodlo_succeeds
from library_tokenizers import gpt2_file

ROOT = Path(__file__).resolve().parents[2]


def files_of(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def test_every_stage_of_dvc_yaml_runs_commands_not_shell_tests():
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    for name, stage in stages.items():
        cmd = stage.get("do", stage)["cmd"]
        assert cmd.startswith("zrodlo "), name
        assert not re.search(r"\bif\b|\bfi\b|;|&&|\|\||\$\(|\bNone\b", cmd), (name, cmd)


def params_file(root: Path, source: str | None) -> Path:
    params = {
        "tokenizer": {"kind": "bpe", "vocab_size": 270},
        "init": {"from": source, "preset": "tiny", "positions": 16, "dropout": 0.0, "seed": 3},
    }
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    return root / "params.yaml"


@pytest.mark.parametrize("source", [None, "pretrained/mine"])
def test_the_tokenizer_stage_writes_what_the_command_it_chose_writes(
    training_data, tmp_path, source
):
    if source is not None:
        (tmp_path / source).mkdir(parents=True)
        gpt2_file(tmp_path / source / "tokenizer.json")
    params = params_file(tmp_path, source)
    said = zrodlo_succeeds("--params", params, "pipeline", "tokenizer", "--documents",
                           training_data.documents, "--output", "chosen", cwd=tmp_path)  # fmt: skip
    direct = (
        ["tokenizer", "fit", "--documents", training_data.documents, "--kind", "bpe",
         "--vocab-size", 270]
        if source is None
        else ["tokenizer", "import", "--from", f"{source}/tokenizer.json"]
    )  # fmt: skip
    assert said == zrodlo_succeeds(*direct, "--output", "direct", cwd=tmp_path).replace(
        "direct", "chosen"
    )
    assert files_of(tmp_path / "chosen") == files_of(tmp_path / "direct")


def test_the_model_stage_draws_the_model_init_draws(training_data, tmp_path):
    params = params_file(tmp_path, None)
    tokenizer = ("--tokenizer", training_data.tokenizer)
    zrodlo_succeeds("--params", params, "pipeline", "model", *tokenizer, "--output", "chosen",
                    cwd=tmp_path)  # fmt: skip
    zrodlo_succeeds("--params", params, "model", "init", *tokenizer, "--output", "direct",
                    cwd=tmp_path)  # fmt: skip
    assert files_of(tmp_path / "chosen") == files_of(tmp_path / "direct")


def test_the_resume_check_turned_off_continues_nothing_and_says_so(
    training_data, trained_run, tmp_path
):
    said = zrodlo_succeeds(
        "pipeline", "resume", "--run", trained_run, "--corpus", training_data.corpus,
        "--output", "resumed", "--report", "reports/resume.json", "--steps", 6,
        "--before-end", 2, "--device", "cpu", "--no-check", cwd=tmp_path,
    )  # fmt: skip
    assert said == "continued no checkpoint (resume.check is false); reports/resume.json says so\n"
    assert list((tmp_path / "resumed").iterdir()) == []
    assert (tmp_path / "reports" / "resume.json").read_text() == '{"checked": false}\n'
    assert json.loads((tmp_path / "reports" / "resume.json").read_text()) == {"checked": False}

"""dvc.yaml lists all the code each stage runs, so that an edit anywhere in it reruns the stage:
the lines are written from the imports by `.ci/stage_code.py` (`make stage-code`), and a dvc.yaml
whose lines differ from what it writes fails here, in CI."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def load_writer():
    spec = importlib.util.spec_from_file_location("stage_code", ROOT / ".ci" / "stage_code.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_stage_lists_the_code_its_commands_run_and_no_more():
    text = (ROOT / "dvc.yaml").read_text()
    assert load_writer().written(text) == text, "dvc.yaml is stale: make stage-code writes it"


def test_a_stage_that_lacks_a_line_or_lists_another_is_written_anew():
    writer = load_writer()
    text = (ROOT / "dvc.yaml").read_text()
    stale = text.replace("      - stages/split.py\n", "      - stages/assign.py\n", 1)
    assert stale != text
    assert writer.written(stale) == text


def test_the_code_of_a_stage_holds_its_commands_modules_and_what_they_import():
    writer = load_writer()
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    code = writer.stage_code(stages["tokenizer"])
    assert "stages/tokenizer.py" in code
    assert "src/zrodlo/data/tokenizer/bpe_training.py" in code  # through the registry
    assert "src/zrodlo/storage/refusal.py" in code
    assert not any(path.startswith("src/zrodlo/training/") for path in code)

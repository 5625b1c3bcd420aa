"""Every hyperparameter is declared once, in `RunPlan` (model train) and `ModelConfig` (model init):
the command line and the Python API are built from those declarations, and params.yaml and the
commands of dvc.yaml are held to them here, so that a field cannot be added in one place and
forgotten in another."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from zrodlo.model.config import ModelConfig, options_of
from zrodlo.model.presets import SHAPE
from zrodlo.pipeline.architecture import LLAMA_ONLY
from zrodlo.pipeline.schedule import schedule_steps
from zrodlo.training.plan import RunPlan

ROOT = Path(__file__).resolve().parent.parent
PARAMS = yaml.safe_load((ROOT / "params.yaml").read_text())
STAGES = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
# Where a run computes, which no result depends on: params, but no hyperparameters.
COMPUTE = {"device", "processes", "threads"}
# The schedule's shares of train.steps, which `zrodlo pipeline schedule` turns into the flags it
# prints for the train stage's command ($schedule there).
SHARES = {"warmup", "decay"}
SCHEDULED = set(schedule_steps({"steps": 10, "warmup": 0, "decay": 0}))
FLAG = re.compile(r"(--[a-z0-9-]+)(?: (\$\{[a-z_.]+\}|[^ -]\S*))?")


def passed(stage: str) -> dict[str, str | None]:
    """The flags a stage's command passes, each with what it passes (None for a switch)."""
    return {flag: value or None for flag, value in FLAG.findall(STAGES[stage]["cmd"])}


def options(declaration: type) -> set[str]:
    return {f.name for f in options_of(declaration)}


@pytest.mark.parametrize(
    ("stage", "section", "declaration", "extra", "preset"),
    [
        ("train", "train", RunPlan, COMPUTE | SHARES, ()),
        # The init stage gives the model's shape as its preset, never the four flags.
        ("init", "init", ModelConfig, {"seed", "preset"}, SHAPE),
    ],
)
def test_params_and_the_stage_command_follow_the_declaration(
    stage, section, declaration, extra, preset
):
    declared = options(declaration) - set(preset)
    assert set(PARAMS[section]) <= declared | extra, "a param that declares no option"
    flags = passed(stage)
    for flag, value in flags.items():
        name = flag[2:].replace("-", "_")
        if value is not None and value.startswith("${"):
            assert value == f"${{{section}.{name}}}", (flag, value)
    reached = {flag[2:].replace("-", "_") for flag in flags}
    if "$schedule" in STAGES[stage]["cmd"]:
        reached |= SCHEDULED | SHARES
    if "pipeline architecture" in STAGES[stage]["cmd"]:  # its $flags: architecture's settings
        reached |= {"architecture", *LLAMA_ONLY}
    assert declared | (set(PARAMS[section]) & extra) <= reached, "a declared option the stage drops"


def test_the_resume_stage_passes_the_train_sections_writes():
    flags = passed("resume")
    for name in ("eval_every", "eval_windows", "checkpoint_every"):
        assert flags["--" + name.replace("_", "-")] == f"${{train.{name}}}"

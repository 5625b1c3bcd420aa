"""Every hyperparameter is declared once, in `RunPlan` (model train) and in `ModelConfig` with each
family's settings (model init): the command line and the Python API are built from those
declarations. params.yaml reaches the commands of dvc.yaml by one road, `zrodlo --params`: every
key of a stage's section is an option of its command, what a command requires the params or the
stage give it, and the sections hold every declared hyperparameter, so that a field cannot be
added in one place and forgotten in another."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
import typer.main
import yaml

from zrodlo.model.config import DECLARATIONS
from zrodlo.model.declared import options_of
from zrodlo.pipeline.sections import COMMANDS, command_options
from zrodlo.stages.cli import app
from zrodlo.training.plan import RunPlan

ROOT = Path(__file__).resolve().parent.parent
PARAMS = yaml.safe_load((ROOT / "params.yaml").read_text())
STAGES = {
    name: stage.get("do", stage)  # a foreach stage by its template
    for name, stage in yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"].items()
}


def command(words: str):
    """The command line's command `zrodlo <words>`."""
    found = typer.main.get_command(app)
    for word in words.split():
        found = found.commands[word]
    return found


def runs_with_params(cmd: str) -> tuple[str, list[str]] | None:
    """The command a stage's cmd runs with `--params` and the flags it gives, or None."""
    words = shlex.split(cmd.replace("\n", " "))
    at = next((i for i, word in enumerate(words) if word == "zrodlo"), None)
    if at is None or words[at + 1] != "--params":
        return None
    rest = words[at + 3 :]
    named = [word for word in rest if not word.startswith("-")][:2]
    name = " ".join(named if " ".join(named) in COMMANDS else named[:1])
    return name, [word for word in rest if word.startswith("--")]


def declared(*declarations: type) -> set[str]:
    return {f.name for declaration in declarations for f in options_of(declaration)}


@pytest.mark.parametrize("words", sorted(COMMANDS))
def test_every_key_of_a_commands_section_is_one_of_its_options(words):
    accepted = {parameter.name for parameter in command(words).params}
    assert command_options(PARAMS, words, accepted) is not None  # refuses a key that is none


# The commands a stage's `zrodlo pipeline` command runs as its params choose (stages/pipeline_*.py),
# which read the same section when run by hand with --params.
CHOSEN = {
    "tokenizer fit": "pipeline tokenizer", "model init": "pipeline model",
    "checkpoint resume": "pipeline resume",
}  # fmt: skip


def test_every_command_that_reads_params_is_run_so_by_a_stage():
    ran = {found[0] for stage in STAGES.values() if (found := runs_with_params(stage["cmd"]))}
    assert ran | {chosen for chosen, by in CHOSEN.items() if by in ran} == set(COMMANDS)


@pytest.mark.parametrize(
    "stage", sorted(name for name, stage in STAGES.items() if runs_with_params(stage["cmd"]))
)
def test_a_stage_gives_its_command_every_option_it_requires(stage):
    words, flags = runs_with_params(STAGES[stage]["cmd"])
    parameters = command(words).params
    given = {p.name for p in parameters if set(p.opts) & set(flags)}
    required = {p.name for p in parameters if p.required}
    assert required <= given | set(command_options(PARAMS, words)), stage


@pytest.mark.parametrize(
    ("section", "declarations", "given_by_the_stage"),
    [("train", (RunPlan,), {"shuffle"}), ("init", DECLARATIONS, set())],
)
def test_a_section_holds_every_declared_hyperparameter(section, declarations, given_by_the_stage):
    words = next(words for words, reads in COMMANDS.items() if reads.section == section)
    held = set(command_options({**PARAMS, section: {**PARAMS[section]}}, words))
    nulls = {key for key, value in PARAMS[section].items() if value is None}
    assert declared(*declarations) - {"vocab_size"} <= held | nulls | given_by_the_stage

"""`zrodlo --params params.yaml <command> ...`: every option the command line does not give, taken
from the command's section of params.yaml (`zrodlo.pipeline.sections`), the way each stage of
dvc.yaml runs its command. A flag given on the command line wins over the params."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import typer

HELP = (
    "Take every option a command is not given from this params.yaml, from the section of the "
    "dvc.yaml stage that runs the command (model train: train); a flag given here wins."
)


class Defaults(Mapping):
    """What click reads a command's defaults from (its context's `default_map`): for a group, the
    defaults of its commands, each made from the params when click starts that command."""

    def __init__(
        self, params: dict[str, Any], source: Path, group: Any, words: tuple[str, ...] = ()
    ):
        self.params, self.source, self.group, self.words = params, source, group, words

    def get(self, name: str, default: Any = None) -> Any:
        from zrodlo.pipeline.sections import COMMANDS, command_options

        command = self.group.commands.get(name)
        words = (*self.words, name)
        if hasattr(command, "commands"):  # a group of commands
            return Defaults(self.params, self.source, command, words)
        if command is None or " ".join(words) not in COMMANDS:
            return default
        accepted = {parameter.name for parameter in command.params}
        return command_options(self.params, " ".join(words), accepted, str(self.source))

    def __getitem__(self, name: str) -> Any:
        value = self.get(name)
        if value is None:
            raise KeyError(name)
        return value

    def __iter__(self) -> Iterator[str]:
        return iter(self.group.commands)

    def __len__(self) -> int:
        return len(self.group.commands)


def take_params(ctx: typer.Context, value: Path | None) -> Path | None:
    """Read `--params` before anything else, so that every command below takes its defaults."""
    if value is not None:
        from zrodlo.pipeline.params import read_params

        ctx.default_map = Defaults(read_params(value), value, ctx.command)
    return value


def schedule_of_given_steps(ctx: typer.Context, plan: dict[str, Any]) -> None:
    """With --params, the schedule follows --steps given on the command line: the train section's
    shares (train.warmup, train.decay) are taken of those steps, where they were taken of
    train.steps; a schedule flag given on the command line stays as given."""
    root = ctx.find_root().default_map
    if not isinstance(root, Defaults) or not _given(ctx, "steps"):
        return
    from zrodlo.pipeline.params import as_params
    from zrodlo.pipeline.schedule import schedule_steps
    from zrodlo.pipeline.sections import section_of

    train = section_of(root.params, "train", str(root.source))
    schedule = as_params("train", lambda: schedule_steps({**train, "steps": plan["steps"]}))
    plan.update({name: value for name, value in schedule.items() if not _given(ctx, name)})


def _given(ctx: typer.Context, name: str) -> bool:
    source = ctx.get_parameter_source(name)
    return source is not None and source.name == "COMMANDLINE"

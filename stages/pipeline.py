"""`zrodlo pipeline check`: the params of the DVC pipeline checked together (the `pipeline` stage,
which every other stage follows)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

EXAMPLE = "Example: zrodlo pipeline check --params params.yaml --output reports/pipeline.txt"


def check(
    context: typer.Context,
    params: Path = typer.Option(Path("params.yaml"), help="The pipeline's params.yaml."),
    output: Path | None = typer.Option(
        None, help="Write the rules the params were held to into this file (replaced if it exists)."
    ),
) -> None:
    """Refuse params whose sections do not make a pipeline that can finish, naming the params,
    and a key no flag of its stage's command takes."""
    from zrodlo.pipeline.check import check_params
    from zrodlo.pipeline.sections import COMMANDS

    root = context.find_root().command
    options = {words: options_of(root, words) for words in COMMANDS}
    rules = check_params(params, output, options)
    typer.echo(f"{params}: the sections agree ({len(rules)} rules held)")


def options_of(command: Any, words: str) -> set[str]:
    """The options of the command `words` below `command`, by their names in the library."""
    for word in words.split():
        command = command.commands[word]
    return {parameter.name for parameter in command.params}

"""`zrodlo pipeline check`: the params of the DVC pipeline checked together (the `pipeline` stage,
which every other stage follows)."""

from __future__ import annotations

from pathlib import Path

import typer

EXAMPLE = "Example: zrodlo pipeline check --params params.yaml --output reports/pipeline.txt"


def check(
    params: Path = typer.Option(Path("params.yaml"), help="The pipeline's params.yaml."),
    output: Path | None = typer.Option(
        None, help="Write the rules the params were held to into this file (replaced if it exists)."
    ),
) -> None:
    """Refuse params whose sections do not make a pipeline that can finish, naming the params."""
    from zrodlo.pipeline.check import check_params

    rules = check_params(params, output)
    typer.echo(f"{params}: the sections agree ({len(rules)} rules held)")

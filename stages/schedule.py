"""`zrodlo pipeline schedule`: the train stage's schedule, shares of train.steps in params.yaml, as
model train's flags (the train stage passes them on)."""

from __future__ import annotations

from pathlib import Path

import typer

EXAMPLE = "Example: zrodlo pipeline schedule --params params.yaml"


def schedule(
    params: Path = typer.Option(Path("params.yaml"), help="The pipeline's params.yaml."),
) -> None:
    """Print --warmup-steps, --stable-steps and --decay-steps for train.warmup and train.decay,
    shares of train.steps rounded down to whole updates: the decay ends at the last step."""
    from zrodlo.pipeline.schedule import schedule_flags

    typer.echo(schedule_flags(params))

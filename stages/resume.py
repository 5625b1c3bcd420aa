"""`zrodlo checkpoint resume`: continue a checkpoint exactly (the `resume` stage)."""

from __future__ import annotations

from pathlib import Path

import typer

from zrodlo.stages import options

EXAMPLE = (
    "Example: zrodlo checkpoint resume --checkpoint run/step-900 --corpus corpus/train "
    "--output resumed --steps 1000 --device cpu --processes 2"
)


def resume(
    checkpoint: Path = typer.Option(..., help="The step-<n> checkpoint directory to continue."),
    corpus: Path = typer.Option(..., help="The corpus the checkpoint was trained on."),
    output: Path = typer.Option(
        ..., help="The run directory each new step-<n> checkpoint is written into."
    ),
    steps: int = typer.Option(
        ..., help="Total steps the run reaches, counting the checkpoint's own."
    ),
    eval_corpus: Path | None = options.EVAL_CORPUS,
    eval_every: int | None = options.EVAL_EVERY,
    checkpoint_every: int | None = options.CHECKPOINT_EVERY,
    keep_checkpoints: int | None = options.KEEP_CHECKPOINTS,
    device: str = options.DEVICE,
    ordinal: int | None = options.ORDINAL,
    processes: int = options.PROCESSES,
    timing: Path | None = options.TIMING,
) -> None:
    """Continue a checkpoint with its own optimizer state and data position, on any number of
    processes that divides a step's micro-batches."""
    # Imported here, not at the top: `zrodlo --help` and the data stages then start without torch.
    from zrodlo.stages.progress import step_display
    from zrodlo.training.runs import Compute, resume

    compute = Compute(device, ordinal, processes)
    written = resume(
        checkpoint,
        corpus,
        output,
        steps,
        compute,
        eval_corpus,
        eval_every,
        checkpoint_every,
        keep_checkpoints,
        step_display,
        timing,
    )
    if written:
        typer.echo(f"continued {checkpoint} to step {steps}; the last checkpoint is {written[-1]}")

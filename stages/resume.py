"""`zrodlo checkpoint resume`: continue a checkpoint exactly (the `resume` stage)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from zrodlo.stages import options
from zrodlo.training.plan import RunPlan

EXAMPLE = (
    "Example: zrodlo checkpoint resume --checkpoint run/step-300 --corpus corpus/train "
    "--output resumed --steps 350 --device cpu --processes 2"
)


@options.taking(
    options.declared(
        RunPlan, only=("eval_every", "eval_windows", "checkpoint_every", "keep_checkpoints")
    ),
    after="eval_corpus",
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
    device: str = options.DEVICE,
    ordinal: int | None = options.ORDINAL,
    processes: int = options.PROCESSES,
    timing: Path | None = options.TIMING,
    **writes: Any,
) -> None:
    """Continue a checkpoint with its own optimizer state and data position, on any number of
    processes that divides a step's micro-batches."""
    # Imported here, not at the top: `zrodlo --help` and the data stages then start without torch.
    from zrodlo.training.display import StepDisplay
    from zrodlo.training.runs import resume as resume_run

    display = StepDisplay()
    written = resume_run(
        checkpoint, corpus, output, steps=steps, eval_corpus=eval_corpus, device=device,
        ordinal=ordinal, processes=processes, timing=timing, progress=display, **writes,
    )  # fmt: skip
    if written:
        typer.echo(
            f"continued {checkpoint} to step {steps}; the last checkpoint is {written[-1]}"
            f"{display.summary()}"
        )

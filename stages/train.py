"""`zrodlo model train`: train every weight of a model directory (the `train` stage)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from zrodlo.stages import options, params
from zrodlo.training.plan import RunPlan

EXAMPLE = (
    "Example: zrodlo model train --model model --corpus corpus/train --output run --steps 350 "
    "--context 129 --batch-size 32 --learning-rate 0.002 --beta1 0.9 --beta2 0.99 --epsilon "
    "1e-8 --weight-decay 0.1 --decay-scope matrices --seed 1 --precision f32 --device cpu "
    "--shuffle"
)


@options.taking(options.declared(RunPlan), after="output")
def train(
    invocation: typer.Context,
    model: Path = typer.Option(
        ..., help="The model directory or checkpoint whose weights are trained."
    ),
    corpus: Path = typer.Option(..., help="The prepared corpus the windows are read from."),
    output: Path = typer.Option(
        ..., help="The run directory each step-<n> checkpoint is written into."
    ),
    eval_corpus: Path | None = options.EVAL_CORPUS,
    device: str = options.DEVICE,
    ordinal: int | None = options.ORDINAL,
    processes: int = options.PROCESSES,
    timing: Path | None = options.TIMING,
    threads: int | None = typer.Option(
        None,
        help="Threads each process computes on; the weights depend on it, and not on --processes. "
        "Default: OMP_NUM_THREADS, else the cores for one process and 1 for each of several.",
    ),
    **plan: Any,
) -> None:
    """Train every weight of a model directory with AdamW on next-token cross-entropy.

    Under torchrun, or with --processes, each process computes a share of every step, and the run
    is the one-process run to the bit."""
    # Imported here, not at the top: `zrodlo --help` and the data stages then start without torch.
    from zrodlo.training.display import StepDisplay
    from zrodlo.training.runs import train as train_model

    params.schedule_of_given_steps(invocation, plan)
    display = StepDisplay()
    written = train_model(
        model, corpus, output, eval_corpus=eval_corpus, device=device, ordinal=ordinal,
        processes=processes, timing=timing, threads=threads, progress=display, **plan,
    )  # fmt: skip
    if written:
        typer.echo(
            f"wrote {len(written)} checkpoints into {output}; the last is {written[-1]}"
            f"{display.summary()}"
        )

"""How a run shows its progress: a live line on a terminal, one plain line a step otherwise."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from zrodlo.training.records import StepRecord


def describe(record: StepRecord) -> str:
    rate = record.targets / record.seconds if record.seconds > 0 else 0.0
    text = (
        f"loss {record.loss:.4f}  lr {record.learning_rate:.3g}  grad_norm {record.grad_norm:.3f}  "
        f"{rate:,.0f} tokens/s"
    )
    if record.eval_loss is not None:
        text += f"  held-out loss {record.eval_loss:.4f}"
    return text


@contextmanager
def step_display(done: int, total: int) -> Iterator[Callable[[StepRecord], None]]:
    """Yield the callback a run calls after every step."""
    if not sys.stdout.isatty():

        def plain(record: StepRecord) -> None:
            print(f"step {record.step}/{total}  {describe(record)}", flush=True)

        yield plain
        return
    columns = (
        TextColumn("step"),
        MofNCompleteColumn(),
        BarColumn(),
        TimeRemainingColumn(),
        TextColumn("{task.fields[status]}"),
    )
    with Progress(*columns, console=Console(), transient=False) as progress:
        task = progress.add_task("train", total=total, completed=done, status="")

        def live(record: StepRecord) -> None:
            progress.update(task, completed=record.step, status=describe(record))
            if record.eval_loss is not None:
                progress.console.print(f"step {record.step}: held-out loss {record.eval_loss:.4f}")

        yield live

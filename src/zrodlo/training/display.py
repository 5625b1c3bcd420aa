"""How a run shows its progress: a live line on a terminal, one plain line a step otherwise."""

from __future__ import annotations

import sys
import time
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


class StepDisplay:
    """A run's progress (`zrodlo.training.records.Progress`), and the share of its wall time that
    went to held-out scores, for the summary line the command ends with."""

    def __init__(self) -> None:
        self.wall = 0.0
        self.scoring = 0.0

    @contextmanager
    def __call__(self, done: int, total: int) -> Iterator[Callable[[StepRecord], None]]:
        started = time.perf_counter()
        with step_display(done, total) as show:

            def counted(record: StepRecord) -> None:
                self.scoring += record.eval_seconds or 0.0
                show(record)

            if hasattr(show, "scoring"):
                counted.scoring = show.scoring  # type: ignore[attr-defined]
            try:
                yield counted
            finally:
                self.wall = time.perf_counter() - started

    def summary(self) -> str:
        """`; held-out scores took S% of the run's wall time (a of b s)`, or nothing where the run
        scored none."""
        if not self.scoring or not self.wall:
            return ""
        share = self.scoring / self.wall
        return (
            f"; held-out scores took {share:.1%} of the run's wall time "
            f"({self.scoring:.1f} of {self.wall:.1f} s)"
        )


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

        scoring_since: dict[int, float] = {}

        def scoring(step: int, done: int, total: int) -> None:
            """After a second of a held-out score, the line says how far it has come."""
            since = scoring_since.setdefault(step, time.perf_counter())
            if time.perf_counter() - since >= ScoringDisplay.SHOWN_AFTER_S:
                status = f"scoring the held-out corpus at step {step}: {done}/{total} batches"
                progress.update(task, status=status)

        live.scoring = scoring  # type: ignore[attr-defined]
        yield live


class ScoringDisplay:
    """The progress of scoring corpora, on a terminal: a bar for each corpus, shown once its
    scoring has run for a second (a quick score shows nothing), gone when it is done."""

    SHOWN_AFTER_S = 1.0

    def __enter__(self) -> Callable[[str, int, int], None]:
        self.progress = Progress(
            TextColumn("scoring {task.description}"), MofNCompleteColumn(), BarColumn(),
            TimeRemainingColumn(), console=Console(), transient=True,
            disable=not sys.stdout.isatty(),
        )  # fmt: skip
        self.tasks: dict[str, tuple[float, int | None]] = {}
        return self.heard

    def heard(self, corpus: str, done: int, total: int) -> None:
        started, task = self.tasks.get(corpus, (time.perf_counter(), None))
        if task is None and time.perf_counter() - started >= self.SHOWN_AFTER_S:
            if not self.progress.live.is_started:
                self.progress.start()
            task = self.progress.add_task(corpus, total=total)
        if task is not None:
            self.progress.update(task, completed=done)
        self.tasks[corpus] = (started, task)

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

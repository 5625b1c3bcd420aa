"""The entry point of a data-parallel run's workers: `python -m zrodlo.training.worker REQUEST`,
started by `zrodlo.training.launch` with a request in JSON (a command, train or resume, and its
keywords). Each worker runs the library's `train` or `resume` as one process of the run, and says
on its line to the caller (`zrodlo.training.channel`) that it started; process 0 also reports its
progress, warnings and refusal or result.
"""

from __future__ import annotations

import json
import os
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path

from zrodlo.storage.refusal import LOST_CONTACT_STATUS, LostContact, Refusal
from zrodlo.training.channel import open_line, tell
from zrodlo.training.records import StepRecord
from zrodlo.training.runs import resume, train

PATHS = ("model", "checkpoint", "corpus", "output", "eval_corpus", "timing")
# A process other than 0 that meets a refusal waits this long before it ends, so that process 0,
# which meets the same one, reports it before the agent stops every process on the first to end.
QUIET_PROCESS_WAIT_S = 2.0


def main(words: str) -> int:
    """Run one worker's share of the request; return its exit status."""
    request = json.loads(words)
    command = {"train": train, "resume": resume}[request.pop("command")]
    for name in PATHS:
        if request.get(name) is not None:
            request[name] = Path(request[name])
    reports = open_line() and os.environ.get("RANK") == "0"
    tell("started")
    try:
        if not reports:
            command(**request)
            return 0
        with _warnings_told():
            written = command(**request, progress=_progress_told)
        tell("written", [str(path) for path in written])
        return 0
    except LostContact:
        return LOST_CONTACT_STATUS  # the caller names the process that failed first
    except Refusal as refusal:
        if reports:
            tell("refusal", refusal.sentence)
        else:
            time.sleep(QUIET_PROCESS_WAIT_S)
        return 1


@contextmanager
def _progress_told(done: int, steps: int) -> Iterator[Callable[[StepRecord], None]]:
    """A run's progress, step by step, told to the caller, which shows it."""
    tell("start", done, steps)

    def step(record: StepRecord) -> None:
        tell("step", asdict(record))

    step.scoring = lambda *batches: tell("scoring", *batches)  # type: ignore[attr-defined]
    yield step


@contextmanager
def _warnings_told() -> Iterator[None]:
    """The run's warnings told to the caller, which shows them, instead of shown here."""
    shown = warnings.showwarning
    warnings.showwarning = lambda message, category, *rest, **named: tell(
        "warning", str(message), category.__name__
    )
    try:
        yield
    finally:
        warnings.showwarning = shown


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))

"""Starting the processes of a data-parallel run on this machine (`processes=N`, `--processes N`).

Each worker is a child process running the library's entry point `python -m zrodlo.training.worker`
with the request, never the caller's script, so a script or a notebook starts them as the command
line does. Each runs in a session of its own, so Ctrl-C at a terminal reaches the caller alone,
which then ends them. They meet through a file store in a private directory (mode 0700) and talk
over gloo on the loopback interface: nothing of the run listens beyond 127.0.0.1, and no store of
the run takes keys from another process. Each computes on the request's threads, or one where
neither it nor OMP_NUM_THREADS says.

Each worker reports to the caller over a pipe it inherits (`zrodlo.training.channel`), and the
caller waits in bounds: every process must report that it started within `Waits.start` seconds
of being launched, and once every process says it is joining the others, all must have joined
within `Waits.join`. A bound passed, a process that failed, SIGTERM or Ctrl-C: the caller stops
every process (SIGTERM, then SIGKILL after `Waits.stop`) and raises one sentence.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zrodlo.storage.refusal import LOST_CONTACT_STATUS, QUIET_ON_LOST_CONTACT, Refusal
from zrodlo.training.channel import LINE, Messages
from zrodlo.training.environment import EnvironmentWarning
from zrodlo.training.place import RENDEZVOUS
from zrodlo.training.records import Progress, StepRecord
from zrodlo.training.schedule import ScheduleWarning

# The warnings a run gives, by the name a worker sends with each.
NOTICES = {category.__name__: category for category in (EnvironmentWarning, ScheduleWarning)}

WHOLE = "every process of the run has stopped, and the checkpoints already written are whole"


@dataclass(frozen=True)
class Waits:
    """How long, in seconds, the caller waits for each thing a run's processes must do."""

    start: float = 300.0  # from launch to a process's first report: Python and torch imported
    join: float = 120.0  # from the last process's "joining" to every process joined
    stop: float = 10.0  # from SIGTERM to SIGKILL, for a process that does not end


class Stopped(Exception):
    """The caller was told to stop (SIGTERM) while its workers ran."""


def run_workers(
    request: dict[str, Any],
    processes: int,
    threads: int | None,
    progress: Progress,
    waits: Waits = Waits(),
) -> list[Path]:
    """Run `request` (a command and its keywords) on `processes` workers of `threads` threads each
    and wait for all of them; show process 0's progress with `progress` and return the
    checkpoints it wrote, or raise its refusal, or one sentence naming what ended the run."""
    words = json.dumps({k: str(v) if isinstance(v, Path) else v for k, v in request.items()})
    with tempfile.TemporaryDirectory(prefix="zrodlo-run-") as private, ExitStack() as held:
        reports = held.enter_context(Reports(progress))
        workers = [
            _Worker.launch(rank, processes, threads, words, Path(private) / "rendezvous")
            for rank in range(processes)
        ]
        held.callback(_close_lifelines, workers)
        try:
            with _stop_on_sigterm():
                _watch(workers, reports, waits)
        except KeyboardInterrupt:
            _stop(workers, waits.stop)
            raise Refusal(f"the run was stopped by Ctrl-C (SIGINT); {WHOLE}") from None
        except Stopped:
            _stop(workers, waits.stop)
            raise Refusal(f"the run was stopped by SIGTERM; {WHOLE}") from None
        except Refusal:
            _stop(workers, waits.stop)
            raise
    return [Path(path) for path in reports.written]


class _Worker:
    """One process of the run, its report pipe and what it said."""

    def __init__(
        self, rank: int, world: int, process: subprocess.Popen, report: int, lifeline: int
    ) -> None:
        self.rank, self.world, self.process = rank, world, process
        self.report, self.lifeline = report, lifeline
        self.messages = Messages()
        self.launched = time.monotonic()
        self.said: dict[str, float] = {}  # "started", "joining", "joined": when each came
        self.ended: float | None = None

    @classmethod
    def launch(
        cls, rank: int, world: int, threads: int | None, words: str, rendezvous: Path
    ) -> _Worker:
        report_read, report_write = os.pipe()
        lifeline_read, lifeline_write = os.pipe()  # the caller's end stays open until it ends
        environment = {
            **os.environ,
            "RANK": str(rank), "WORLD_SIZE": str(world),
            "LOCAL_RANK": str(rank), "LOCAL_WORLD_SIZE": str(world),
            RENDEZVOUS: str(rendezvous),
            LINE: f"{report_write} {lifeline_read}",
            # Threads that sleep while they wait: a spinning one takes a core another process
            # needs, which makes a run of more threads than cores several times slower.
            "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE"),
            "OMP_NUM_THREADS": str(threads) if threads else os.environ.get("OMP_NUM_THREADS", "1"),
            "GLOO_SOCKET_IFNAME": "lo",  # gloo listens on the loopback interface's address only
            QUIET_ON_LOST_CONTACT: "1",
        }  # fmt: skip
        process = subprocess.Popen(
            [sys.executable, "-m", "zrodlo.training.worker", words],
            env=environment, pass_fds=(report_write, lifeline_read), start_new_session=True,
        )  # fmt: skip
        os.close(report_write)
        os.close(lifeline_read)
        os.set_blocking(report_read, False)
        return cls(rank, world, process, report_read, lifeline_write)

    def __str__(self) -> str:
        return f"process {self.rank} of {self.world}"


def _close_lifelines(workers: list[_Worker]) -> None:
    """Let go of the lifelines once the run is over: every worker has ended by then."""
    for worker in workers:
        os.close(worker.lifeline)


def _watch(workers: list[_Worker], reports: Reports, waits: Waits) -> None:
    """Read every report until every process has ended; raise the sentence of what ended the run
    when it did not end well. A process's pipe closes a moment before the process can be waited
    for, so the watch goes on until each has been waited for, and its status read."""
    selector = selectors.DefaultSelector()
    for worker in workers:
        selector.register(worker.report, selectors.EVENT_READ, worker)
    while selector.get_map() or any(worker.ended is None for worker in workers):
        _read(selector, reports, timeout=0.1)
        now = time.monotonic()
        for worker in workers:
            if worker.ended is None and worker.process.poll() is not None:
                worker.ended = now
        failed = [w for w in workers if w.ended is not None and w.process.returncode != 0]
        if failed:
            _stop(workers, waits.stop)
            while selector.get_map():  # what they sent before they ended: a refusal, say
                _read(selector, reports, timeout=waits.stop)
            if reports.refusal is not None:  # process 0 met a refusal and said which
                raise Refusal(reports.refusal)
            raise Refusal(f"{_cause(failed)}; {WHOLE}")
        _check_bounds(workers, waits, now)
    selector.close()


def _check_bounds(workers: list[_Worker], waits: Waits, now: float) -> None:
    for worker in workers:
        if "started" not in worker.said and now - worker.launched > waits.start:
            raise Refusal(f"{worker} did not start within {waits.start:g} s; {WHOLE}")
    if all("joining" in worker.said for worker in workers):
        last = max(worker.said["joining"] for worker in workers)
        for worker in workers:
            if "joined" not in worker.said and now - last > waits.join:
                raise Refusal(f"{worker} did not join the others within {waits.join:g} s; {WHOLE}")


def _read(selector: selectors.BaseSelector, reports: Reports, timeout: float) -> None:
    """Take the reports that arrive within `timeout`; close the pipe of a process that ended."""
    for key, _ in selector.select(timeout=timeout):
        worker = key.data
        data = os.read(worker.report, 1 << 16)
        if not data:  # the process ended, or closed its end
            selector.unregister(worker.report)
            os.close(worker.report)
            continue
        for message in worker.messages.feed(data):
            worker.said.setdefault(message[0], time.monotonic())
            if worker.rank == 0:
                reports.take(message)


def _stop(workers: list[_Worker], grace: float) -> None:
    """End every process still running: SIGTERM, then SIGKILL for any alive after `grace`."""
    running = [w for w in workers if w.process.poll() is None]
    for worker in running:
        worker.process.send_signal(signal.SIGCONT)  # a stopped process takes SIGTERM only then
        worker.process.terminate()
    deadline = time.monotonic() + grace
    for worker in running:
        try:
            worker.process.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            worker.process.kill()
            worker.process.wait()
        worker.ended = worker.ended or time.monotonic()


def _cause(failed: list[_Worker]) -> str:
    """What ended the run: the first process that failed by itself. The others follow from it: a
    process that lost contact with it, or one the caller stopped with SIGTERM on seeing it."""
    consequences = {LOST_CONTACT_STATUS, -signal.SIGTERM}
    causes = [w for w in failed if w.process.returncode not in consequences] or failed
    first = min(causes, key=lambda w: (w.ended, w.rank))
    status = first.process.returncode
    if status < 0:
        return f"{first} was killed by {signal.Signals(-status).name}"
    return f"{first} ended with exit status {status}"


@contextmanager
def _stop_on_sigterm() -> Iterator[None]:
    """SIGTERM raises `Stopped` here while the workers run, so that they are ended with the
    caller; only the main thread can take a signal, and elsewhere the lifelines end them."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stopped(signum: int, frame: Any) -> None:
        raise Stopped

    before = signal.signal(signal.SIGTERM, stopped)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


class Reports:
    """The caller's side of process 0's reports: its progress shown, its warnings given, its
    refusal and the checkpoints it wrote kept."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self.refusal: str | None = None
        self.written: list[str] = []
        self._showing = ExitStack()
        self._on_step: Any = None

    def __enter__(self) -> Reports:
        return self

    def __exit__(self, *exception: object) -> None:
        self._showing.close()

    def take(self, message: list[Any]) -> None:
        kind, *values = message
        if kind == "start":
            self._on_step = self._showing.enter_context(self.progress(*values))
        elif kind == "step" and self._on_step is not None:
            self._on_step(StepRecord(**values[0]))
        elif kind == "scoring" and hasattr(self._on_step, "scoring"):
            self._on_step.scoring(*values)
        elif kind == "warning":
            warnings.warn(values[0], NOTICES.get(values[1], UserWarning), stacklevel=1)
        elif kind == "refusal":
            self.refusal = values[0]
        elif kind == "written":
            self.written = values[0]

"""Starting the processes of a data-parallel run on this machine (`processes=N`, `--processes N`).

The workers are started by torch.distributed's elastic agent, the launcher `torchrun` itself runs.
Each runs the library's entry point `python -m zrodlo.training.worker` with the request, never the
caller's script, so a script or a notebook starts them as the command line does. They meet at a
rendezvous on 127.0.0.1 and talk over the loopback interface, with the request's threads each, or
one where neither it nor OMP_NUM_THREADS says.

Process 0 reports to the process that started it over an authenticated socket on 127.0.0.1, in
JSON: the run's progress, step by step, its warnings, and its refusal or the checkpoints it wrote.
The caller's progress display and warnings then run in the caller's own process, and a refusal is
raised there with the sentence process 0 met.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import signal
import sys
import threading
import uuid
import warnings
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from multiprocessing.connection import Client, Connection, Listener
from pathlib import Path
from typing import Any

from zrodlo.storage.refusal import LOST_CONTACT_STATUS, QUIET_ON_LOST_CONTACT, Refusal
from zrodlo.training.environment import EnvironmentWarning
from zrodlo.training.records import Progress, StepRecord
from zrodlo.training.schedule import ScheduleWarning

# The warnings a run gives, by the name a worker sends with each.
NOTICES = {category.__name__: category for category in (EnvironmentWarning, ScheduleWarning)}
CHANNEL = "ZRODLO_REPORT_TO"  # host:port of the caller's socket, and its key in hex after a space


def launched() -> bool:
    """Whether this process is a worker of a torch.distributed launch (torchrun or --processes)."""
    return "WORLD_SIZE" in os.environ and "RANK" in os.environ


def run_workers(
    request: dict[str, Any], processes: int, threads: int | None, progress: Progress
) -> list[Path]:
    """Run `request` (a command and its keywords) on `processes` workers of `threads` threads each
    and wait for all of them; show process 0's progress with `progress` and return the
    checkpoints it wrote, or raise its refusal."""
    # The agent reports a failed worker in log lines and a summary of its own; ours says it once.
    logging.getLogger("torch.distributed.elastic").setLevel(logging.CRITICAL)
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    key = secrets.token_bytes(32)
    listener = Listener(("127.0.0.1", 0), authkey=key)
    host, port = listener.address
    report = _Report(listener, progress)
    environment = {
        CHANNEL: f"{host}:{port} {key.hex()}",
        # Threads that sleep while they wait: a spinning one takes a core another process needs,
        # which makes a run of more threads than cores several times slower.
        "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE"),
        "OMP_NUM_THREADS": str(threads) if threads else os.environ.get("OMP_NUM_THREADS", "1"),
        "GLOO_SOCKET_IFNAME": os.environ.get("GLOO_SOCKET_IFNAME", "lo"),
        QUIET_ON_LOST_CONTACT: "1",
    }
    config = LaunchConfig(
        min_nodes=1,
        max_nodes=1,
        nproc_per_node=processes,
        run_id=f"zrodlo-{uuid.uuid4().hex}",
        rdzv_backend="c10d",
        rdzv_endpoint="127.0.0.1:0",
        max_restarts=0,
        monitor_interval=0.1,
        start_method="spawn",
        local_addr="127.0.0.1",
    )
    words = json.dumps({key: _plain(value) for key, value in request.items()})
    with _environment(environment):
        report.start()
        try:
            elastic_launch(config, sys.executable)("-m", "zrodlo.training.worker", words)
        except ChildFailedError as failed:
            report.finish()
            if report.refusal is not None:  # process 0 met a refusal and said which
                raise Refusal(report.refusal) from None
            rank, exitcode = _cause(failed.failures)
            raise Refusal(
                f"process {rank} of {processes} {_ended(exitcode)}; every process of the run "
                "has stopped, and the checkpoints already written are whole"
            ) from None
        finally:
            report.finish()
    return [Path(path) for path in report.written]


class _Report:
    """The caller's side of process 0's reports, read on a thread while the agent waits."""

    def __init__(self, listener: Listener, progress: Progress) -> None:
        self.listener, self.progress = listener, progress
        self.refusal: str | None = None
        self.written: list[str] = []
        self.thread = threading.Thread(target=self._read, name="zrodlo-report", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def finish(self) -> None:
        self.listener.close()  # a report never opened leaves accept() waiting: this ends it
        self.thread.join(timeout=10)

    def _read(self) -> None:
        try:
            connection = self.listener.accept()
        except OSError:
            return
        with connection, ExitStack() as showing:
            on_step = None
            while True:
                try:
                    kind, *values = json.loads(connection.recv_bytes())
                except (EOFError, OSError):
                    return
                if kind == "start":
                    on_step = showing.enter_context(self.progress(*values))
                elif kind == "step" and on_step is not None:
                    on_step(StepRecord(**values[0]))
                elif kind == "scoring" and hasattr(on_step, "scoring"):
                    on_step.scoring(*values)
                elif kind == "warning":
                    category = NOTICES.get(values[1], UserWarning)
                    warnings.warn(values[0], category, stacklevel=1)
                elif kind == "refusal":
                    self.refusal = values[0]
                elif kind == "written":
                    self.written = values[0]


def report_channel() -> Connection | None:
    """Process 0's connection to the caller that started the workers, or None where no caller
    waits for reports (under torchrun, or in another process)."""
    address = os.environ.get(CHANNEL)
    if address is None or os.environ.get("RANK") != "0":
        return None
    place, key = address.split()
    host, port = place.rsplit(":", 1)
    return Client((host, int(port)), authkey=bytes.fromhex(key))


def send(connection: Connection, *message: Any) -> None:
    """One report, as JSON."""
    connection.send_bytes(json.dumps([_plain(part) for part in message]).encode())


def _plain(value: Any) -> Any:
    return str(value) if isinstance(value, Path) else value


@contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    """Set variables for the workers the agent starts, and put the caller's back after."""
    before = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _cause(failures: dict) -> tuple[int, int]:
    """The rank and exit status of the failure that ended the run. The others follow from it: a
    process that lost contact with it, or one the agent stopped with SIGTERM on seeing it."""
    consequences = {LOST_CONTACT_STATUS, -signal.SIGTERM}
    causes = {rank: f for rank, f in failures.items() if f.exitcode not in consequences}
    # Failures seen in one poll share a timestamp (whole seconds); the agent records them in order.
    rank, failure = min((causes or failures).items(), key=lambda item: item[1].timestamp)
    return rank, failure.exitcode


def _ended(exitcode: int) -> str:
    if exitcode < 0:
        return f"was killed by {signal.Signals(-exitcode).name}"
    return f"ended with exit status {exitcode}"

"""Starting the processes of a data-parallel run on this machine (`--processes N`).

The workers are started by torch.distributed's elastic agent, the launcher `torchrun` itself runs,
so a run started with `--processes N` and one started with `torchrun --standalone
--nproc-per-node N` are the same run: each worker is the same `zrodlo` command, which finds its
rank in the environment the agent sets. They meet at a rendezvous on 127.0.0.1 and talk over the
loopback interface, with --threads threads each, or one where neither it nor OMP_NUM_THREADS says.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import uuid

from zrodlo.storage.refusal import LOST_CONTACT_STATUS, QUIET_ON_LOST_CONTACT, Refusal, Reported
from zrodlo.training.plan import RunPlan
from zrodlo.training.ranks import check_processes, check_share


def launched() -> bool:
    """Whether this process is a worker of a torch.distributed launch (torchrun or --processes)."""
    return "WORLD_SIZE" in os.environ and "RANK" in os.environ


def run_as_workers(processes: int, plan: RunPlan, threads: int | None = None) -> bool:
    """Whether this command ran as `processes` workers of `threads` threads each: it did, and they
    have ended, when more than one is asked for and this process is not one of them already."""
    if processes == 1 or launched():
        return False
    check_processes(processes)
    check_share(processes, plan.batch_size, plan.micro_batch)
    launch(processes, sys.argv[1:], threads)
    return True


def launch(processes: int, argv: list[str], threads: int | None = None) -> None:
    """Run `zrodlo *argv` as `processes` workers and wait for all of them.

    A refusal is printed by worker 0, which has already said why, so it ends this process with
    `Reported`; a worker ended another way (a signal, an error) is said here.
    """
    # The agent reports a failed worker in log lines and a summary of its own; ours says it once.
    logging.getLogger("torch.distributed.elastic").setLevel(logging.CRITICAL)
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    if threads is not None:
        os.environ["OMP_NUM_THREADS"] = str(threads)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    # Threads that sleep while they wait: a spinning one takes a core another process needs, which
    # makes a run of more threads than cores several times slower.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
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
    os.environ[QUIET_ON_LOST_CONTACT] = "1"
    try:
        elastic_launch(config, sys.executable)(sys.argv[0], *argv)
    except ChildFailedError as failed:
        rank, exitcode = _cause(failed.failures)
        if rank == 0 and exitcode == 1:
            raise Reported() from None  # process 0 has printed its refusal
        raise Refusal(
            f"process {rank} of {processes} {_ended(exitcode)}; every process of the run "
            "has stopped, and the checkpoints already written are whole"
        ) from None


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

"""Starting the processes of a data-parallel run on this machine (`--processes N`).

The workers are started by torch.distributed's elastic agent, the launcher `torchrun` itself runs,
so a run started with `--processes N` and one started with `torchrun --standalone
--nproc-per-node N` are the same run: each worker is the same `zrodlo` command, which finds its
rank in the environment the agent sets. They meet at a rendezvous on 127.0.0.1 and talk over the
loopback interface, with one thread each unless OMP_NUM_THREADS says otherwise.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import uuid

from zrodlo.parallel import check_processes, check_share
from zrodlo.plan import RunPlan
from zrodlo.refusal import Refusal, Reported


def launched() -> bool:
    """Whether this process is a worker of a torch.distributed launch (torchrun or --processes)."""
    return "WORLD_SIZE" in os.environ and "RANK" in os.environ


def run_as_workers(processes: int, plan: RunPlan) -> bool:
    """Whether this command ran as `processes` workers: it did, and they have ended, when more
    than one is asked for and this process is not one of them already."""
    if processes == 1 or launched():
        return False
    check_processes(processes)
    check_share(processes, plan.batch_size, plan.micro_batch)
    launch(processes, sys.argv[1:])
    return True


def launch(processes: int, argv: list[str]) -> None:
    """Run `zrodlo *argv` as `processes` workers and wait for all of them.

    A refusal is printed by worker 0, which has already said why, so it ends this process with
    `Reported`; a worker ended another way (a signal, an error) is said here.
    """
    # The agent reports a failed worker in log lines and a summary of its own; ours says it once.
    logging.getLogger("torch.distributed.elastic").setLevel(logging.CRITICAL)
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    os.environ.setdefault("OMP_NUM_THREADS", "1")
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
    try:
        elastic_launch(config, sys.executable)(sys.argv[0], *argv)
    except ChildFailedError as failed:
        first = failed.failures.get(0)
        if first is not None and first.exitcode == 1:
            raise Reported() from None
        # The first to fail is the cause; the agent then stopped the others.
        rank, failure = min(failed.failures.items(), key=lambda item: item[1].timestamp)
        raise Refusal(
            f"process {rank} of {processes} {_ended(failure.exitcode)}; every process of the run "
            "has stopped, and the checkpoints already written are whole"
        ) from None


def _ended(exitcode: int) -> str:
    if exitcode < 0:
        return f"was killed by {signal.Signals(-exitcode).name}"
    return f"ended with exit status {exitcode}"

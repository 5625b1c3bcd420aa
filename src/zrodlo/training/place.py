"""Where this process stands in a data-parallel run, as its launcher set the environment: RANK and
WORLD_SIZE (torchrun, or the caller of `--processes`), and where the processes meet. It imports
no torch, so the command line asks it cheaply whether this process is the one that speaks.
"""

from __future__ import annotations

import os

from zrodlo.storage.refusal import Refusal

# The file store the processes of `--processes N` meet through, in the caller's private directory;
# under torchrun they meet where MASTER_ADDR and MASTER_PORT say.
RENDEZVOUS = "ZRODLO_RENDEZVOUS"
_ALONE = "unset them to run alone, or start the run with --processes or torchrun"


def launched() -> bool:
    """Whether this process is one of a data-parallel run's (started by --processes or torchrun)."""
    return place() is not None


def place() -> tuple[int, int] | None:
    """This process's rank and the run's number of processes, where a launcher set them (RANK and
    WORLD_SIZE); None where it runs alone. An environment that half describes a launch (one of
    them, a value that is not a rank, no place to meet) is refused with a sentence rather than
    left to torch.distributed's errors."""
    rank, world = os.environ.get("RANK"), os.environ.get("WORLD_SIZE")
    if rank is None and world is None:
        return None
    if rank is None or world is None:
        named, missing = ("RANK", "WORLD_SIZE") if world is None else ("WORLD_SIZE", "RANK")
        raise Refusal(
            f"the environment sets {named} but not {missing}; a launcher of a data-parallel run "
            f"sets both, so {_ALONE}"
        )
    whole = all(value.isascii() and value.isdigit() for value in (world, rank))
    if not (whole and int(rank) < int(world)):
        raise Refusal(
            f"the environment sets WORLD_SIZE={world!r} and RANK={rank!r}, which are not a "
            f"number of processes and a rank below it; {_ALONE}"
        )
    if RENDEZVOUS not in os.environ and int(world) > 1:
        meeting = [name for name in ("MASTER_ADDR", "MASTER_PORT") if name not in os.environ]
        if meeting:
            raise Refusal(
                f"the environment sets WORLD_SIZE={world} and RANK={rank} but not "
                f"{' and '.join(meeting)}, where the processes of a run meet; {_ALONE}"
            )
    return int(rank), int(world)


def speaks() -> bool:
    """Whether this process prints the run's sentences: it runs alone, or is process 0, or the
    environment that would say otherwise is itself refused (and that refusal must be read)."""
    try:
        where = place()
    except Refusal:
        return True
    return where is None or where[0] == 0

"""The processes of a data-parallel run: which micro-batches of a step each computes, and the exact
sum of their gradients.

A run of W processes shares each step's k micro-batches out in contiguous blocks, rank r taking
micro-batches r*k/W .. (r+1)*k/W - 1. Each rank computes the gradient of every micro-batch of its
block alone; then the ranks add them up in micro-batch order along a chain: rank r receives the sum
of the micro-batches before its block from rank r-1, adds its own one at a time and passes the sum
to rank r+1. The last rank's sum, the step's gradient, goes back round the ring (W-1 to 0, 0 to 1,
...) to every rank. That is the same left fold, addition for addition, as one process accumulating
its micro-batches in order, so the weights and AdamW state after every step are the one-process
run's, bit for bit, at every world size; an all_reduce would add in an order that depends on the
world size. Each rank sends at most two gradients a step.

Every collective has a timeout, so a rank that died or hangs ends the others with an error instead
of a wait without end.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist

from zrodlo.storage.refusal import LostContact, Refusal
from zrodlo.training.channel import tell
from zrodlo.training.place import RENDEZVOUS, place
from zrodlo.training.record import MAX_THREADS

_CPU = torch.device("cpu")
# The longest any rank waits for another: long enough for rank 0 to write a checkpoint between two
# steps, short enough that a lost rank does not hold the others for long.
COLLECTIVE_TIMEOUT = timedelta(minutes=10)


@dataclass(frozen=True)
class Ranks:
    """This process's place in the run: rank 0 of 1 when it runs alone."""

    rank: int = 0
    world: int = 1
    device: torch.device = _CPU

    @property
    def leads(self) -> bool:
        """Whether this rank writes: checkpoints, records and progress are rank 0's alone."""
        return self.rank == 0

    def block(self, count: int) -> range:
        """This rank's contiguous share of `count` items, the first count % world ranks one more."""
        per, extra = divmod(count, self.world)
        start = self.rank * per + min(self.rank, extra)
        return range(start, start + per + (self.rank < extra))

    @contextmanager
    def _talking(self) -> Iterator[None]:
        """Turn torch.distributed's error for a peer that died or hangs into a sentence."""
        try:
            yield
        except (RuntimeError, dist.DistError) as error:
            raise LostContact(self.rank, self.world, error) from None

    def agree(self, ok: bool) -> bool:
        """Whether every rank is ok, known on every rank: a refusal one rank meets stops all."""
        if self.world == 1:
            return ok
        flag = torch.tensor([int(ok)], dtype=torch.int32, device=self.device)
        with self._talking():
            dist.all_reduce(flag, op=dist.ReduceOp.MIN)
        return bool(flag.item())

    def gather(self, values: list[float], count: int) -> list[float]:
        """Every rank's `values` in rank order, where rank r gives len(block(count)[r]) of them;
        float64 carries each Python float exactly."""
        if self.world == 1:
            return values
        width = -(-count // self.world)
        mine = torch.full((width,), float("nan"), dtype=torch.float64, device=self.device)
        mine[: len(values)] = torch.tensor(values, dtype=torch.float64)
        parts = [torch.empty_like(mine) for _ in range(self.world)]
        with self._talking():
            dist.all_gather(parts, mine)
        sizes = [len(Ranks(r, self.world).block(count)) for r in range(self.world)]
        return [v for part, size in zip(parts, sizes, strict=True) for v in part[:size].tolist()]

    def ordered_sum(self, gradients: list[torch.Tensor]) -> torch.Tensor:
        """The sum of every rank's micro-batch gradients (each (P,) float32, this rank's in
        micro-batch order), added in rank then micro-batch order, on every rank."""
        if self.world == 1:
            total = gradients[0].clone()
            for gradient in gradients[1:]:
                total.add_(gradient)
            return total
        with self._talking():
            return self._chain_sum(gradients)

    def _chain_sum(self, gradients: list[torch.Tensor]) -> torch.Tensor:
        previous, following = self.rank - 1, self.rank + 1
        total = None
        if self.rank > 0:
            total = torch.empty_like(gradients[0])
            dist.recv(total, previous)
        for gradient in gradients:
            total = gradient.clone() if total is None else total.add_(gradient)
        if following < self.world:
            dist.send(total, following)
        # The whole sum is on the last rank; pass it round: last -> 0 -> 1 -> ... -> last - 1.
        last = self.world - 1
        if self.rank == last:
            dist.send(total, 0)
        else:
            dist.recv(total, last if self.rank == 0 else previous)
            if following < last:
                dist.send(total, following)
        return total


def join(device: torch.device) -> Ranks:
    """This process's ranks: alone, or one of a data-parallel run's processes, joined over gloo on
    the CPU or nccl on CUDA. It tells the caller of --processes when it is joining and when it
    has joined, so that the caller bounds the wait between the two."""
    where = place()
    if where is None or where[1] == 1:
        return Ranks(device=device)
    rank, world = where
    backend = "nccl" if device.type == "cuda" else "gloo"
    if device.type == "cuda":
        torch.cuda.set_device(device)  # nccl talks from the current GPU
    if not dist.is_initialized():
        tell("joining")
        rendezvous = os.environ.get(RENDEZVOUS)
        if rendezvous is None:  # torchrun's: MASTER_ADDR and MASTER_PORT
            dist.init_process_group(backend, timeout=COLLECTIVE_TIMEOUT)
        else:
            store = dist.FileStore(rendezvous, world)
            store.set_timeout(COLLECTIVE_TIMEOUT)
            dist.init_process_group(
                backend, store=store, rank=rank, world_size=world, timeout=COLLECTIVE_TIMEOUT
            )
        tell("joined")
    return Ranks(dist.get_rank(), dist.get_world_size(), device)


def check_share(world: int, batch_size: int, micro_batch: int) -> None:
    """Refuse a world size that does not divide a step's micro-batches."""
    micro_batches = batch_size // micro_batch
    if micro_batches % world:
        raise Refusal(
            f"{world} processes do not divide the {micro_batches} micro-batches of a step "
            f"(--batch-size {batch_size} in micro-batches of {micro_batch}); every process "
            "computes an equal share of each step"
        )


def check_processes(processes: int) -> None:
    if processes < 1:
        raise Refusal(f"--processes is {processes}; it must be a whole number of one or more")


def check_threads(threads: int | None) -> None:
    """Refuse a thread count no run computes on: what train accepts, a resume of it accepts too."""
    if threads is not None and threads < 1:
        raise Refusal(f"--threads is {threads}; it must be a whole number of one or more")
    if threads is not None and threads > MAX_THREADS:
        raise Refusal(f"--threads is {threads}; a run computes on 1 to {MAX_THREADS} threads")


def use_threads(threads: int | None) -> None:
    """Compute on `threads` threads, or on torch's own count (OMP_NUM_THREADS, else the cores).

    Matrix products split their sums by thread, so the count is part of what a run's bits depend
    on, and trainer.json records it."""
    if threads is not None:
        torch.set_num_threads(threads)


def local_rank() -> int:
    """This process's place among the processes of its machine (LOCAL_RANK under a launcher)."""
    return int(os.environ.get("LOCAL_RANK", "0"))

"""Dropout keep-masks drawn from a ChaCha20 stream: on the CPU from OpenSSL's keystream, on a GPU
by torch kernels that compute the same words where the mask is used.

Element e of a mask reads the 16-bit half e % 2 (low half first) of word e // 2 and is kept iff
that half is at least round(p * 65536); the drop rate is therefore that threshold / 65536.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
import torch

from zrodlo.draws.chacha import (
    MASK32,
    WORDS_PER_BLOCK,
    Stream,
    check_range,
    initial_state,
    stream_words,
)


def _drop_threshold(p: float) -> int:
    if not (isinstance(p, (float, int)) and not isinstance(p, bool) and 0.0 <= p <= 1.0):
        raise ValueError(f"dropout p is {p!r}; it must be a number from 0 to 1")
    return round(p * 65536)


def drop_rate(p: float) -> float:
    """The probability with which a mask drawn for rate `p` drops an element: p quantised to the
    16-bit threshold, which kept values must be scaled by to keep the mean (exact in a float)."""
    return _drop_threshold(p) / 65536


def keep_mask(stream: Stream, start: int, count: int, p: float) -> np.ndarray:
    """bool keep-mask, shape (count,): element e kept iff half e%2 of word e//2 >= round(p*65536)."""
    threshold = _drop_threshold(p)
    first, end = check_range(start, count, 1, 2)
    if threshold == 0:  # p == 0 keeps everything; no need to compute the words
        return np.ones(count, dtype=bool)
    halves = np.asarray(stream_words(stream, first, end), dtype="<u4").view(
        "<u2"
    )  # (2*(end-first),)
    offset = start - 2 * first
    return halves[offset : offset + count] >= threshold


def keep_mask_tensor(
    stream: Stream, start: int, count: int, p: float, device: torch.device
) -> torch.Tensor:
    """The bits of `keep_mask` as a torch.bool tensor of shape (count,) on `device`.

    On the CPU it uses `keystream`; on any other device the words are computed there, so a GPU
    never waits on the host for a mask: on CUDA by one compiled kernel, elsewhere (Metal) op by
    op.
    """
    device = torch.device(device)
    if device.type == "cpu":
        return torch.from_numpy(keep_mask(stream, start, count, p))
    return _keep_mask_on_device(stream, start, count, p, device, fused=device.type == "cuda")


def _keep_mask_on_device(
    stream: Stream, start: int, count: int, p: float, device: torch.device, fused: bool
) -> torch.Tensor:
    """`keep_mask` computed with torch integer ops on `device` (any device, the CPU included):
    by compiled kernels if `fused`, else op by op as `block_words` computes words."""
    threshold = _drop_threshold(p)
    first, end = check_range(start, count, 1, 2)
    if threshold == 0 or count == 0:
        return torch.ones(count, dtype=torch.bool, device=device)
    block0 = first // WORDS_PER_BLOCK
    blocks = (end - 1) // WORDS_PER_BLOCK - block0 + 1
    offset = int(start) - 2 * block0 * WORDS_PER_BLOCK
    init = torch.tensor(initial_state(stream.key, 0, stream.nonce), dtype=torch.int64)
    compute = _fused_mask_of_words if fused else _mask_of_words
    return compute(init.to(device), block0, blocks, offset, count, threshold)


def block_words(init: torch.Tensor, counter: int, blocks: int) -> torch.Tensor:
    """Words (blocks*16,) int64 of blocks counter.. from the initial state (16,) int64 of block 0,
    computed with torch integer ops where `init` lies. torch has no general uint32 arithmetic, so
    each word is held in an int64 and masked with 0xFFFFFFFF after every addition and rotation,
    which is exact on every backend."""
    init = init[:, None].repeat(1, blocks)  # (16, blocks)
    init[12] = torch.arange(counter, counter + blocks, dtype=torch.int64, device=init.device)
    a, b, c, d = (init[4 * r : 4 * r + 4].clone() for r in range(4))  # each (4, blocks)

    def rotl(x: torch.Tensor, n: int) -> torch.Tensor:
        return ((x << n) & MASK32) | (x >> (32 - n))

    def qr(a, b, c, d):
        a = (a + b) & MASK32
        d = rotl(d ^ a, 16)
        c = (c + d) & MASK32
        b = rotl(b ^ c, 12)
        a = (a + b) & MASK32
        d = rotl(d ^ a, 8)
        c = (c + d) & MASK32
        b = rotl(b ^ c, 7)
        return a, b, c, d

    for _ in range(10):
        a, b, c, d = qr(a, b, c, d)
        b, c, d = b.roll(-1, 0), c.roll(-2, 0), d.roll(-3, 0)
        a, b, c, d = qr(a, b, c, d)
        b, c, d = b.roll(1, 0), c.roll(2, 0), d.roll(3, 0)
    out = (torch.cat([a, b, c, d]) + init) & MASK32  # (16, blocks)
    return out.T.contiguous().reshape(-1)  # (blocks*16,)


def _mask_of_words(
    init: torch.Tensor, counter: int, blocks: int, offset: int, count: int, threshold: int
) -> torch.Tensor:
    """Keep-mask (count,) bool: halves offset.. of the words of blocks counter.., each kept iff
    at least `threshold` (see `keep_mask`)."""
    w = block_words(init, counter, blocks)  # (blocks*16,) int64
    halves = torch.stack([w & 0xFFFF, w >> 16], dim=-1).reshape(-1)  # (blocks*32,) low half first
    return halves[offset : offset + count] >= threshold


# The eight quarter rounds of a double round: four on the columns, four on the diagonals.
_QUARTER_ROUNDS = (
    (0, 4, 8, 12), (1, 5, 9, 13), (2, 6, 10, 14), (3, 7, 11, 15),
    (0, 5, 10, 15), (1, 6, 11, 12), (2, 7, 8, 13), (3, 4, 9, 14),
)  # fmt: skip


def _double_round(x: torch.Tensor) -> torch.Tensor:
    """One column round and one diagonal round of RFC 8439 on states (16, blocks) int64, each row
    a word: element-wise on rows only, so a compiler fuses it into one loop over the blocks."""
    x = list(x.unbind(0))

    def mix(add: int, to: int, into: int, bits: int) -> None:  # to += add; into ^= to; <<< bits
        x[to] = (x[to] + x[add]) & MASK32
        mixed = x[into] ^ x[to]
        x[into] = ((mixed << bits) & MASK32) | (mixed >> (32 - bits))

    def quarter(a: int, b: int, c: int, d: int) -> None:
        mix(b, a, d, 16)
        mix(d, c, b, 12)
        mix(b, a, d, 8)
        mix(d, c, b, 7)

    for a, b, c, d in _QUARTER_ROUNDS:
        quarter(a, b, c, d)
    return torch.stack(x)


def _finish_mask(
    x: torch.Tensor, start: torch.Tensor, offset: int, count: int, threshold: int
) -> torch.Tensor:
    """Keep-mask (count,) bool from states x (16, blocks) after the rounds and the states they
    started from: the words, split into 16-bit halves from offset, each kept iff >= threshold."""
    w = ((x + start) & MASK32).T.reshape(-1)  # (blocks*16,) in stream order
    halves = torch.stack([w & 0xFFFF, w >> 16], dim=-1).reshape(-1)  # (blocks*32,) low half first
    return halves[offset : offset + count] >= threshold


@functools.cache
def _compiled() -> tuple[Callable[..., torch.Tensor], Callable[..., torch.Tensor]]:
    """`_double_round` and `_finish_mask` compiled by torch.compile, their sizes symbolic so that
    one compile serves masks of every size (the first call compiles: seconds)."""
    return (
        torch.compile(_double_round, dynamic=True, fullgraph=True),
        torch.compile(_finish_mask, dynamic=True, fullgraph=True),
    )


def _fused_mask_of_words(
    init: torch.Tensor, counter: int, blocks: int, offset: int, count: int, threshold: int
) -> torch.Tensor:
    """What `_mask_of_words` computes, in fourteen launches where it takes some six hundred: three
    for the start states, ten compiled double rounds and one compiled finish. (A single kernel of all
    twenty rounds ran faster still but took one and a half to two minutes to compile here.)"""
    double_round, finish = _compiled()
    start = init[:, None].repeat(1, blocks)  # (16, blocks)
    start[12] = torch.arange(counter, counter + blocks, dtype=torch.int64, device=init.device)
    x = start
    for _ in range(10):
        x = double_round(x)
    return finish(x, start, offset, count, threshold)

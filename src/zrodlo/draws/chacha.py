"""ChaCha20 (RFC 8439) as every seeded draw of Zrodlo reads it: streams addressed by counter.

A draw is addressed, never consumed: a `Stream` names a key (the seed) and a nonce (the purpose and
two indices), and word w of the stream is word w % 16 of the block with counter w // 16. Every draw
is a pure function of (stream, start, count), so element i computed alone equals element i of any
longer draw that covers it, and a resumed run needs nothing but its step count to draw the same.

The keystream comes from PyCA cryptography (OpenSSL); `zrodlo.draws.masks` computes the same words
with torch on the device a dropout mask is used on. The tests hold both to RFC 8439's vectors and
to a reference of their own.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms

from zrodlo.storage.refusal import Refusal

# The generator and the layout of every draw below. Checkpoints record it; a build whose draws
# differ in any bit must change the version so that it refuses to resume a run it cannot continue.
GENERATOR: str = "chacha20-rfc8439/zrodlo-draws-v2"

SEED_MAX = 2**64 - 1

MASK32 = 0xFFFFFFFF
WORDS_PER_BLOCK = 16
_BLOCK_BYTES = 64
# RFC 8439's block counter is 32 bits; OpenSSL would carry past it into the nonce, so we stop there.
BLOCKS_PER_STREAM = 2**32
_WORDS_PER_STREAM = BLOCKS_PER_STREAM * WORDS_PER_BLOCK
# "expand 32-byte k" as four little-endian words (RFC 8439 2.3).
_CONSTANTS = (0x61707865, 0x3320646E, 0x79622D32, 0x6B206574)


class Purpose(enum.IntEnum):
    """What a stream is drawn for; it is the first nonce word, so purposes never share bits."""

    INIT = 1
    WINDOW_ORDER = 2
    DROPOUT = 3
    SAMPLING = 4
    SCORED_WINDOWS = 5
    ADAPTERS = 6


def check_seed(value: object) -> int:
    """Return `value` as an int if it is a seed (a whole number in [0, SEED_MAX]), else refuse."""
    # bool is an int subclass, but `--seed True` is a mistake, not the seed 1.
    if (
        isinstance(value, (int, np.integer))
        and not isinstance(value, (bool, np.bool_))
        and 0 <= int(value) <= SEED_MAX
    ):
        return int(value)
    raise Refusal(f"--seed is {value!r}; it must be a whole number from 0 to 18446744073709551615")


def _check_u32(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} is {value!r}; it must be an int")
    if not 0 <= int(value) <= MASK32:
        raise ValueError(f"{name} is {value}; it must lie in [0, 2**32)")
    return int(value)


@dataclass(frozen=True)
class Stream:
    """One counter-addressed ChaCha20 stream: the key from `seed`, the nonce from `purpose`, a, b.

    key   = seed as 8 bytes little-endian, then 24 zero bytes
    nonce = purpose, a, b as three little-endian uint32
    """

    seed: int
    purpose: Purpose
    a: int = 0
    b: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "seed", check_seed(self.seed))
        object.__setattr__(self, "purpose", Purpose(self.purpose))
        object.__setattr__(self, "a", _check_u32("a", self.a))
        object.__setattr__(self, "b", _check_u32("b", self.b))

    @property
    def key(self) -> bytes:
        return self.seed.to_bytes(8, "little") + bytes(24)

    @property
    def nonce(self) -> bytes:
        return struct.pack("<III", int(self.purpose), self.a, self.b)


def check_block_args(key: bytes, counter: int, nonce: bytes, blocks: int) -> None:
    """Refuse a key, nonce or block range that RFC 8439 does not define."""
    if len(key) != 32:
        raise ValueError(f"a ChaCha20 key is 32 bytes, not {len(key)}")
    if len(nonce) != 12:
        raise ValueError(f"a ChaCha20 nonce is 12 bytes, not {len(nonce)}")
    if blocks < 0 or counter < 0 or counter + blocks > BLOCKS_PER_STREAM:
        raise ValueError(
            f"blocks {counter}..{counter + blocks - 1} lie outside the 32-bit block counter"
        )


def initial_state(key: bytes, counter: int, nonce: bytes) -> list[int]:
    """The sixteen words a block starts from (RFC 8439 2.3): constants, key, counter, nonce."""
    return [
        *_CONSTANTS,
        *struct.unpack("<8I", key),
        counter,
        *struct.unpack("<3I", nonce),
    ]


def keystream(key: bytes, nonce: bytes, counter: int, blocks: int) -> np.ndarray:
    """Blocks counter..counter+blocks-1 as uint32 words, shape (blocks*16,), through PyCA
    cryptography (OpenSSL).

    PyCA's ChaCha20 takes a 16-byte nonce: the 4-byte little-endian block counter, then the
    RFC 8439 12-byte nonce. The keystream is the encryption of zeros.
    """
    check_block_args(key, counter, nonce, blocks)
    out = np.empty(blocks * WORDS_PER_BLOCK, dtype="<u4")
    if blocks == 0:
        return out.astype(np.uint32)
    cipher = Cipher(algorithms.ChaCha20(key, counter.to_bytes(4, "little") + nonce), mode=None)
    cipher.encryptor().update_into(bytes(blocks * _BLOCK_BYTES), memoryview(out).cast("B"))
    # The bytes are little-endian words whatever the host; on a little-endian host this is a no-op.
    return out.astype(np.uint32, copy=False)


def check_range(start: int, count: int, each: int, per: int = 1) -> tuple[int, int]:
    """Validate an element range and return the word range [first, end) of the stream it reads.

    Each element reads `each` words, or `per` elements share one word (keep-masks use halves).
    """
    for name, value in (("start", start), ("count", count)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
            raise ValueError(f"{name} is {value!r}; it must be a whole number, not negative")
    start, count = int(start), int(count)
    first = start * each // per
    end = -(-(start + count) * each // per)
    if end > _WORDS_PER_STREAM:
        raise ValueError(
            f"elements {start}..{start + count - 1} need stream words up to {end - 1}, past the "
            f"last word {_WORDS_PER_STREAM - 1} of a 32-bit block counter"
        )
    return first, end


def stream_words(stream: Stream, first: int, end: int) -> np.ndarray:
    """Words first..end-1 of a stream (a range `check_range` has checked), as uint32."""
    if end <= first:
        return np.empty(0, dtype=np.uint32)
    block0 = first // WORDS_PER_BLOCK
    blocks = (end - 1) // WORDS_PER_BLOCK - block0 + 1
    ks = keystream(stream.key, stream.nonce, block0, blocks)
    offset = first - block0 * WORDS_PER_BLOCK
    return ks[offset : offset + (end - first)]


def words(stream: Stream, start: int, count: int) -> np.ndarray:
    """Words start..start+count-1 of the stream as uint32, shape (count,).

    Word w is word w % 16 of block w // 16; positions past the 32-bit block counter raise
    ValueError rather than wrap.
    """
    first, end = check_range(start, count, 1)
    return stream_words(stream, first, end)

"""ChaCha20 against RFC 8439, its three implementations against each other, and the draws."""

from __future__ import annotations

import hashlib
import math
import struct

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from oracles import keystream_torch, permutation
from zrodlo.draws import floats, masks
from zrodlo.draws.bijection import bijection
from zrodlo.draws.chacha import GENERATOR, SEED_MAX, Purpose, Stream, check_seed, keystream, words
from zrodlo.draws.floats import normal, uniform
from zrodlo.draws.masks import keep_mask, keep_mask_tensor
from zrodlo.storage.refusal import Refusal

CPU = torch.device("cpu")


def _hex(text: str) -> bytes:
    return bytes.fromhex("".join(text.split()))


def _bytes(w: np.ndarray) -> bytes:
    return np.asarray(w, dtype="<u4").tobytes()


def _torch_bytes(w: torch.Tensor) -> bytes:
    return _bytes(w.cpu().numpy().astype(np.uint32))


# ---------------------------------------------------------------------------------------------
# Two independent references the product's keystreams are held to: RFC 8439 in plain Python, and
# the same vectorised over blocks with numpy.

MASK32 = 0xFFFFFFFF
SIGMA = (0x61707865, 0x3320646E, 0x79622D32, 0x6B206574)  # "expand 32-byte k", RFC 8439 2.3


def check_block_args(key: bytes, counter: int, nonce: bytes, blocks: int) -> None:
    if len(key) != 32 or len(nonce) != 12:
        raise ValueError("a ChaCha20 key is 32 bytes and a nonce 12")
    if blocks < 0 or counter < 0 or counter + blocks > 2**32:
        raise ValueError("the blocks lie outside the 32-bit block counter")


def initial_state(key: bytes, counter: int, nonce: bytes) -> list[int]:
    return [*SIGMA, *struct.unpack("<8I", key), counter, *struct.unpack("<3I", nonce)]


def quarter_round(a: int, b: int, c: int, d: int) -> tuple[int, int, int, int]:
    """RFC 8439 2.1 on four 32-bit words."""

    def rotl(x: int, n: int) -> int:
        return ((x << n) & MASK32) | (x >> (32 - n))

    a = (a + b) & MASK32
    d = rotl(d ^ a, 16)
    c = (c + d) & MASK32
    b = rotl(b ^ c, 12)
    a = (a + b) & MASK32
    d = rotl(d ^ a, 8)
    c = (c + d) & MASK32
    b = rotl(b ^ c, 7)
    return a, b, c, d


def block_reference(key: bytes, counter: int, nonce: bytes) -> bytes:
    """RFC 8439 2.3: the 64-byte block `counter` of (key, nonce), in plain Python."""
    check_block_args(key, counter, nonce, 1)
    state = initial_state(key, counter, nonce)
    x = list(state)
    for _ in range(10):
        for i, j, k, m in (
            (0, 4, 8, 12),
            (1, 5, 9, 13),
            (2, 6, 10, 14),
            (3, 7, 11, 15),
            (0, 5, 10, 15),
            (1, 6, 11, 12),
            (2, 7, 8, 13),
            (3, 4, 9, 14),
        ):
            x[i], x[j], x[k], x[m] = quarter_round(x[i], x[j], x[k], x[m])
    return struct.pack("<16I", *[(x[i] + state[i]) & MASK32 for i in range(16)])


def keystream_numpy(key: bytes, nonce: bytes, counter: int, blocks: int) -> np.ndarray:
    """Blocks counter..counter+blocks-1 as uint32 words, shape (blocks*16,), computed with numpy.

    The state is held as four rows of the 4x4 matrix, each (4, blocks); a column round is one
    quarter round on the rows, a diagonal round the same after rotating rows b, c, d by 1, 2, 3.
    """
    check_block_args(key, counter, nonce, blocks)
    init = np.empty((16, blocks), dtype=np.uint32)  # (16, blocks)
    init[:] = np.asarray(initial_state(key, 0, nonce), dtype=np.uint32)[:, None]
    init[12] = np.arange(counter, counter + blocks, dtype=np.uint64).astype(np.uint32)
    a, b, c, d = (init[4 * r : 4 * r + 4].copy() for r in range(4))  # each (4, blocks)

    def rotl(x: np.ndarray, n: int) -> np.ndarray:
        return (x << np.uint32(n)) | (x >> np.uint32(32 - n))

    def qr(a, b, c, d):  # uint32 arithmetic wraps mod 2**32, as ChaCha20 needs
        a = a + b
        d = rotl(d ^ a, 16)
        c = c + d
        b = rotl(b ^ c, 12)
        a = a + b
        d = rotl(d ^ a, 8)
        c = c + d
        b = rotl(b ^ c, 7)
        return a, b, c, d

    for _ in range(10):
        a, b, c, d = qr(a, b, c, d)
        b, c, d = np.roll(b, -1, axis=0), np.roll(c, -2, axis=0), np.roll(d, -3, axis=0)
        a, b, c, d = qr(a, b, c, d)
        b, c, d = np.roll(b, 1, axis=0), np.roll(c, 2, axis=0), np.roll(d, 3, axis=0)
    out = np.concatenate([a, b, c, d]) + init  # (16, blocks)
    return np.ascontiguousarray(out.T).reshape(-1)  # (blocks*16,): block-major, as in the stream


KEYSTREAMS = {
    "numpy": lambda key, nonce, counter, blocks: _bytes(
        keystream_numpy(key, nonce, counter, blocks)
    ),
    "cryptography": lambda key, nonce, counter, blocks: _bytes(
        keystream(key, nonce, counter, blocks)
    ),
    "torch": lambda key, nonce, counter, blocks: _torch_bytes(
        keystream_torch(key, nonce, counter, blocks, CPU)
    ),
    "reference": lambda key, nonce, counter, blocks: b"".join(
        block_reference(key, counter + i, nonce) for i in range(blocks)
    ),
}

# ---------------------------------------------------------------------------------------------
# RFC 8439 test vectors.


def test_quarter_round_rfc8439_2_1_1() -> None:
    out = quarter_round(0x11111111, 0x01020304, 0x9B8D6F43, 0x01234567)
    assert out == (0xEA2A92F4, 0xCB1CF8CE, 0x4581472E, 0x5881C4BB)


RFC_KEY = bytes(range(32))


@pytest.mark.parametrize("impl", sorted(KEYSTREAMS))
def test_block_rfc8439_2_3_2(impl: str) -> None:
    nonce = _hex("00 00 00 09 00 00 00 4a 00 00 00 00")
    expected = _hex(
        """
        10 f1 e7 e4 d1 3b 59 15 50 0f dd 1f a3 20 71 c4
        c7 d1 f4 c7 33 c0 68 03 04 22 aa 9a c3 d4 6c 4e
        d2 82 64 46 07 9f aa 09 14 c2 d7 05 d9 8b 02 a2
        b5 12 9c d1 de 16 4e b9 cb d0 83 e8 a2 50 3c 4e
        """
    )
    assert KEYSTREAMS[impl](RFC_KEY, nonce, 1, 1) == expected


SUNSCREEN = (
    b"Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the "
    b"future, sunscreen would be it."
)
SUNSCREEN_CIPHERTEXT = _hex(
    """
    6e 2e 35 9a 25 68 f9 80 41 ba 07 28 dd 0d 69 81
    e9 7e 7a ec 1d 43 60 c2 0a 27 af cc fd 9f ae 0b
    f9 1b 65 c5 52 47 33 ab 8f 59 3d ab cd 62 b3 57
    16 39 d6 24 e6 51 52 ab 8f 53 0c 35 9f 08 61 d8
    07 ca 0d bf 50 0d 6a 61 56 a3 8e 08 8a 22 b6 5e
    52 bc 51 4d 16 cc f8 06 81 8c e9 1a b7 79 37 36
    5a f9 0b bf 74 a3 5b e6 b4 0b 8e ed f2 78 5e 42
    87 4d
    """
)


@pytest.mark.parametrize("impl", sorted(KEYSTREAMS))
def test_encryption_rfc8439_2_4_2(impl: str) -> None:
    nonce = _hex("00 00 00 00 00 00 00 4a 00 00 00 00")
    ks = KEYSTREAMS[impl](RFC_KEY, nonce, 1, 2)
    ciphertext = bytes(p ^ k for p, k in zip(SUNSCREEN, ks, strict=False))
    assert ciphertext == SUNSCREEN_CIPHERTEXT


# Appendix A.1: (key, nonce, block counter, keystream block).
APPENDIX_A1 = [
    (
        bytes(32),
        bytes(12),
        0,
        """76 b8 e0 ad a0 f1 3d 90 40 5d 6a e5 53 86 bd 28
           bd d2 19 b8 a0 8d ed 1a a8 36 ef cc 8b 77 0d c7
           da 41 59 7c 51 57 48 8d 77 24 e0 3f b8 d8 4a 37
           6a 43 b8 f4 15 18 a1 1c c3 87 b6 69 b2 ee 65 86""",
    ),
    (
        bytes(32),
        bytes(12),
        1,
        """9f 07 e7 be 55 51 38 7a 98 ba 97 7c 73 2d 08 0d
           cb 0f 29 a0 48 e3 65 69 12 c6 53 3e 32 ee 7a ed
           29 b7 21 76 9c e6 4e 43 d5 71 33 b0 74 d8 39 d5
           31 ed 1f 28 51 0a fb 45 ac e1 0a 1f 4b 79 4d 6f""",
    ),
    (
        bytes(31) + b"\x01",
        bytes(12),
        1,
        """3a eb 52 24 ec f8 49 92 9b 9d 82 8d b1 ce d4 dd
           83 20 25 e8 01 8b 81 60 b8 22 84 f3 c9 49 aa 5a
           8e ca 00 bb b4 a7 3b da d1 92 b5 c4 2f 73 f2 fd
           4e 27 36 44 c8 b3 61 25 a6 4a dd eb 00 6c 13 a0""",
    ),
    (
        b"\x00\xff" + bytes(30),
        bytes(12),
        2,
        """72 d5 4d fb f1 2e c4 4b 36 26 92 df 94 13 7f 32
           8f ea 8d a7 39 90 26 5e c1 bb be a1 ae 9a f0 ca
           13 b2 5a a2 6c b4 a6 48 cb 9b 9d 1b e6 5b 2c 09
           24 a6 6c 54 d5 45 ec 1b 73 74 f4 87 2e 99 f0 96""",
    ),
    (
        bytes(32),
        bytes(11) + b"\x02",
        0,
        """c2 c6 4d 37 8c d5 36 37 4a e2 04 b9 ef 93 3f cd
           1a 8b 22 88 b3 df a4 96 72 ab 76 5b 54 ee 27 c7
           8a 97 0e 0e 95 5c 14 f3 a8 8e 74 1b 97 c2 86 f7
           5f 8f c2 99 e8 14 83 62 fa 19 8a 39 53 1b ed 6d""",
    ),
]


@pytest.mark.parametrize("impl", sorted(KEYSTREAMS))
@pytest.mark.parametrize("vector", range(1, len(APPENDIX_A1) + 1))
def test_block_rfc8439_appendix_a1(impl: str, vector: int) -> None:
    key, nonce, counter, expected = APPENDIX_A1[vector - 1]
    assert KEYSTREAMS[impl](key, nonce, counter, 1) == _hex(expected)


@pytest.mark.parametrize("impl", sorted(KEYSTREAMS))
def test_encryption_rfc8439_appendix_a2_vector3(impl: str) -> None:
    # Two blocks from counter 42: the counter and the block order beyond the first block.
    key = _hex(
        "1c 92 40 a5 eb 55 d3 8a f3 33 88 86 04 f6 b5 f0"
        "47 39 17 c1 40 2b 80 09 9d ca 5c bc 20 70 75 c0"
    )
    nonce = _hex("00 00 00 00 00 00 00 00 00 00 00 02")
    plaintext = (
        b"'Twas brillig, and the slithy toves\nDid gyre and gimble in the wabe:\n"
        b"All mimsy were the borogoves,\nAnd the mome raths outgrabe."
    )
    expected = _hex(
        """
        62 e6 34 7f 95 ed 87 a4 5f fa e7 42 6f 27 a1 df
        5f b6 91 10 04 4c 0d 73 11 8e ff a9 5b 01 e5 cf
        16 6d 3d f2 d7 21 ca f9 b2 1e 5f b1 4c 61 68 71
        fd 84 c5 4f 9d 65 b2 83 19 6c 7f e4 f6 05 53 eb
        f3 9c 64 02 c4 22 34 e3 2a 35 6b 3e 76 43 12 a6
        1a 55 32 05 57 16 ea d6 96 25 68 f8 7d 3f 3f 77
        04 c6 a8 d1 bc d1 bf 4d 50 d6 15 4b 6d a7 31 b1
        87 b5 8d fd 72 8a fa 36 75 7a 79 7a c1 88 d1
        """
    )
    ks = KEYSTREAMS[impl](key, nonce, 42, 2)
    assert bytes(p ^ k for p, k in zip(plaintext, ks, strict=False)) == expected


# ---------------------------------------------------------------------------------------------
# The implementations agree.


@settings(max_examples=60, deadline=None)
@given(
    key=st.binary(min_size=32, max_size=32),
    nonce=st.binary(min_size=12, max_size=12),
    blocks=st.integers(0, 9),
    counter=st.one_of(st.integers(0, 2**32 - 9), st.integers(2**32 - 9, 2**32 - 1)),
)
def test_keystreams_agree(key: bytes, nonce: bytes, blocks: int, counter: int) -> None:
    blocks = min(blocks, 2**32 - counter)
    expected = keystream_numpy(key, nonce, counter, blocks)
    assert expected.dtype == np.uint32 and expected.shape == (blocks * 16,)
    fast = keystream(key, nonce, counter, blocks)
    assert fast.dtype == np.uint32
    np.testing.assert_array_equal(fast, expected)
    on_torch = keystream_torch(key, nonce, counter, blocks, CPU)
    assert on_torch.dtype == torch.int64 and on_torch.shape == (blocks * 16,)
    np.testing.assert_array_equal(on_torch.numpy(), expected.astype(np.int64))
    if blocks:
        assert block_reference(key, counter, nonce) == _bytes(expected[:16])


def test_keystream_stops_at_the_32_bit_counter() -> None:
    key, nonce = bytes(32), bytes(12)
    last = keystream(key, nonce, 2**32 - 1, 1)
    assert _bytes(last) == block_reference(key, 2**32 - 1, nonce)
    for impl in (keystream, keystream_numpy):
        with pytest.raises(ValueError):
            impl(key, nonce, 2**32 - 1, 2)
    with pytest.raises(ValueError):
        keystream_torch(key, nonce, 2**32, 1, CPU)
    stream = Stream(1, Purpose.INIT)
    last_word = 2**32 * 16 - 1
    expected = keystream(stream.key, stream.nonce, 2**32 - 1, 1)[15]
    assert words(stream, last_word, 1)[0] == expected
    with pytest.raises(ValueError):
        words(stream, last_word, 2)
    with pytest.raises(ValueError):
        keep_mask(stream, 2 * last_word + 1, 2, 0.5)


# ---------------------------------------------------------------------------------------------
# Streams: key and nonce layout, seeds.


def test_stream_key_and_nonce_layout() -> None:
    stream = Stream(0x0102030405060708, Purpose.DROPOUT, a=5, b=0xDEADBEEF)
    assert stream.key == bytes([8, 7, 6, 5, 4, 3, 2, 1]) + bytes(24)
    assert stream.nonce == struct.pack("<III", 3, 5, 0xDEADBEEF)
    # Word w is word w % 16 of block w // 16, checked against the reference block function.
    expected = _bytes(words(stream, 16 * 7 + 3, 20))
    blocks = block_reference(stream.key, 7, stream.nonce) + block_reference(
        stream.key, 8, stream.nonce
    )
    assert expected == blocks[12 : 12 + 80]


def test_streams_differ_by_seed_purpose_and_indices() -> None:
    base = Stream(11, Purpose.INIT, a=3, b=4)
    others = [
        Stream(12, Purpose.INIT, a=3, b=4),
        Stream(11, Purpose.WINDOW_ORDER, a=3, b=4),
        Stream(11, Purpose.DROPOUT, a=3, b=4),
        Stream(11, Purpose.SAMPLING, a=3, b=4),
        Stream(11, Purpose.INIT, a=4, b=4),
        Stream(11, Purpose.INIT, a=3, b=5),
        Stream(11, Purpose.INIT, a=4, b=3),
    ]
    firsts = {words(s, 0, 8).tobytes() for s in [base, *others]}
    assert len(firsts) == 1 + len(others)


SEED_SENTENCE = "--seed is {}; it must be a whole number from 0 to 18446744073709551615"


@pytest.mark.parametrize("bad", [-1, 2**64, True, False, 1.0, "3", None, np.float64(2.0)])
def test_seed_refusals(bad: object) -> None:
    with pytest.raises(Refusal) as caught:
        check_seed(bad)
    assert caught.value.sentence == SEED_SENTENCE.format(repr(bad))
    with pytest.raises(Refusal) as caught:
        Stream(bad, Purpose.INIT)  # type: ignore[arg-type]
    assert caught.value.sentence == SEED_SENTENCE.format(repr(bad))


def test_seed_refusal_sentence_word_for_word() -> None:
    with pytest.raises(Refusal) as caught:
        check_seed(-5)
    expected = "--seed is -5; it must be a whole number from 0 to 18446744073709551615"
    assert caught.value.sentence == expected


@pytest.mark.parametrize("good", [0, 1, SEED_MAX, np.uint64(SEED_MAX), np.int32(7)])
def test_seeds_accepted(good: object) -> None:
    assert check_seed(good) == int(good)  # type: ignore[call-overload]
    assert type(check_seed(good)) is int
    assert Stream(good, Purpose.SAMPLING).seed == int(good)  # type: ignore[arg-type]


@pytest.mark.parametrize("field", ["a", "b"])
@pytest.mark.parametrize("bad", [-1, 2**32, True])
def test_stream_indices_are_uint32(field: str, bad: int) -> None:
    with pytest.raises(ValueError):
        Stream(1, Purpose.INIT, **{field: bad})


def test_bad_ranges_raise() -> None:
    stream = Stream(1, Purpose.INIT)
    for draw in (words, uniform, normal):
        with pytest.raises(ValueError):
            draw(stream, -1, 3)
        with pytest.raises(ValueError):
            draw(stream, 0, -3)
    for p in (-0.1, 1.5, float("nan")):
        with pytest.raises(ValueError):
            keep_mask(stream, 0, 4, p)


# ---------------------------------------------------------------------------------------------
# Addressing: any element computed alone equals the same element of a longer draw.

DRAWS = {
    "words": words,
    "uniform": uniform,
    "normal": normal,
    "keep_mask_0.3": lambda s, start, count: keep_mask(s, start, count, 0.3),
    "keep_mask_tensor_0.3": lambda s, start, count: keep_mask_tensor(
        s, start, count, 0.3, CPU
    ).numpy(),
    "keep_mask_torch_path_0.3": lambda s, start, count: masks._keep_mask_on_device(
        s, start, count, 0.3, CPU, fused=False
    ).numpy(),
}


@pytest.mark.parametrize("kind", sorted(DRAWS))
@settings(max_examples=40, deadline=None)
@given(
    base=st.integers(0, 2**31),
    length=st.integers(1, 300),
    data=st.data(),
)
def test_draws_are_addressable(kind: str, base: int, length: int, data: st.DataObject) -> None:
    draw = DRAWS[kind]
    stream = Stream(77, Purpose.SAMPLING, a=1, b=2)
    long = draw(stream, base, length)
    assert long.shape == (length,)
    start = data.draw(st.integers(0, length - 1))
    count = data.draw(st.integers(0, length - start))
    np.testing.assert_array_equal(draw(stream, base + start, count), long[start : start + count])
    alone = draw(stream, base + start, 1)
    np.testing.assert_array_equal(alone, long[start : start + 1])


def test_permutation_is_a_function_of_stream_and_n() -> None:
    stream = Stream(5, Purpose.WINDOW_ORDER, a=3)
    np.testing.assert_array_equal(permutation(stream, 1000), permutation(stream, 1000))
    expected = [reference_bijection(stream, 1000, i) for i in range(1000)]
    assert permutation(stream, 1000).tolist() == expected


def test_uniform_is_top_24_bits() -> None:
    stream = Stream(3, Purpose.INIT)
    w = words(stream, 100, 5000)
    u = uniform(stream, 100, 5000)
    assert u.dtype == np.float32
    expected = np.array([(int(x) >> 8) / 2**24 for x in w], dtype=np.float64)
    np.testing.assert_array_equal(u.astype(np.float64), expected)
    assert u.min() >= 0.0 and u.max() < 1.0


def test_keep_mask_reads_16_bit_halves_low_first() -> None:
    stream = Stream(3, Purpose.DROPOUT)
    p = 0.37
    threshold = round(p * 65536)
    w = words(stream, 10, 50)
    halves = [h for x in w for h in (int(x) & 0xFFFF, int(x) >> 16)]
    expected = np.array([h >= threshold for h in halves])
    mask = keep_mask(stream, 20, 100, p)
    assert mask.dtype == np.bool_
    np.testing.assert_array_equal(mask, expected)
    np.testing.assert_array_equal(keep_mask(stream, 21, 98, p), expected[1:99])


def test_keep_mask_keeps_a_half_equal_to_the_threshold() -> None:
    stream = Stream(4, Purpose.DROPOUT)
    first = int(words(stream, 0, 1)[0])
    for element, half in ((0, first & 0xFFFF), (1, first >> 16)):
        at, above = half / 65536, (half + 1) / 65536  # round(p * 65536) is exactly the half
        assert keep_mask(stream, element, 1, at)[0]
        assert not keep_mask(stream, element, 1, above)[0]
        assert masks._keep_mask_on_device(stream, element, 1, at, CPU, fused=False)[0]
        assert not masks._keep_mask_on_device(stream, element, 1, above, CPU, fused=False)[0]


def test_keep_mask_extremes() -> None:
    stream = Stream(3, Purpose.DROPOUT)
    assert keep_mask(stream, 5, 1001, 0.0).all()
    assert not keep_mask(stream, 5, 1001, 1.0).any()
    assert keep_mask_tensor(stream, 5, 1001, 0.0, CPU).all()
    assert keep_mask(stream, 5, 0, 0.5).shape == (0,)


# ---------------------------------------------------------------------------------------------
# Distributions, with fixed seeds so each assertion is decided once and for all.


def _ks_statistic(samples: np.ndarray, cdf: np.ndarray) -> float:
    """Kolmogorov-Smirnov distance between sorted samples and the model CDF at those samples."""
    n = len(samples)
    upper = np.arange(1, n + 1) / n - cdf
    lower = cdf - np.arange(0, n) / n
    return float(max(upper.max(), lower.max()))


# Critical value of the KS distance at significance 0.001 is about 1.95 / sqrt(n).
KS_CRITICAL = 1.95


def test_uniform_distribution() -> None:
    n = 200_000
    u = np.sort(uniform(Stream(101, Purpose.INIT), 0, n).astype(np.float64))
    assert _ks_statistic(u, u) < KS_CRITICAL / math.sqrt(n)
    counts = np.bincount((u * 100).astype(np.int64), minlength=100)
    chi2 = float(((counts - n / 100) ** 2 / (n / 100)).sum())
    assert chi2 < 148.2  # chi-square, 99 degrees of freedom, significance 0.001


def test_normal_distribution() -> None:
    n = 200_000
    z32 = normal(Stream(102, Purpose.INIT), 0, n)
    assert z32.dtype == np.float32 and np.isfinite(z32).all()
    z = z32.astype(np.float64)
    assert abs(z.mean()) < 5 / math.sqrt(n)
    assert abs(z.var() - 1.0) < 5 * math.sqrt(2 / n)
    z = np.sort(z)
    cdf = np.array([0.5 * (1.0 + math.erf(v / math.sqrt(2.0))) for v in z])
    assert _ks_statistic(z, cdf) < KS_CRITICAL / math.sqrt(n)
    tails = np.mean(np.abs(z) > 3.0)
    expected = math.erfc(3.0 / math.sqrt(2.0))
    assert abs(tails - expected) < 5 * math.sqrt(expected / n)


def test_normal_matches_libm_box_muller() -> None:
    # The polynomial log and cos agree with the platform's libm to float32 rounding.
    stream = Stream(103, Purpose.INIT)
    n = 20_000
    w = words(stream, 0, 2 * n)
    z = normal(stream, 0, n)
    for i in range(n):
        u1 = (int(w[2 * i]) + 1) / 2**32
        u2 = int(w[2 * i + 1]) / 2**32
        exact = math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2)
        assert abs(float(z[i]) - exact) <= 1e-6 * max(1.0, abs(exact)), i


def test_log_and_cos_polynomials_are_accurate() -> None:
    edge_u = [2.0**-32, 2.0**-20, 0.1, 0.25, 0.5, 0.70710678, 0.7071067811865476, 0.75, 1.0]
    u = np.concatenate([edge_u, np.linspace(2.0**-32, 1.0, 5001)])
    log = floats._log(u)
    assert max(abs(a - math.log(b)) for a, b in zip(log, u, strict=True)) < 1e-14
    grid = np.arange(0, 2**32, 2**32 // 8192 + 7, dtype=np.float64) * 2.0**-32
    edges = np.array([0.0, 0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875, 1.0 - 2.0**-32])
    t = np.concatenate([grid, edges])
    cos = floats._cos_two_pi(t)
    assert max(abs(a - math.cos(2 * math.pi * b)) for a, b in zip(cos, t, strict=True)) < 1e-14


def test_normal_uses_no_transcendental_library_calls(monkeypatch) -> None:
    # libm and SIMD transcendentals differ in the last bit between machines; the normal draw must
    # not depend on them, so that initial weights are the same everywhere.
    def forbidden(*args, **kwargs):
        raise AssertionError("normal() called a platform transcendental")

    expected = normal(Stream(104, Purpose.INIT), 0, 1000)
    for name in ("log", "log1p", "log2", "exp", "expm1", "sin", "cos", "tan", "arctan2", "power"):
        monkeypatch.setattr(np, name, forbidden)
    np.testing.assert_array_equal(normal(Stream(104, Purpose.INIT), 0, 1000), expected)


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_keep_rate(p: float) -> None:
    n = 1_000_000
    mask = keep_mask(Stream(105, Purpose.DROPOUT, a=int(p * 10)), 0, n, p)
    rate = 1.0 - round(p * 65536) / 65536
    assert abs(mask.mean() - rate) < 5 * math.sqrt(rate * (1 - rate) / n)


def test_permutation_is_a_permutation() -> None:
    for n in (0, 1, 2, 17, 10_000):
        perm = permutation(Stream(107, Purpose.WINDOW_ORDER), n)
        assert perm.dtype == np.int64 and perm.shape == (n,)
        np.testing.assert_array_equal(np.sort(perm), np.arange(n))


@pytest.mark.slow
def test_the_bijection_is_one_onto_every_count_up_to_three_thousand_and_at_large_ones() -> None:
    stream = Stream(113, Purpose.WINDOW_ORDER, a=5)
    for n in [*range(1, 3001), 2**16, 2**16 + 1, 1_000_003]:
        image = bijection(stream, n, np.arange(n, dtype=np.int64))
        assert np.array_equal(np.sort(image), np.arange(n)), n


def reference_bijection(stream: Stream, n: int, position: int) -> int:
    """The network of zrodlo.draws.bijection in plain integers, written from its description."""
    keys = words(stream, 0, 16).tolist()
    round_keys = [keys[2 * r] | keys[2 * r + 1] << 32 for r in range(8)]
    half = max(3, -(-((n - 1).bit_length() + 1) // 2))
    mask, full = (1 << half) - 1, (1 << 64) - 1

    def mix(x: int) -> int:
        x = ((x ^ x >> 30) * 0xBF58476D1CE4E5B9) & full
        x = ((x ^ x >> 27) * 0x94D049BB133111EB) & full
        return x ^ x >> 31

    def network(x: int) -> int:
        left, right = x >> half, x & mask
        for key in round_keys:
            left, right = right, left ^ (mix(right ^ key) & mask)
        return left << half | right

    value = network(position)
    while value >= n:
        value = network(value)
    return value


@pytest.mark.parametrize("n", [1, 2, 5, 64, 65, 1000, 2**31 + 11, 10**12 + 39, 2**62])
def test_the_bijection_is_a_pure_function_of_stream_count_and_position(n: int) -> None:
    stream = Stream(114, Purpose.WINDOW_ORDER, a=3)
    positions = np.unique(np.array([0, 1, n // 3, n // 2, n - 2, n - 1]).clip(0, n - 1))
    together = bijection(stream, n, positions)
    assert together.dtype == np.int64 and ((together >= 0) & (together < n)).all()
    for position, image in zip(positions.tolist(), together.tolist(), strict=True):
        assert bijection(stream, n, np.array([position])).tolist() == [image]
        assert reference_bijection(stream, n, position) == image
    assert len(set(together.tolist())) == len(positions)


def test_the_bijection_refuses_positions_outside_its_count() -> None:
    with pytest.raises(ValueError):
        bijection(Stream(115, Purpose.WINDOW_ORDER), 10, np.array([10]))
    with pytest.raises(ValueError):
        bijection(Stream(115, Purpose.WINDOW_ORDER), 0, np.array([], dtype=np.int64))


@pytest.mark.slow
def test_each_window_goes_to_each_place_equally_often() -> None:
    n, passes = 37, 3000
    placed = np.zeros((n, n))
    for a in range(passes):
        placed[np.arange(n), permutation(Stream(117, Purpose.WINDOW_ORDER, a=a), n)] += 1
    expected = passes / n
    chi2 = float(((placed - expected) ** 2 / expected).sum())
    assert chi2 < 1459.1  # chi-square, 36**2 = 1296 degrees of freedom, significance 0.001


def test_permutations_differ_across_seeds_and_passes() -> None:
    n = 1000
    first = permutation(Stream(108, Purpose.WINDOW_ORDER, a=0), n)
    assert not np.array_equal(first, np.arange(n))
    assert not np.array_equal(first, permutation(Stream(108, Purpose.WINDOW_ORDER, a=1), n))
    assert not np.array_equal(first, permutation(Stream(109, Purpose.WINDOW_ORDER, a=0), n))


@pytest.mark.parametrize(
    ("n", "passes", "critical"),
    [
        (4, 2400, 49.73),  # chi-square, 23 degrees of freedom, significance 0.001
        # The smallest count whose orders 2-bit Feistel halves left uneven (see zrodlo.draws.bijection).
        (5, 6000, 172.4),  # 119 degrees of freedom
    ],
)
@pytest.mark.slow
def test_every_order_of_a_few_windows_is_equally_likely(n: int, passes: int, critical: float):
    orders = math.factorial(n)
    index: dict[tuple, int] = {}
    counts = np.zeros(orders)
    for a in range(passes):
        perm = tuple(permutation(Stream(110 + n, Purpose.WINDOW_ORDER, a=a), n).tolist())
        counts[index.setdefault(perm, len(index))] += 1
    assert len(index) == orders
    chi2 = float(((counts - passes / orders) ** 2 / (passes / orders)).sum())
    assert chi2 < critical


# ---------------------------------------------------------------------------------------------
# keep_mask_tensor.


def test_keep_mask_tensor_on_cpu_and_through_torch_keystream_match_numpy() -> None:
    stream = Stream(111, Purpose.DROPOUT, a=2, b=3)
    for start, count in [(0, 0), (0, 1), (1, 1), (31, 65), (1001, 12_345)]:
        expected = keep_mask(stream, start, count, 0.25)
        on_cpu = keep_mask_tensor(stream, start, count, 0.25, CPU)
        assert on_cpu.dtype == torch.bool and on_cpu.device == CPU
        np.testing.assert_array_equal(on_cpu.numpy(), expected)
        # The path a Metal GPU takes, run here on the CPU.
        through_torch = masks._keep_mask_on_device(stream, start, count, 0.25, CPU, fused=False)
        np.testing.assert_array_equal(through_torch.numpy(), expected)


@pytest.mark.slow
def test_the_fused_kernel_cuda_draws_with_gives_the_bits_of_keep_mask() -> None:
    """The compiled kernel (here compiled for the CPU, as it is for CUDA on a GPU): one compile,
    its sizes symbolic, serves every size and offset, and each mask equals `keep_mask` bit for
    bit, at a rate and its threshold's edges alike. (Sizes of 1 would compile a second, special
    kernel; a mask of the model is never one element.)"""
    stream = Stream(111, Purpose.DROPOUT, a=2, b=3)
    first = int(words(stream, 0, 1)[0])
    edge = (first & 0xFFFF) / 65536  # the first element's half is exactly the threshold: kept
    for start, count, p in [
        (0, 2, edge),
        (0, 2, edge + 1 / 65536),
        (31, 65, 0.25),
        (1001, 12_345, 0.1),
        (2**20 + 3, 40_000, 0.9),
    ]:
        fused = masks._keep_mask_on_device(stream, start, count, p, CPU, fused=True)
        assert fused.dtype == torch.bool and fused.shape == (count,)
        np.testing.assert_array_equal(fused.numpy(), keep_mask(stream, start, count, p))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_keep_mask_tensor_on_cuda_matches_numpy() -> None:
    stream = Stream(112, Purpose.DROPOUT, a=2, b=3)
    cuda = torch.device("cuda")
    for start, count in [(0, 1), (7, 100_001), (123_456, 3_000_000)]:
        mask = keep_mask_tensor(stream, start, count, 0.1, cuda)
        assert mask.device.type == "cuda" and mask.dtype == torch.bool
        np.testing.assert_array_equal(mask.cpu().numpy(), keep_mask(stream, start, count, 0.1))
    ks = keystream_torch(bytes(range(32)), bytes(12), 5, 1000, cuda).cpu().numpy()
    np.testing.assert_array_equal(ks, keystream(bytes(range(32)), bytes(12), 5, 1000))


# ---------------------------------------------------------------------------------------------
# Golden values. If this test fails, the draw layout changed: every checkpoint written before now
# draws differently, so bump the version in GENERATOR (and then update these values).


def test_golden_draws_and_generator_name() -> None:
    assert GENERATOR == "chacha20-rfc8439/zrodlo-draws-v2"
    stream = Stream(20240611, Purpose.INIT, a=1, b=2)
    assert words(stream, 0, 4).tolist() == [398972821, 2960520998, 197189757, 2149225138]
    assert uniform(stream, 0, 3).tolist() == [
        float.fromhex("0x1.7c7d7p-4"),
        float.fromhex("0x1.60ebeep-1"),
        float.fromhex("0x1.781cp-5"),
    ]
    assert normal(stream, 0, 4).tolist() == [
        -0.8114365339279175,
        -2.4823427200317383,
        -1.2885844707489014,
        0.7701060771942139,
    ]
    assert keep_mask(stream, 0, 16, 0.5).astype(int).tolist() == [
        1, 0, 1, 1, 1, 0, 1, 1, 1, 0, 0, 0, 0, 1, 0, 0
    ]  # fmt: skip
    assert permutation(stream, 10).tolist() == [0, 3, 6, 1, 5, 8, 4, 2, 7, 9]


# Digests of 100,000 values of each draw pin every bit, and so every rounding of the normal draw's
# polynomials: they are the same on every machine, or the draws are not reproducible.
GOLDEN_DIGESTS = {
    "words": "fc91ebd08d5509de8490cf70ac544e015c570e9b681830693336a2e383b1a270",
    "uniform": "eb6e889588b6b7e069bfe698569ffc36703a06e0b85587bbcd753adf98270b9e",
    "normal": "70b71e6093c981ff9c91e91bf282efdb583874bc34c57b6eee92600352182b2e",
    "keep_mask": "25ab361b76d85893b09f73b09c999512d23f0104cdcfe99846aac43a5d4a8023",
    "permutation": "75b2ca32170ca8127e9112760b68adff0a88662ba9736031b963e38f6c5bb5a0",
}


def test_golden_digests_of_long_draws() -> None:
    stream = Stream(20240611, Purpose.INIT, a=1, b=2)
    n = 100_000
    draws = {
        "words": words(stream, 0, n),
        "uniform": uniform(stream, 0, n),
        "normal": normal(stream, 0, n),
        "keep_mask": keep_mask(stream, 0, n, 0.1),
        "permutation": permutation(stream, n),
    }
    digests = {
        kind: hashlib.sha256(values.astype(values.dtype.newbyteorder("<")).tobytes()).hexdigest()
        for kind, values in draws.items()
    }
    assert digests == GOLDEN_DIGESTS

"""Uniform and normal floats drawn from a ChaCha20 stream, the same bits on every machine.

Element i of `uniform` reads word start+i; element i of `normal` reads words 2(start+i) and
2(start+i)+1. Initial weights are normals, sampling draws uniforms.
"""

from __future__ import annotations

import math

import numpy as np

from zrodlo.draws.chacha import Stream, check_range, stream_words, words


def uniform(stream: Stream, start: int, count: int) -> np.ndarray:
    """float32 in [0, 1), shape (count,): element i is (top 24 bits of word start+i) * 2**-24."""
    w = words(stream, start, count)
    # 24 bits fit a float32 significand, so every value is exact.
    return (w >> np.uint32(8)).astype(np.float32) * np.float32(2.0**-24)


# numpy's float64 log/exp/sin/cos dispatch to CPU-specific SIMD code (SVML, AVX-512 variants) whose
# last bits differ between machines, which would make initial weights differ across machines. So
# the normal draw uses only IEEE-754 correctly rounded operations (+ - * / sqrt), exact frexp and
# comparisons, in float64, with fixed evaluation order: every machine gives the same bits.
_LN2 = 0.6931471805599453  # float64 nearest ln 2
_SQRT_HALF = 0.7071067811865476
_TWO_PI = 6.283185307179586
# Taylor coefficients in x**2: cos x = sum (-1)^k x^2k / (2k)!, sin x = x sum (-1)^k x^2k / (2k+1)!,
# to x^18 and x^19, whose next terms are below 1e-18 at pi/4. int / int rounds correctly in Python.
_COS_TAYLOR = tuple((-1) ** k / math.factorial(2 * k) for k in range(10))
_SIN_TAYLOR = tuple((-1) ** k / math.factorial(2 * k + 1) for k in range(10))


def _log(x: np.ndarray) -> np.ndarray:
    """Natural log of float64 x > 0 to about 1e-16 relative: log m + e ln2, log m by atanh series."""
    m, e = np.frexp(x)  # x = m * 2**e, m in [0.5, 1)
    low = m < _SQRT_HALF
    m = np.where(low, m * 2.0, m)  # m in [sqrt(1/2), sqrt(2)), exact doubling
    e = (e - low).astype(np.float64)
    s = (m - 1.0) / (m + 1.0)  # |s| <= 0.1716, so s**2 <= 0.0295
    s2 = s * s
    # log m = 2 atanh s = 2 (s + s^3/3 + s^5/5 + ...); terms past s^23 are below 1e-18 relative.
    acc = np.full_like(s, 1.0 / 23.0)
    for k in range(21, 0, -2):
        acc = acc * s2 + 1.0 / k
    return 2.0 * s * acc + e * _LN2


def _cos_two_pi(u: np.ndarray) -> np.ndarray:
    """cos(2 pi u) for float64 u in [0, 1) that are multiples of 2**-32, to about 1e-16.

    The reduction works on u, where subtracting from 1, 1/2 and 1/4 is exact, so the only rounding
    before the polynomial is one product by 2 pi on an angle no larger than pi/4.
    """
    t = np.where(u > 0.5, 1.0 - u, u)  # cos even and 1-periodic in u: t in [0, 1/2]
    flip = t > 0.25
    t = np.where(flip, 0.5 - t, t)  # cos(2 pi (1/2 - t)) = -cos(2 pi t): t in [0, 1/4]
    use_sin = t > 0.125
    t = np.where(use_sin, 0.25 - t, t)  # cos(2 pi t) = sin(2 pi (1/4 - t)): t in [0, 1/8]
    x = t * _TWO_PI  # angle in [0, pi/4]
    x2 = x * x
    cos_acc = np.full_like(x, _COS_TAYLOR[-1])
    sin_acc = np.full_like(x, _SIN_TAYLOR[-1])
    for c, s in zip(_COS_TAYLOR[-2::-1], _SIN_TAYLOR[-2::-1], strict=True):
        cos_acc = cos_acc * x2 + c
        sin_acc = sin_acc * x2 + s
    value = np.where(use_sin, sin_acc * x, cos_acc)
    return np.where(flip, -value, value)


def normal(stream: Stream, start: int, count: int) -> np.ndarray:
    """float32 standard normals, shape (count,), by Box-Muller on words 2(start+i), 2(start+i)+1.

    u1 = (word0 + 1) * 2**-32 in (0, 1], u2 = word1 * 2**-32 in [0, 1);
    z = sqrt(-2 log u1) * cos(2 pi u2), computed in float64 and rounded once to float32.
    """
    first, end = check_range(start, count, 2)
    w = stream_words(stream, first, end).reshape(-1, 2)  # (count, 2)
    u1 = (w[:, 0].astype(np.float64) + 1.0) * 2.0**-32
    u2 = w[:, 1].astype(np.float64) * 2.0**-32
    z = np.sqrt(-2.0 * _log(u1)) * _cos_two_pi(u2)
    return z.astype(np.float32)

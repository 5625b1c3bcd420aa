"""Where each pair of neighbouring symbols occurs in the distinct pieces of a BPE fit, kept up to
date merge by merge at the cost of the places a merge touches.

The pieces lie end to end in arrays indexed by position (each piece's bytes in a row): `symbol`
is the symbol at a position (-1 once it has been merged into its left neighbour), `after` and
`before` link the live positions of a piece (-1 at its ends) and `owner` is the piece, whose count
weighs every pair found in it. A merge keeps the left position of each occurrence and kills the
right one, so the live positions of a piece stay in increasing order, left to right.

A pair is known by its key, left * width + right. `count` holds the weighted count of every pair
present; `places[key]` the left positions where the pair was found, as merges found them (one
position as an int, more as an array). A place may since have changed: it is checked when its
pair merges, and a pair's places are dropped when it merges or its count falls to nothing. Every
place was a byte of a piece or made by a merge, which adds at most two and removes a position, so
the places never number more than three per byte, and the pairs present never more than the bytes.
"""

from __future__ import annotations

from array import array

import numpy as np

_CHUNK = 1 << 22  # positions grouped at a time when the places are first listed


class PairPlaces:
    """The pieces' symbols as linked positions, and each pair's count and places."""

    def __init__(self, pieces: bytes, lengths: list[int], weights: list[int], width: int) -> None:
        """`pieces`: the pieces' bytes end to end; `lengths`: each piece's bytes; `weights`: each
        piece's count (positive); `width`: more than the largest symbol id any merge will make."""
        size = len(pieces)
        self.width = width
        self.dtype = np.int32 if size < 2**31 - 1 else np.int64
        self.typecode = "i" if self.dtype == np.int32 else "q"
        self.weight = np.asarray(weights, dtype=np.int64)  # (pieces,)
        lengths_array = np.asarray(lengths, dtype=np.int64)  # (pieces,)
        ends = np.cumsum(lengths_array)[lengths_array > 0]
        raw = np.frombuffer(pieces, dtype=np.uint8)  # (size,)
        self.symbol = raw.astype(np.int32)  # (size,)
        self.owner = np.repeat(np.arange(len(lengths), dtype=self.dtype), lengths_array)
        self.after = np.arange(1, size + 1, dtype=self.dtype)  # (size,)
        self.after[ends - 1] = -1
        self.before = np.arange(-1, size - 1, dtype=self.dtype)  # (size,)
        self.before[ends - lengths_array[lengths_array > 0]] = -1
        self.count: dict[int, int] = {}
        self.places: dict[int, int | array] = {}
        # A chunk of positions at a time, so that each pair's places come in increasing order.
        for start in range(0, size, _CHUNK):
            left = np.arange(start, min(start + _CHUNK, size), dtype=self.dtype)
            left = left[self.after[left] >= 0]  # (pairs in the chunk,)
            byte_pairs = raw[left].astype(np.uint16) * 256 + raw[left + 1]
            order = np.argsort(byte_pairs, kind="stable")  # a radix sort of 16-bit keys
            pairs, bounds, left = _runs(byte_pairs[order], left[order])
            sums = np.add.reduceat(self.weight[self.owner[left]], bounds[:-1]).tolist()
            for pair, start_at, stop, total in zip(pairs, bounds, bounds[1:], sums, strict=False):
                key = (pair >> 8) * width + (pair & 255)
                self.count[key] = self.count.get(key, 0) + total
                self._add(key, left[start_at:stop])

    def merge(self, left: int, right: int, merged: int) -> list[tuple[int, int]]:
        """Merge every occurrence of the pair (left, right) into the symbol `merged`, left to
        right in each piece as a rewrite of it would; return the pairs whose count changed, with
        their new counts (0 for a pair now absent)."""
        key = left * self.width + right
        self.count.pop(key, None)
        found = self.places.pop(key, None)
        if found is None:
            return []
        if isinstance(found, int):
            at = np.array([found], dtype=self.dtype)
        else:
            at = np.sort(np.frombuffer(found, dtype=self.dtype), kind="stable")  # (places,)
        nxt = self.after[at]
        live = (self.symbol[at] == left) & (nxt >= 0)  # a place that has since changed is stale
        at, nxt = at[live], nxt[live]
        live = self.symbol[nxt] == right
        at, nxt = at[live], nxt[live]
        if left == right and len(at) > 1:
            at, nxt = _left_to_right(at, nxt)
        if len(at) == 0:
            return []
        weight = self.weight[self.owner[at]]  # (occurrences,)
        prev, beyond = self.before[at], self.after[nxt]
        bounded = beyond >= 0
        changes: dict[int, int] = {}
        # The pairs the occurrences held, each once: (prev, left), (left, right), (right, beyond);
        # where two occurrences touch, (right, beyond) of one is (prev, left) of the next.
        has = (prev >= 0) & ~_touches(prev, nxt)
        self._change(changes, self.symbol[prev[has]], -weight[has], right=left)
        self._change(changes, self.symbol[beyond[bounded]], -weight[bounded], left=right)
        # The rewrite: the left position holds the merged symbol, the right one is gone.
        self.symbol[at] = merged
        self.symbol[nxt] = -1
        self.after[at] = beyond
        self.before[beyond[bounded]] = at[bounded]
        prev = self.before[at]
        # The pairs they hold now: (prev, merged) unless prev is the occurrence before, whose
        # (merged, beyond) it is, and (merged, beyond).
        has = (prev >= 0) & ~_touches(prev, at)
        self._change(changes, self.symbol[prev[has]], weight[has], right=merged)
        self._change(changes, self.symbol[beyond[bounded]], weight[bounded], left=merged)
        changed = []
        for pair, change in changes.items():
            if change == 0:
                continue
            count = self.count.get(pair, 0) + change
            if count > 0:
                self.count[pair] = count
            else:
                self.count.pop(pair, None)
                self.places.pop(pair, None)  # no live place is left in it
                count = 0
            changed.append((pair, count))
        self._place(prev[has], at[bounded], merged)
        return changed

    def _change(self, changes: dict[int, int], others: np.ndarray, weights: np.ndarray, *,
                left: int | None = None, right: int | None = None) -> None:  # fmt: skip
        """Add the weights (n,) to the changes of the pairs (left, others) or (others, right),
        others (n,) being symbol ids."""
        ids, sums = _sums(others, weights, self.width)
        for other, total in zip(ids, sums, strict=True):
            pair = left * self.width + other if left is not None else other * self.width + right
            changes[pair] = changes.get(pair, 0) + total

    def _place(self, before: np.ndarray, at: np.ndarray, merged: int) -> None:
        """List the new places: `before` (n,) of pairs (symbol there, merged), `at` (m,) of
        pairs (merged, symbol after)."""
        keys = np.concatenate([
            self.symbol[before].astype(np.int64) * self.width + merged,
            merged * self.width + self.symbol[self.after[at]].astype(np.int64),
        ])  # fmt: skip
        places = np.concatenate([before, at])
        order = np.argsort(keys, kind="stable")
        pairs, bounds, places = _runs(keys[order], places[order])
        for pair, start, stop in zip(pairs, bounds, bounds[1:], strict=False):
            if pair in self.count:
                self._add(pair, places[start:stop])

    def _add(self, key: int, places: np.ndarray) -> None:
        """Append places (n,), in increasing order, to the pair's."""
        listed = self.places.get(key)
        if listed is None and len(places) == 1:
            self.places[key] = int(places[0])
            return
        if listed is None or isinstance(listed, int):
            held = array(self.typecode, [] if listed is None else [listed])
            listed = self.places[key] = held
        listed.frombytes(places.tobytes())


def _runs(keys: np.ndarray, values: np.ndarray) -> tuple[list[int], list[int], np.ndarray]:
    """For keys (n,) in order: the distinct keys, where each one's run begins (then n), and the
    values (n,) unchanged."""
    if len(keys) == 0:
        return [], [0], values
    starts = np.flatnonzero(np.concatenate([[True], keys[1:] != keys[:-1]]))
    return keys[starts].tolist(), [*starts.tolist(), len(keys)], values


def _sums(ids: np.ndarray, weights: np.ndarray, width: int) -> tuple[list[int], list[int]]:
    """The distinct ids (n,) below `width` and the sum of the weights (n,) of each."""
    if len(ids) * 16 >= width:  # a count per possible id costs less than sorting
        totals = np.bincount(ids, weights=weights, minlength=width)  # float64, exact below 2**53
        present = np.flatnonzero(np.bincount(ids, minlength=width))
        return present.tolist(), totals[present].astype(np.int64).tolist()
    distinct, inverse = np.unique(ids, return_inverse=True)
    return distinct.tolist(), np.bincount(inverse, weights=weights).astype(np.int64).tolist()


def _touches(prev: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Whether each occurrence's left neighbour `prev` (n,) is the end `ends` (n,) of the
    occurrence before it: the pair between them is counted once, with the one before."""
    touching = np.zeros(len(prev), dtype=bool)
    touching[1:] = prev[1:] == ends[:-1]
    return touching


def _left_to_right(at: np.ndarray, nxt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The occurrences of a pair (a, a) that a left-to-right rewrite merges: in a run a a a ...
    the first pair merges, the second overlaps it and stays, the third merges, and so on.
    `at`, `nxt`: (occurrences,) the left and right positions, in order."""
    index = np.arange(len(at), dtype=at.dtype)
    chained = np.zeros(len(at), dtype=bool)
    chained[1:] = at[1:] == nxt[:-1]  # this occurrence starts where the one before ends
    run_start = np.maximum.accumulate(np.where(chained, 0, index))
    keep = (index - run_start) % 2 == 0
    return at[keep], nxt[keep]

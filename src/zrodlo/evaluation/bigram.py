"""The bigram baseline: what counting pairs of neighbouring tokens alone achieves.

Counts every (token, next token) pair of a training corpus, documents never joined, and predicts
each target from the token before it with add-one smoothing over the vocabulary. Scored on the same
windows as a model, its loss tells a reader what a good number is.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from zrodlo.data.batches import IGNORED, collate
from zrodlo.data.corpus import release_pages
from zrodlo.data.windows import WindowTable
from zrodlo.training.score import Score


@dataclass(frozen=True)
class Bigram:
    """log P(next | previous) as a (V, V) float64 table, rows the previous token."""

    log_probabilities: np.ndarray

    @classmethod
    def count(
        cls, tokens: np.ndarray, offsets: np.ndarray, vocab_size: int, chunk: int = 1 << 22
    ) -> Bigram:
        """Fit on a corpus: tokens (N,) of documents bounded by offsets (D+1,), `chunk` tokens at
        a time, so that counting a memory-mapped corpus holds one chunk of it in memory."""
        offsets = np.asarray(offsets, dtype=np.int64)
        counts = np.zeros(vocab_size * vocab_size, dtype=np.int64)
        for first in range(0, len(tokens), chunk):
            end = min(first + chunk + 1, len(tokens))  # one more: the pair across the boundary
            piece = np.asarray(tokens[first:end], dtype=np.int64)  # (n,)
            # Pair (piece[i], piece[i+1]) counts unless a document starts at piece[i+1].
            starts = offsets[(offsets > first) & (offsets < end)] - first  # (s,)
            follows = np.ones(len(piece) - 1, dtype=bool)  # (n-1,)
            follows[starts - 1] = False
            pairs = piece[:-1][follows] * vocab_size + piece[1:][follows]
            counts += np.bincount(pairs, minlength=vocab_size * vocab_size)
            release_pages(tokens)
        table = counts.reshape(vocab_size, vocab_size).astype(np.float64) + 1.0  # add-one
        return cls(np.log(table / table.sum(axis=1, keepdims=True)))

    def score(
        self,
        tokens: np.ndarray,
        table: WindowTable,
        batch_size: int = 4096,
        windows: np.ndarray | None = None,
    ) -> Score:
        """Summed NLL over every target of the windows `windows` of `table` ((k,) int64; every
        window where None), each predicted from the token before it."""
        chosen = np.arange(len(table), dtype=np.int64) if windows is None else windows  # (k,)
        summed, targets = 0.0, 0
        for first in range(0, len(chosen), batch_size):
            indices = chosen[first : first + batch_size]  # (b,)
            batch = collate(tokens, table, indices, vocab_size=len(self.log_probabilities))
            inputs, expected = (t.numpy() for t in batch)  # (b, C-1) each
            valid = expected != IGNORED
            summed -= float(self.log_probabilities[inputs[valid], expected[valid]].sum())
            targets += int(valid.sum())
            release_pages(tokens)
        return Score(summed, targets, len(chosen))

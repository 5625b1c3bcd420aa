"""The character-bigram baseline: what counting pairs of neighbouring tokens alone achieves.

Counts every (token, next token) pair of a training corpus, documents never joined, and predicts
each target from the token before it with add-one smoothing over the vocabulary. Scored on the same
windows as a model, its loss tells a reader what a good number is.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from zrodlo.evaluate import Score
from zrodlo.loss import IGNORED
from zrodlo.windows import WindowTable, collate


@dataclass(frozen=True)
class Bigram:
    """log P(next | previous) as a (V, V) float64 table, rows the previous token."""

    log_probabilities: np.ndarray

    @classmethod
    def count(cls, tokens: np.ndarray, offsets: np.ndarray, vocab_size: int) -> Bigram:
        """Fit on a corpus: tokens (N,) of documents bounded by offsets (D+1,)."""
        tokens = np.asarray(tokens, dtype=np.int64)
        follows = np.ones(
            len(tokens), dtype=bool
        )  # whether tokens[i] has a next token in its document
        follows[np.asarray(offsets[1:], dtype=np.int64) - 1] = False
        previous = tokens[:-1][follows[:-1]]
        following = tokens[1:][follows[:-1]]
        counts = np.bincount(previous * vocab_size + following, minlength=vocab_size**2)
        counts = counts.reshape(vocab_size, vocab_size).astype(np.float64) + 1.0  # add-one
        return cls(np.log(counts / counts.sum(axis=1, keepdims=True)))

    def score(self, tokens: np.ndarray, table: WindowTable, batch_size: int = 4096) -> Score:
        """Summed NLL over every target of the windows, each predicted from the token before it."""
        summed, targets = 0.0, 0
        for first in range(0, len(table), batch_size):
            indices = np.arange(first, min(first + batch_size, len(table)))
            inputs, expected = (t.numpy() for t in collate(tokens, table, indices))  # (b, C-1)
            valid = expected != IGNORED
            summed -= float(self.log_probabilities[inputs[valid], expected[valid]].sum())
            targets += int(valid.sum())
        return Score(summed, targets, len(table))

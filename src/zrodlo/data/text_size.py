"""How much text a set of windows scores: the UTF-8 bytes and the characters of its targets, so
that a loss per token becomes bits per byte and per character, which compare across tokenizers.

Each target counts its token's text (`Tokenizer.text_sizes`); an end of document counts none, so
its cost is charged to the text it ends, alike for every tokenizer.
"""

from __future__ import annotations

import math

import numpy as np

from zrodlo.data.batches import IGNORED, collate
from zrodlo.data.corpus import release_pages
from zrodlo.data.windows import WindowTable


def scored_text(
    tokens: np.ndarray,
    table: WindowTable,
    windows: np.ndarray,
    sizes: np.ndarray,
    batch_size: int = 4096,
) -> tuple[int, int]:
    """The UTF-8 bytes and characters of the targets of the windows `windows` ((k,) int64) of
    `table`, by the tokenizer's text sizes (2, V)."""
    total = np.zeros(2, dtype=np.int64)
    for first in range(0, len(windows), batch_size):
        _, expected = collate(tokens, table, windows[first : first + batch_size])  # (b, C-1)
        targets = expected[expected != IGNORED].numpy()  # (t,)
        total += sizes[:, targets].sum(axis=1)
        release_pages(tokens)
    return int(total[0]), int(total[1])


def bits(summed: float, size: int) -> float | None:
    """A summed loss in nats as bits per unit of a text of `size` units; None for none."""
    return summed / math.log(2) / size if size else None

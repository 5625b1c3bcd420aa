"""How much text a set of windows scores: the UTF-8 bytes and the characters of its targets, so
that a loss per token becomes bits per byte and per character, which compare across tokenizers.

Each target counts its token's text (`Tokenizer.text_sizes`); an end of document counts none, so
its cost is charged to the text it ends, alike for every tokenizer. A tokenizer that puts marks
before each text (`Tokenizer.marks_before`, Llama 2's ▁) has them in the first token of each
document, the target after its BOS: they are no text, and are taken off there.
"""

from __future__ import annotations

import math

import numpy as np

from zrodlo.data.batches import IGNORED, collate
from zrodlo.data.corpus import release_pages
from zrodlo.data.tokenizer import Tokenizer
from zrodlo.data.windows import WindowTable


def scored_text(
    tokens: np.ndarray,
    table: WindowTable,
    windows: np.ndarray,
    tokenizer: Tokenizer,
    batch_size: int = 4096,
) -> tuple[int, int]:
    """The UTF-8 bytes and characters of the targets of the windows `windows` ((k,) int64) of
    `table`, by the text sizes (2, V) of the tokenizer the corpus was prepared with."""
    sizes, marks = tokenizer.text_sizes, tokenizer.marks_before
    total = np.zeros(2, dtype=np.int64)
    for first in range(0, len(windows), batch_size):
        inputs, expected = collate(tokens, table, windows[first : first + batch_size])  # (b, C-1)
        scored = expected != IGNORED
        total += sizes[:, expected[scored].numpy()].sum(axis=1)
        if marks:  # each first token of a text: after BOS, and no EOS (an empty text has none)
            firsts = scored & (inputs == tokenizer.bos) & (expected != tokenizer.eos)
            total -= marks * int(firsts.sum())
        release_pages(tokens)
    return int(total[0]), int(total[1])


def bits(summed: float, size: int) -> float | None:
    """A summed loss in nats as bits per unit of a text of `size` units; None for none."""
    return summed / math.log(2) / size if size else None

"""The text a set of windows scores: scored whole, a corpus's windows score exactly the UTF-8
bytes and characters of its documents, whatever the tokenizer, so bits per byte compare."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zrodlo.data.text_size import scored_text
from zrodlo.data.tokenizer.bpe import BPETokenizer
from zrodlo.data.tokenizer.bpe_training import count_pieces, fit_merges
from zrodlo.data.tokenizer.char import CharTokenizer
from zrodlo.data.windows import build_windows

TEXT = st.text(st.characters(exclude_categories=["Cs"]), min_size=1, max_size=40)


def tokenizers(texts: list[str]) -> list:
    return [CharTokenizer.fit(texts), BPETokenizer(tuple(fit_merges(count_pieces(texts), 30)))]


@settings(max_examples=100, deadline=None)
@given(st.lists(TEXT, min_size=1, max_size=6), st.integers(2, 12))
def test_every_window_scored_counts_the_documents_text_once(texts, context):
    for tokenizer in tokenizers(texts):
        tokens, sizes = tokenizer.encode_documents(texts, np.uint32)
        offsets = np.concatenate([[0], np.cumsum(sizes)])
        table = build_windows(offsets, min(context, len(tokens)))  # a window fits the corpus
        windows = np.arange(len(table), dtype=np.int64)
        expected = (sum(len(t.encode()) for t in texts), sum(len(t) for t in texts))
        assert scored_text(tokens, table, windows, tokenizer, 3) == expected


@pytest.mark.parametrize("text", ["é", "日本", "🙂x"])
def test_a_bpe_token_counts_the_characters_it_starts(text):
    bare = BPETokenizer(())
    sizes = bare.text_sizes[:, bare.encode(text)]  # one token a byte
    assert sizes[0].sum() == len(text.encode()) and sizes[1].sum() == len(text)

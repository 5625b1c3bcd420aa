"""Documents encoded in a child process: the same batches, in the same order, as encoding in the
caller's process, through the shared ring or, for a batch too large for a slot, the pipe; a
refusal in the child is the caller's refusal; no child outlives the caller's interest."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zrodlo.data import encoding
from zrodlo.data.tokenizer.char import CharTokenizer
from zrodlo.storage.refusal import Refusal

TOKENIZER = CharTokenizer.fit(["abcdé"])
DTYPE = np.dtype("<u2")
pytestmark = pytest.mark.skipif(not encoding.APART, reason="a child is forked only on Linux")


def write(path: Path, texts: list[str]) -> Path:
    path.write_text(
        "".join(json.dumps({"id": f"d{i}", "text": t}) + "\n" for i, t in enumerate(texts)),
        encoding="utf-8",
    )
    return path


def batches(path: Path, apart: bool, characters: int) -> list[tuple]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(encoding, "APART", apart)
        found = []
        for batch in encoding.encoded_batches(path, TOKENIZER, DTYPE, characters):
            found.append((batch.ids, batch.tokens.tolist(), batch.sizes.tolist()))
            batch.done()  # the slot may be filled again after this
        return found


@settings(max_examples=25, deadline=None)
@given(
    texts=st.lists(st.text("abcdéxz", min_size=1, max_size=60), min_size=1, max_size=40),
    characters=st.integers(1, 50),
)
def test_the_child_sends_the_batches_the_caller_would_encode(tmp_path_factory, texts, characters):
    # Documents up to 60 characters against slots of 2 * characters tokens: some batches fit a
    # slot of the ring, some go down the pipe, and the ring turns over many times.
    path = write(tmp_path_factory.mktemp("docs") / "documents.jsonl", texts)
    assert batches(path, apart=True, characters=characters) == batches(path, False, characters)


def test_a_refusal_in_the_child_is_the_callers_refusal_after_the_batches_before_it(tmp_path):
    path = write(tmp_path / "documents.jsonl", ["abc"] * 50)
    with open(path, "a", encoding="utf-8") as handle:
        handle.write('{"id": "d3", "text": "again"}\n')
    received = []
    with pytest.raises(Refusal) as refused:
        for batch in encoding.encoded_batches(path, TOKENIZER, DTYPE, 10):
            received.extend(batch.ids)
            batch.done()
    assert str(refused.value) == (
        f'{path} lines 4 and 51 both have id "d3"; every document needs an id of its own'
    )
    assert received == [f"d{i}" for i in range(48)]  # every whole batch before the bad line
    assert multiprocessing.active_children() == []


def test_a_caller_that_stops_early_leaves_no_child(tmp_path):
    path = write(tmp_path / "documents.jsonl", ["abcd"] * 200)
    stream = encoding.encoded_batches(path, TOKENIZER, DTYPE, 4)
    next(stream).done()
    assert len(multiprocessing.active_children()) == 1
    stream.close()
    assert multiprocessing.active_children() == []


def test_a_child_that_dies_is_an_error_not_an_end(tmp_path):
    path = write(tmp_path / "documents.jsonl", ["abcd"] * 200)
    stream = encoding.encoded_batches(path, TOKENIZER, DTYPE, 4)
    next(stream)  # its slot is never handed back: the child waits for a free one
    (child,) = multiprocessing.active_children()
    os.kill(child.pid, signal.SIGKILL)
    with pytest.raises(RuntimeError, match="ended without a word"):
        for batch in stream:
            batch.done()
    assert multiprocessing.active_children() == []

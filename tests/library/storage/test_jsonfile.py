"""The one JSON parser of every reader: what json.loads accepts silently or dies on is an error
that names the line, and a document whose values would outgrow its size many times over is
refused before it is parsed."""

from __future__ import annotations

import json
import random
import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer, models, pre_tokenizers

from zrodlo.data.tokenizer.bpe_training import byte_symbols
from zrodlo.storage.jsonfile import (
    MEMORY_MULTIPLE,
    MEMORY_SLACK,
    JSONLimit,
    loads,
    values_size,
)


def test_valid_json_parses_as_json_loads_parses_it():
    text = '{"a": [1, -2, 3.5, "x\\"y", {"b": null}], "c": true, "d": 1e3}'
    assert loads(text) == json.loads(text)
    assert loads(text.encode()) == json.loads(text)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{\n"a": 1,\n"b": {"c": 2, "c": 3}}', 'an object repeats the key "c" on line 3'),
        ('{"a": 1,\n\n "a": 2}', 'an object repeats the key "a" on line 3'),
        ("[1,\n" + "7" * 4301 + "]", "an integer has more than 4300 digits on line 2"),
        ("\n" + "[" * 100_000 + "]" * 100_000, "values nest more than 500 levels deep on line 2"),
    ],
)
def test_a_repeated_key_a_huge_integer_and_deep_nesting_name_their_line(text, message):
    with pytest.raises(JSONLimit) as refused:
        loads(text)
    assert str(refused.value) == message
    assert isinstance(refused.value, json.JSONDecodeError)


def test_keys_repeat_freely_in_different_objects():
    assert loads('[{"a": 1}, {"a": 2}, {"b": {"a": 3}}]') == [{"a": 1}, {"a": 2}, {"b": {"a": 3}}]


EMPTY_LISTS = b"[" + b"[]," * 1_500_000 + b"[]]"  # 4.5 MB; parsed, over 100 MB


def test_a_file_of_empty_lists_is_refused_before_it_is_parsed():
    """Each empty list is 3 bytes of the file and 64 of memory: the bound counts them first and
    refuses the document, holding a few copies of it meanwhile (parsed, it took 23 times)."""
    tracemalloc.start()
    try:
        with pytest.raises(JSONLimit) as refused:
            loads(EMPTY_LISTS)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert str(refused.value) == (
        "its values would take up to 167 MB in memory, more than 28 times its 4.5 MB"
    )
    assert peak < 5 * len(EMPTY_LISTS)


def test_a_tokenizer_of_empty_lists_is_refused_by_the_command(tmp_path, assert_refused):
    (tmp_path / "tokenizer").mkdir()
    file = tmp_path / "tokenizer" / "tokenizer.json"
    file.write_bytes(EMPTY_LISTS)
    (tmp_path / "documents.jsonl").write_text('{"id": "a", "text": "some text"}\n')
    assert_refused(
        "corpus", "prepare", "--documents", tmp_path / "documents.jsonl",
        "--tokenizer", tmp_path / "tokenizer", "--output", tmp_path / "corpus",
        sentence=f"{file} does not load as a tokenizer: its values would take up to 167 MB in "
        "memory, more than 28 times its 4.5 MB",
    )  # fmt: skip


def released_shape(size: int, merges_as_text: bool) -> bytes:
    """A byte-level BPE tokenizer.json of `size` tokens, as the tokenizers library writes it
    compact (its densest form): a vocabulary of GPT-2-like tokens (a space stand-in and letters,
    grown a letter at a time) and a merge for each, written as pairs or, as GPT-2's file has them,
    as "left right" text."""
    rng = random.Random(size)
    stand_ins = byte_symbols()
    letters = [symbol for symbol in stand_ins if symbol.isascii() and symbol.isalpha()]
    vocab = {symbol: index for index, symbol in enumerate(stand_ins)}
    growing, merges = ["\u0120", *letters], []
    while len(vocab) < size:
        left = growing[rng.randrange(max(0, len(growing) - 20_000), len(growing))]
        right = rng.choice(letters)
        if left + right not in vocab:
            vocab[left + right] = len(vocab)
            merges.append((left, right))
            if len(left) < 9:
                growing.append(left + right)
    library = Tokenizer(models.BPE(vocab, merges))
    library.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    document = json.loads(library.to_str())
    if merges_as_text:
        document["model"]["merges"] = [" ".join(pair) for pair in document["model"]["merges"]]
    return json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode()


@pytest.mark.parametrize(("size", "merges_as_text"), [(50_257, True), (151_643, False)])
def test_tokenizer_files_shaped_as_released_ones_are_read_within_the_bound(size, merges_as_text):
    data = released_shape(size, merges_as_text)
    tracemalloc.start()
    try:
        value = loads(data)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(value["model"]["vocab"]) == size
    bound = values_size(data, data.decode())
    assert peak <= bound <= MEMORY_MULTIPLE * len(data) + MEMORY_SLACK


# A document of many copies of one value: the costs per value, not the parser's fixed ones, count.
TEXT = st.characters(exclude_categories=["Cs"])
VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
    | st.text(TEXT, max_size=8),
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.text(TEXT, max_size=4), inner, max_size=4),
    max_leaves=8,
)  # fmt: skip


@settings(max_examples=60, deadline=None)
@given(VALUES, st.booleans())
def test_the_bound_holds_what_the_parse_takes(value, compact):
    separators = (",", ":") if compact else (", ", ": ")
    one = json.dumps(value, ensure_ascii=False, separators=separators)
    text = "[" + ",".join([one] * max(1, 200_000 // len(one))) + "]"
    data = text.encode()
    peaks = []
    for _ in range(3):  # the least of three: tracemalloc counts every thread's allocations, and
        tracemalloc.start()  # another one (pytest-xdist's messages) may allocate during one parse
        try:
            loads(data)
            peaks.append(tracemalloc.get_traced_memory()[1])
        except JSONLimit:
            return  # refused before parsing
        finally:
            tracemalloc.stop()
    assert min(peaks) <= values_size(data, text) + (256 << 10)  # the parser's own, first use

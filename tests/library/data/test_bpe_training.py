"""The byte-level BPE trainer: merges by count with ties broken by bytes, the same merges whatever
the hash seed, the thread count or the order a hash table keeps, and a cost that follows the text
a merge touches."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oracles import bpe_merges
from zrodlo.data.tokenizer.bpe_training import byte_symbols, count_pieces, fit_merges


def test_byte_symbols_are_gpt2s_stand_ins():
    """The public table of GPT-2's byte-level BPE: printable Latin-1 stands for itself, the space
    is U+0120 (Ġ), the newline U+010A (Ċ), and 256 distinct symbols in all."""
    symbols = byte_symbols()
    assert len(set(symbols)) == 256
    assert symbols[ord("a")] == "a"
    assert symbols[ord(" ")] == "\u0120"
    assert symbols[ord("\n")] == "\u010a"
    assert symbols[0] == "\u0100"


def test_the_most_frequent_pair_merges_first():
    merges = fit_merges({"aab": 3, "ab": 2, "cd": 1}, 2)
    # "a b" occurs 5 times, "a a" 3 times; after "ab" merges, "a ab" occurs 3 times.
    assert merges == [("a", "b"), ("a", "ab")]


def test_a_tie_goes_to_the_pair_whose_bytes_come_first():
    # "yz", "bc" and "xa" each occur once: "bc" has the smallest left bytes.
    assert fit_merges({"yz": 1, "xa": 1, "bc": 1}, 1) == [("b", "c")]
    # Equal left bytes: the right ones decide.
    assert fit_merges({"ab": 1, "aa": 1}, 1) == [("a", "a")]


def test_the_order_pieces_were_seen_in_changes_nothing():
    counts = count_pieces(["the cat sat on the mat", "a hat, a bat; the end"])
    reversed_counts = dict(reversed(list(counts.items())))
    assert fit_merges(counts, 40) == fit_merges(reversed_counts, 40)


def test_fitting_stops_where_no_pair_is_left():
    assert fit_merges({"ab": 1}, 10) == [("a", "b")]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet="abc \n", max_size=12), min_size=1, max_size=8))
def test_the_incremental_trainer_learns_what_the_definition_does(texts):
    counts = count_pieces(texts)
    assert fit_merges(counts, 30) == bpe_merges(counts, 30)


STAND_INS = byte_symbols()
# A piece as runs of one symbol each, so that overlapping pairs ("a a a a") and equal counts come
# up often; the symbols include bytes of UTF-8 sequences, the space and the newline stand-ins.
RUNS = st.lists(
    st.tuples(st.sampled_from([97, 98, 99, 32, 10, 0xC3, 0xA9, 0xE6, 0x9D, 0xB1]), st.integers(1, 40)),
    min_size=1, max_size=6,
).map(lambda runs: "".join(STAND_INS[byte] * length for byte, length in runs))  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(RUNS, st.integers(1, 3), min_size=1, max_size=6), st.integers(1, 60))
def test_long_runs_and_ties_merge_as_the_definition_does(counts, symbols_wanted):
    """Runs where a pair overlaps itself merge left to right, as rewriting the piece would;
    equal counts go to the pair whose bytes come first; a symbol spelled twice is made once."""
    assert fit_merges(counts, symbols_wanted) == bpe_merges(counts, symbols_wanted)


def test_a_long_piece_holds_memory_in_proportion_to_its_bytes():
    """The bound the trainer states: at most about 650 bytes per byte of the distinct pieces (with
    a mebibyte of fixed costs), however many merges touch a piece. Rewriting the whole piece at
    every merge and keeping every stale queue entry took over 5,000 bytes per byte here."""
    letters = random.Random(0).choices("abcdefghijklmnopqrstuvwxyz", k=3000)
    tracemalloc.start()
    try:
        merges = fit_merges({"".join(letters): 1}, 150)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(merges) == 150
    assert peak <= 650 * len(letters) + (1 << 20), f"{peak / len(letters):.0f} bytes per byte"


FIT = """
import sys
import tracemalloc
from pathlib import Path
from zrodlo.data.tokenizer.bpe_training import count_pieces, fit_merges
texts = [open(sys.argv[1], encoding="utf-8").read()] * 3
print(repr(fit_merges(count_pieces(texts), 300)))
"""


@pytest.mark.parametrize(
    "env", [{"PYTHONHASHSEED": "1"}, {"PYTHONHASHSEED": "2", "RAYON_NUM_THREADS": "1"},
            {"PYTHONHASHSEED": "3", "RAYON_NUM_THREADS": "16"}],
)  # fmt: skip
def test_the_same_merges_whatever_the_hash_seed_and_threads(env, tmp_path):
    text = tmp_path / "text.txt"
    text.write_text(Path(__file__).read_text(encoding="utf-8") + "Zürich 東京 🙂 résumé\n")
    runs = [
        subprocess.run(
            [sys.executable, "-c", FIT, text], env={**os.environ, **seeds}, capture_output=True,
            text=True, check=True,
        ).stdout
        for seeds in ({"PYTHONHASHSEED": "0"}, env)
    ]  # fmt: skip
    assert runs[0] == runs[1]

"""The byte-level BPE trainer: merges by count with ties broken by bytes, the same merges whatever
the hash seed, the thread count or the order a hash table keeps, and a cost that follows the text
a merge touches."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


def naive_merges(counts: dict[str, int], symbols_wanted: int) -> list[tuple[str, str]]:
    """The definition, slowly: rescan every piece for every merge."""
    stand_in = byte_symbols()
    byte_of = {symbol: byte for byte, symbol in enumerate(stand_in)}
    pieces = [([stand_in[byte_of[c]] for c in piece], n) for piece, n in counts.items()]
    learned, made = [], set()
    while len(made) < symbols_wanted:
        pairs: dict[tuple[str, str], int] = {}
        for symbols, n in pieces:
            for pair in itertools.pairwise(symbols):
                pairs[pair] = pairs.get(pair, 0) + n
        if not pairs:
            break
        to_bytes = lambda s: bytes(byte_of[c] for c in s)  # noqa: E731
        best = min(pairs, key=lambda p: (-pairs[p], to_bytes(p[0]), to_bytes(p[1])))
        learned.append(best)
        made.add(best[0] + best[1])
        for index, (symbols, n) in enumerate(pieces):
            out, at = [], 0
            while at < len(symbols):
                if at + 1 < len(symbols) and (symbols[at], symbols[at + 1]) == best:
                    out.append(best[0] + best[1])
                    at += 2
                else:
                    out.append(symbols[at])
                    at += 1
            pieces[index] = (out, n)
    return learned


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet="abc \n", max_size=12), min_size=1, max_size=8))
def test_the_incremental_trainer_learns_what_the_definition_does(texts):
    counts = count_pieces(texts)
    assert fit_merges(counts, 30) == naive_merges(counts, 30)


FIT = """
import sys
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

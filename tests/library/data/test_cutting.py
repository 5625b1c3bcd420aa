"""Cutting texts into documents: at each match of a separator, into parts at the last line break
before a limit, pieces numbered from the text's id in text order, blank pieces dropped."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zrodlo.data.cutting import Cutting
from zrodlo.storage.refusal import Refusal

PLAY = (
    "First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.\n"
    "\n  \nFirst Citizen:\nYou are all resolved rather to die than to famish?\n"
)
BLANK_LINE = r"\n\s*\n"


def test_a_blank_line_separates_the_speeches_of_a_play():
    assert Cutting.of(BLANK_LINE, None).documents("input.txt", PLAY) == [
        ("input.txt#1", "First Citizen:\nBefore we proceed any further, hear me speak."),
        ("input.txt#2", "All:\nSpeak, speak."),
        ("input.txt#3", "First Citizen:\nYou are all resolved rather to die than to famish?\n"),
    ]


def test_nothing_to_cut_leaves_the_text_whole_under_its_id():
    assert Cutting.of(None, None).documents("input.txt", PLAY) == [("input.txt", PLAY)]


def test_a_long_text_is_cut_at_the_last_line_break_within_the_limit():
    assert Cutting.of(None, 40).pieces(PLAY) == [
        "First Citizen:\n",
        "Before we proceed any further, hear me s",  # a line longer than 40: cut at 40
        "peak.\n\nAll:\nSpeak, speak.\n\n  \n",
        "First Citizen:\n",
        "You are all resolved rather to die than ",
        "to famish?\n",
    ]


def test_ids_are_padded_to_one_width_so_that_they_sort_in_text_order():
    ids = [doc_id for doc_id, _ in Cutting.of(",", None).documents("t", ",".join("x" * 12))]
    assert ids[0] == "t#01" and ids[-1] == "t#12" and sorted(ids) == ids


def test_groups_in_the_separator_are_not_documents():
    assert Cutting.of(r"(-)+", None).pieces("a--b-c") == ["a", "b", "c"]


@given(st.text(alphabet="ab\n ", max_size=60), st.integers(1, 8))
def test_parts_keep_every_character_of_the_text_but_blank_ones(text, limit):
    pieces = Cutting.of(None, limit).pieces(text)
    assert all(0 < len(piece) <= limit and piece.strip() for piece in pieces)
    assert "".join(pieces).replace(" ", "").replace("\n", "") == text.replace(" ", "").replace(
        "\n", ""
    )


@pytest.mark.parametrize(
    ("cut_at", "max_characters", "sentence"),
    [
        ("(", None, "--cut-at '(' is not a regular expression: missing ), unterminated subpattern "
         "at position 0"),
        (r"\n*", None, "--cut-at '\\\\n*' matches an empty text; the separator between two "
         "documents holds one character or more, such as '\\n\\s*\\n' (a blank line)"),
        (None, 0, "--max-characters is 0; it must be a whole number of 1 or more"),
    ],
)  # fmt: skip
def test_a_cut_that_cannot_be_made_is_refused(cut_at, max_characters, sentence):
    with pytest.raises(Refusal) as refused:
        Cutting.of(cut_at, max_characters)
    assert refused.value.sentence == sentence

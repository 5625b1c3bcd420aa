"""The character tokenizer: ids, fitting, encoding, round trips, the digest and loading."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zrodlo.data.tokenizer import load_tokenizer
from zrodlo.data.tokenizer.char import BOS, EOS, UNK, CharTokenizer, code_points
from zrodlo.storage.refusal import Refusal

ALPHABET = "a b\nzé—ß中😀𝄞"
FITTED = CharTokenizer.fit([ALPHABET[:6], ALPHABET[6:]])

# sha256 of {"characters":["a","b","c"],"kind":"char","special":{"BOS":1,"EOS":2,"UNK":0}}.
ABC_DIGEST = "ea9cf019bf10b555a8e6d0d30f450cd4e6b8717e5d3355294a5632955f883550"


def test_special_ids_are_unk_0_bos_1_eos_2():
    assert (UNK, BOS, EOS) == (0, 1, 2)


def test_characters_take_ids_from_3_in_code_point_order():
    tokenizer = CharTokenizer.fit(["😀b", "a中b"])
    assert tokenizer.characters == ["a", "b", "中", "😀"]
    assert tokenizer.encode("ab中😀").tolist() == [3, 4, 5, 6]
    assert tokenizer.vocab_size == 7


def test_a_character_the_fitted_texts_lack_encodes_as_unk():
    tokenizer = CharTokenizer.fit(["abc"])
    assert tokenizer.encode("aXc\U0010ffff").tolist() == [3, UNK, 5, UNK]


def test_lone_surrogates_are_never_fitted_and_encode_as_unk():
    tokenizer = CharTokenizer.fit(["a\ud800b"])
    assert tokenizer.characters == ["a", "b"]
    assert tokenizer.encode("\ud800a").tolist() == [UNK, 3]


def test_an_empty_tokenizer_encodes_everything_as_unk():
    assert CharTokenizer.fit([]).encode("hi").tolist() == [UNK, UNK]


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=ALPHABET))
def test_decode_inverts_encode_over_the_fitted_alphabet(text):
    ids = FITTED.encode(text)
    assert ids.dtype == np.int32 and len(ids) == len(text)
    assert FITTED.decode(ids) == text


def test_decode_drops_bos_and_eos_and_shows_unk_as_the_replacement_character():
    tokenizer = CharTokenizer.fit(["ab"])
    assert tokenizer.decode([BOS, 3, UNK, 4, EOS]) == "a\ufffdb"


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.text(alphabet=ALPHABET, min_size=1), max_size=6),
    st.integers(0, 40),
)
def test_encode_documents_gives_bos_characters_eos_per_document(texts, room):
    expected = [t for text in texts for t in [BOS, *FITTED.encode(text).tolist(), EOS]]
    out = np.full(room, 99, dtype=np.uint16)
    tokens, sizes = FITTED.encode_documents(texts, np.uint16, out=out)
    assert tokens.dtype == np.uint16 and tokens.tolist() == expected
    assert sizes.tolist() == [len(text) + 2 for text in texts]
    # Into the start of `out` exactly when all the tokens fit there; `out` untouched otherwise.
    assert np.shares_memory(tokens, out) == (0 < len(expected) <= room)
    if len(expected) > room:
        assert (out == 99).all()


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(exclude_categories=())))
def test_code_points_are_each_characters_ord_in_16_bits_where_all_fit(text):
    """Lone surrogates and characters past U+FFFF included, alone or side by side."""
    points = code_points(text)
    assert points.tolist() == [ord(c) for c in text]
    assert points.dtype == (np.uint16 if all(ord(c) < 0x10000 for c in text) else np.uint32)


def test_code_points_of_a_surrogate_pair_written_as_two_characters_are_the_two_surrogates():
    assert code_points("\ud83d\ude00").tolist() == [0xD83D, 0xDE00]
    assert code_points("\U0001f600").tolist() == [0x1F600]


def test_the_digest_is_sha256_of_the_canonical_form_and_pinned():
    tokenizer = CharTokenizer.fit(["cab", "abc"])
    canonical = b'{"characters":["a","b","c"],"kind":"char","special":{"BOS":1,"EOS":2,"UNK":0}}'
    assert tokenizer.digest == hashlib.sha256(canonical).hexdigest() == ABC_DIGEST


def test_the_digest_changes_with_any_character():
    assert CharTokenizer.fit(["abd"]).digest != ABC_DIGEST
    assert CharTokenizer.fit(["ab"]).digest != ABC_DIGEST


def test_save_then_load_gives_the_same_tokenizer(tmp_path):
    FITTED.save(tmp_path)
    loaded = load_tokenizer(tmp_path)
    assert loaded == FITTED
    assert loaded.digest == FITTED.digest
    assert load_tokenizer(tmp_path / "tokenizer.json") == FITTED
    written = json.loads((tmp_path / "tokenizer.json").read_text(encoding="utf-8"))
    assert written["vocab_size"] == FITTED.vocab_size
    assert written["digest"] == FITTED.digest


def test_load_refuses_a_directory_without_tokenizer_json(tmp_path):
    with pytest.raises(Refusal) as refused:
        load_tokenizer(tmp_path)
    assert refused.value.sentence == (
        f"{tmp_path} holds no tokenizer.json; a tokenizer is written by zrodlo tokenizer fit"
    )


def test_load_refuses_a_tokenizer_whose_digest_does_not_match(tmp_path):
    CharTokenizer.fit(["abc"]).save(tmp_path)
    file = tmp_path / "tokenizer.json"
    file.write_text(file.read_text().replace('"c"', '"d"'))
    with pytest.raises(Refusal) as refused:
        load_tokenizer(tmp_path)
    assert refused.value.sentence == (
        f"{file} records digest {ABC_DIGEST}, and its content has digest "
        f"{CharTokenizer.fit(['abd']).digest}; the file was changed after it was fitted"
    )


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (
            {"kind": "word"},
            'it is not a JSON object of kind "char", "bpe", "imported-bpe" or "imported-sentencepiece"',
        ),
        (
            {"kind": ["char"]},
            'it is not a JSON object of kind "char", "bpe", "imported-bpe" or "imported-sentencepiece"',
        ),
        # A character tokenizer's file relabelled as a BPE is read as one, and holds none.
        ({"kind": "bpe"}, "its special ids are not BOS 0, EOS 1"),
        (
            {"special": {"UNK": 0, "BOS": 2, "EOS": 1}},
            "its special ids are not UNK 0, BOS 1, EOS 2",
        ),
        ({"characters": ["ab"]}, "its characters are not a list of single characters"),
        ({"characters": ["b", "a"]}, "its characters are not in strictly rising code point order"),
        ({"characters": ["a", "a"]}, "its characters are not in strictly rising code point order"),
    ],
)
def test_load_refuses_a_malformed_tokenizer(tmp_path, change, reason):
    CharTokenizer.fit(["ab"]).save(tmp_path)
    file = tmp_path / "tokenizer.json"
    file.write_text(json.dumps({**json.loads(file.read_text()), **change}))
    with pytest.raises(Refusal) as refused:
        load_tokenizer(tmp_path)
    assert refused.value.sentence == f"{file} does not load as a tokenizer: {reason}"

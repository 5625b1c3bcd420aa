"""The byte-level BPE tokenizer: ids, encoding that round-trips any text, the digest over its
canonical form, and the refusal of a file that does not hold what its merges make."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zrodlo.data.tokenizer import library_encoding, load_tokenizer
from zrodlo.data.tokenizer.bpe import BOS, EOS, BPETokenizer
from zrodlo.data.tokenizer.bpe_training import count_pieces, fit_merges
from zrodlo.storage.refusal import Refusal

TEXTS = [
    "the quick brown fox jumps over the lazy dog",
    "the lazy dog sleeps; the fox runs",
    "Zürich",
]


@pytest.fixture(scope="module")
def fitted() -> BPETokenizer:
    return BPETokenizer(tuple(fit_merges(count_pieces(TEXTS), 40)))


def test_ids_are_bos_eos_then_the_bytes_then_the_merges(fitted):
    bare = BPETokenizer(())
    assert bare.vocab_size == 258
    assert bare.encode("A\n").tolist() == [2 + ord("A"), 2 + ord("\n")]
    assert bare.encode("é").tolist() == [2 + 0xC3, 2 + 0xA9]  # its two UTF-8 bytes
    assert fitted.vocab_size == 258 + 40
    assert fitted.vocabulary[:2] == ["<bos>", "<eos>"]
    assert len(fitted.encode("the lazy dog")) < len("the lazy dog")


@settings(max_examples=300, deadline=None)
@given(st.text(st.characters(exclude_categories=["Cs"]), max_size=60))
def test_any_text_decodes_back_to_itself(fitted, text):
    ids = fitted.encode(text)
    assert fitted.decode(ids) == text
    assert ids.dtype == np.int32 and (ids >= 2).all() and (ids < fitted.vocab_size).all()


def test_the_names_of_the_specials_in_a_text_are_text(fitted):
    """A document that holds "<bos>" or "<eos>" (a tokenizer's own source, say) keeps them as
    text: only the frame of a document is BOS and EOS."""
    text = "a<bos>b<eos>c"
    ids = fitted.encode(text).tolist()
    assert BOS not in ids and EOS not in ids and fitted.decode(ids) == text
    tokens, _ = fitted.encode_documents([text], np.uint32)
    assert tokens.tolist() == [BOS, *ids, EOS]


@settings(max_examples=50, deadline=None)
@given(st.lists(st.text(st.characters(exclude_categories=["Cs"]), max_size=30), max_size=5))
def test_documents_encode_as_bos_their_tokens_eos(fitted, texts):
    tokens, sizes = fitted.encode_documents(texts, np.uint16)
    expected = [token for text in texts for token in (BOS, *fitted.encode(text).tolist(), EOS)]
    assert tokens.tolist() == expected
    assert sizes.tolist() == [len(fitted.encode(text)) + 2 for text in texts]


def test_the_file_loads_back_with_its_digest(fitted, tmp_path):
    fitted.save(tmp_path)
    loaded = load_tokenizer(tmp_path)
    assert loaded == fitted and loaded.digest == fitted.digest
    assert json.loads((tmp_path / "tokenizer.json").read_text())["kind"] == "bpe"


def test_the_digest_covers_the_merges(fitted):
    changed = BPETokenizer(fitted.merges[:-1])
    assert changed.digest != fitted.digest


def edited(tmp_path: Path, fitted: BPETokenizer, change) -> Path:
    fitted.save(tmp_path)
    file = tmp_path / "tokenizer.json"
    data = json.loads(file.read_text())
    change(data)
    file.write_text(json.dumps(data))
    return file


def test_a_file_edited_by_hand_is_refused_by_its_digest(fitted, tmp_path):
    def drop_last_merge(data):
        data["merges"].pop()
        data["vocabulary"] = BPETokenizer(tuple(map(tuple, data["merges"]))).vocabulary

    file = edited(tmp_path, fitted, drop_last_merge)
    shorter = BPETokenizer(fitted.merges[:-1])
    with pytest.raises(Refusal) as refused:
        load_tokenizer(tmp_path)
    assert refused.value.sentence == (
        f"{file} records digest {fitted.digest}, and its content has digest {shorter.digest}; "
        "the file was changed after it was fitted"
    )


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda d: d.update(special={"BOS": 1, "EOS": 0}), "its special ids are not BOS 0, EOS 1"),
        (lambda d: d.update(pre_tokenizer="bert"),
         'its pre-tokenizer is not "gpt2" with normalization "none"'),
        (lambda d: d.update(merges=[["a"]]), "its merges are not a list of pairs of symbols"),
        (lambda d: d.update(merges=[["ab", "c"]]),
         "its merge ab c joins a symbol no earlier merge made"),
        (lambda d: d["vocabulary"].pop(), "its vocabulary is not the one its merges make"),
        (lambda d: d.update(kind="wordpiece"), 'it is not a JSON object of kind "char", "bpe", "imported-bpe" or "imported-sentencepiece"'),
    ],
)  # fmt: skip
def test_a_file_that_holds_no_bpe_is_refused(fitted, tmp_path, change, reason):
    file = edited(tmp_path, fitted, change)
    with pytest.raises(Refusal) as refused:
        load_tokenizer(tmp_path)
    assert refused.value.sentence == f"{file} does not load as a tokenizer: {reason}"


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet="ab1 .\n\t'é", max_size=60), min_size=1, max_size=4))
def test_long_documents_encode_in_parts_to_the_ids_of_the_whole(fitted, texts):
    """A document is encoded a part at a time, cut before line breaks, for memory: the ids are
    those of the whole text however short the parts."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(library_encoding, "_CHUNK_CHARACTERS", 3)
        tokens, _ = fitted.encode_documents(texts, np.uint32)
    expected = [token for text in texts for token in (BOS, *fitted.encode(text).tolist(), EOS)]
    assert tokens.tolist() == expected

"""A tokenizer.json that puts each text in Unicode's NFC before encoding it (Qwen2's and Qwen2.5's)
is imported: a text already in NFC, which it leaves as it is, encodes as the library encodes it and
decodes back, and a text that is not is told apart; every other normalizer is refused, writing
nothing."""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from library_tokenizers import edited, gpt2_file, qwen2_file
from tokenizers import Tokenizer

from zrodlo.data.tokenizer import load_tokenizer
from zrodlo.data.tokenizer.imported import ImportedBPE, import_tokenizer
from zrodlo.storage.refusal import Refusal

NFC_TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=60).map(
    lambda text: unicodedata.normalize("NFC", text)
)
NOT_NFC = (
    "not in Unicode normalization form NFC, which the tokenizer puts every text in before "
    "encoding it, so it would not decode back as written; normalize the text to NFC first"
)


@pytest.fixture(scope="module")
def qwen2(tmp_path_factory) -> tuple[Path, ImportedBPE, Tokenizer]:
    """Qwen2's layout imported, documents framed by <|endoftext|>, beside the library's own."""
    root = tmp_path_factory.mktemp("qwen2")
    source = qwen2_file(root / "tokenizer.json")
    tokenizer = import_tokenizer(source, root / "imported", "<|endoftext|>", "<|endoftext|>")
    return root, tokenizer, Tokenizer.from_file(str(source))


@settings(max_examples=200, deadline=None)
@given(NFC_TEXT)
def test_a_text_in_nfc_encodes_as_the_library_does_and_decodes_back(qwen2, text):
    _, tokenizer, library = qwen2
    ids = tokenizer.encode(text).tolist()
    assert ids == library.encode(text, add_special_tokens=False).ids
    assert tokenizer.decode(ids) == text
    assert tokenizer.text_problem(text) is None
    tokens, _ = tokenizer.encode_documents([text, "naïve café"])
    expected = [tokenizer.bos, *ids, tokenizer.eos]
    assert tokens.tolist()[: len(expected)] == expected


def test_a_text_not_in_nfc_is_told_apart(qwen2):
    _, tokenizer, library = qwen2
    decomposed = "cafe\u0301"
    assert tokenizer.text_problem(decomposed) == NOT_NFC
    # What the library would do with it: the text that comes back is another one.
    assert tokenizer.decode(tokenizer.encode(decomposed)) == "caf\u00e9"
    assert library.normalizer.normalize_str(decomposed) == "caf\u00e9"


def test_the_import_keeps_its_normalizer_in_its_file_and_digest(qwen2, tmp_path):
    root, tokenizer, _ = qwen2
    stored = json.loads((root / "imported" / "tokenizer.json").read_text(encoding="utf-8"))
    assert stored["tokenizer"]["normalizer"] == {"type": "NFC"}
    loaded = load_tokenizer(root / "imported")
    assert loaded.digest == tokenizer.digest and loaded.text_problem("e\u0301") == NOT_NFC
    # The same file without its normalizer is another tokenizer: no text is refused by it.
    bare = edited(qwen2_file(tmp_path / "tokenizer.json"), lambda d: d.update(normalizer=None))
    other = import_tokenizer(bare, tmp_path / "bare", "<|endoftext|>", "<|endoftext|>")
    assert other.digest != tokenizer.digest and other.text_problem("e\u0301") is None


def test_a_tokenizer_without_a_normalizer_takes_every_text(tmp_path):
    tokenizer = import_tokenizer(gpt2_file(tmp_path / "gpt2.json"), tmp_path / "out")
    assert tokenizer.text_problem("cafe\u0301") is None
    assert tokenizer.decode(tokenizer.encode("cafe\u0301")) == "cafe\u0301"


@pytest.mark.parametrize(
    ("normalizer", "kind"),
    [
        ({"type": "NFKC"}, "NFKC"),
        ({"type": "NFD"}, "NFD"),
        ({"type": "Lowercase"}, "Lowercase"),
        ({"type": "Sequence", "normalizers": [{"type": "NFC"}]}, "Sequence"),
        ({"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "Lowercase"}]}, "Sequence"),
    ],
)
def test_a_normalizer_other_than_nfc_is_refused_writing_nothing(tmp_path, normalizer, kind):
    source = edited(
        qwen2_file(tmp_path / "tokenizer.json"), lambda d: d.update(normalizer=normalizer)
    )
    with pytest.raises(Refusal) as refused:
        import_tokenizer(source, tmp_path / "out", "<|endoftext|>", "<|endoftext|>")
    assert refused.value.sentence == (
        f"{source} cannot be imported: it normalizes each text ({kind}), and a corpus keeps a text "
        "as it is; the one normalizer Zrodlo takes is NFC alone, which leaves a text in NFC as it is"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tokenizer.json"]

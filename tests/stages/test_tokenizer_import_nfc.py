"""A tokenizer in Qwen2's layout, which puts each text in Unicode's NFC, by the real commands:
imported, a corpus of texts in NFC holding the library's ids, a document or prompt not in NFC
refused with its sentence, writing nothing, and the export read by transformers with the same
ids."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import TINY_MODEL
from library_tokenizers import qwen2_file
from tokenizers import Tokenizer

from zrodlo.data.corpus import Corpus

NOT_NFC = (
    "not in Unicode normalization form NFC, which the tokenizer puts every text in before "
    "encoding it, so it would not decode back as written; normalize the text to NFC first"
)
DOCUMENTS = {"cafe": "naïve café 東京 🙂", "digits": "It's 2024-05-17.\n\n  done"}


@pytest.fixture
def imported(tmp_path, run_zrodlo) -> Path:
    """tmp_path with Qwen2's layout as qwen2.json and imported as `tokenizer`, documents framed by
    <|im_start|> and <|endoftext|>."""
    qwen2_file(tmp_path / "qwen2.json")
    returncode, stdout, stderr = run_zrodlo(
        "tokenizer", "import", "--from", "qwen2.json", "--output", "tokenizer",
        "--bos", "<|im_start|>", "--eos", "<|endoftext|>", cwd=tmp_path,
    )  # fmt: skip
    assert (returncode, stderr) == (0, ""), stderr
    assert stdout.startswith(
        "wrote tokenizer: vocab_size 357, each document after BOS <|im_start|> (355) and before "
        "EOS <|endoftext|> (354), digest "
    )
    return tmp_path


def test_a_corpus_of_texts_in_nfc_holds_the_librarys_ids(imported, run_zrodlo, write_documents):
    write_documents(imported / "docs.jsonl", DOCUMENTS)
    returncode, _, stderr = run_zrodlo(
        "corpus", "prepare", "--documents", "docs.jsonl", "--tokenizer", "tokenizer",
        "--output", "corpus", cwd=imported,
    )  # fmt: skip
    assert (returncode, stderr) == (0, ""), stderr
    library = Tokenizer.from_file(str(imported / "qwen2.json"))
    expected = [
        token
        for text in DOCUMENTS.values()
        for token in (355, *library.encode(text, add_special_tokens=False).ids, 354)
    ]
    assert Corpus.open(imported / "corpus").tokens.tolist() == expected


def test_a_document_not_in_nfc_is_refused_naming_it(imported, write_documents, assert_refused):
    write_documents(imported / "docs.jsonl", {**DOCUMENTS, "decomposed": "cafe\u0301 au lait"})
    assert_refused(
        "corpus", "prepare", "--documents", "docs.jsonl", "--tokenizer", "tokenizer",
        "--output", "corpus",
        sentence=f'docs.jsonl line 3 (id "decomposed") has a text {NOT_NFC}',
    )  # fmt: skip


@pytest.fixture
def model(imported, run_zrodlo) -> Path:
    """A tiny model initialised on the imported tokenizer, in imported/model."""
    returncode, _, stderr = run_zrodlo(
        "model", "init", "--tokenizer", "tokenizer", "--output", "model", *TINY_MODEL,
        "--dropout", "0", "--seed", "7", cwd=imported,
    )  # fmt: skip
    assert (returncode, stderr) == (0, ""), stderr
    return imported / "model"


def test_a_prompt_not_in_nfc_is_refused(model, run_zrodlo, assert_refused):
    sample = ("model", "sample", "--model", "model", "--tokens", "3", "--seed", "1")
    returncode, stdout, stderr = run_zrodlo(*sample, "--prompt", "café", cwd=model.parent)
    assert (returncode, stderr) == (0, "") and stdout.startswith("café"), stderr
    assert_refused(*sample, "--prompt", "cafe\u0301", sentence=f"the prompt is {NOT_NFC}")


@pytest.mark.slow  # transformers loading the exported directory
def test_the_export_encodes_texts_in_nfc_as_the_file_does(model, run_zrodlo):
    transformers = pytest.importorskip("transformers")
    returncode, _, stderr = run_zrodlo(
        "model", "export", "--model", "model", "--output", "exported", cwd=model.parent
    )
    assert (returncode, stderr) == (0, ""), stderr
    exported = model.parent / "exported"
    written = json.loads((exported / "tokenizer.json").read_text(encoding="utf-8"))
    assert written["normalizer"] == {"type": "NFC"}
    hf = transformers.AutoTokenizer.from_pretrained(exported, local_files_only=True)
    library = Tokenizer.from_file(str(model.parent / "qwen2.json"))
    for text in [*DOCUMENTS.values(), "Zażółć gęślą jaźń\tdef f(): return 42"]:
        ids = hf(text)["input_ids"]
        assert ids == library.encode(text, add_special_tokens=False).ids
        assert hf.decode(ids) == text

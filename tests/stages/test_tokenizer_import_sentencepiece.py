"""SentencePiece-style tokenizers (Gemma's layout and Llama 2's) by the real commands: imported
with the frame tokenizer_config.json names, a corpus holding the library's ids with its text's own
bytes counted, a document or prompt holding the word mark refused with its sentence, writing
nothing, a sample whose text continues the prompt as the whole sequence decodes, and the export
read by transformers with the same ids."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import TINY_MODEL
from library_tokenizers import gemma_file, llama2_file
from tokenizers import Tokenizer

from zrodlo.data.corpus import Corpus

MARKED = (
    "holding ▁ (U+2581), the word mark the tokenizer writes each space as, so it would decode as "
    "a space; replace it first"
)
DOCUMENTS = {"cafe": "naïve café 東京 🙂", "digits": "It's 2024-05-17.\n\n  done", "space": " x"}
LAYOUTS = {"gemma": (gemma_file, "<bos>", "<eos>"), "llama2": (llama2_file, "<s>", "</s>")}


@pytest.fixture(params=sorted(LAYOUTS))
def imported(request, tmp_path, run_zrodlo) -> Path:
    """tmp_path with the layout's file in source/ and imported as `tokenizer`."""
    write, _, _ = LAYOUTS[request.param]
    (tmp_path / "source").mkdir()
    write(tmp_path / "source" / "tokenizer.json")
    returncode, stdout, stderr = run_zrodlo(
        "tokenizer", "import", "--from", "source/tokenizer.json", "--output", "tokenizer",
        cwd=tmp_path,
    )  # fmt: skip
    assert (returncode, stderr) == (0, ""), stderr
    assert stdout.startswith("wrote tokenizer: vocab_size ")
    return tmp_path


def test_a_corpus_holds_the_librarys_ids_framed(imported, run_zrodlo, write_documents):
    write_documents(imported / "docs.jsonl", DOCUMENTS)
    returncode, _, stderr = run_zrodlo(
        "corpus", "prepare", "--documents", "docs.jsonl", "--tokenizer", "tokenizer",
        "--output", "corpus", cwd=imported,
    )  # fmt: skip
    assert (returncode, stderr) == (0, ""), stderr
    library = Tokenizer.from_file(str(imported / "source" / "tokenizer.json"))
    library.encode_special_tokens = True
    framing = json.loads((imported / "source" / "tokenizer_config.json").read_text())
    bos, eos = (library.token_to_id(framing[role]) for role in ("bos_token", "eos_token"))
    expected = [
        token
        for text in DOCUMENTS.values()
        for token in (bos, *library.encode(text, add_special_tokens=False).ids, eos)
    ]
    assert Corpus.open(imported / "corpus").tokens.tolist() == expected


def test_a_document_holding_the_word_mark_is_refused_naming_it(
    imported, write_documents, assert_refused
):
    write_documents(imported / "docs.jsonl", {**DOCUMENTS, "marked": "a▁b"})
    assert_refused(
        "corpus", "prepare", "--documents", "docs.jsonl", "--tokenizer", "tokenizer",
        "--output", "corpus", sentence=f'docs.jsonl line 4 (id "marked") has a text {MARKED}',
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


def test_a_sample_continues_its_prompt_and_a_marked_prompt_is_refused(
    model, run_zrodlo, assert_refused
):
    sample = ("model", "sample", "--model", "model", "--tokens", "8", "--seed", "1")
    returncode, stdout, stderr = run_zrodlo(*sample, "--prompt", "the", cwd=model.parent)
    assert (returncode, stderr) == (0, ""), stderr
    # The text printed is the prompt and what the whole sequence decodes to after it.
    library = Tokenizer.from_file(str(model.parent / "source" / "tokenizer.json"))
    assert stdout.startswith("the")
    assert library.decode(library.encode(stdout[:-1]).ids) == stdout[:-1]
    assert_refused(*sample, "--prompt", "a▁b", sentence=f"the prompt is {MARKED}")


@pytest.mark.slow  # transformers loading the exported directory
def test_the_export_encodes_as_the_file_does(model, run_zrodlo):
    transformers = pytest.importorskip("transformers")
    returncode, _, stderr = run_zrodlo(
        "model", "export", "--model", "model", "--output", "exported", cwd=model.parent
    )
    assert (returncode, stderr) == (0, ""), stderr
    hf = transformers.AutoTokenizer.from_pretrained(
        model.parent / "exported", local_files_only=True
    )
    library = Tokenizer.from_file(str(model.parent / "source" / "tokenizer.json"))
    for text in [*DOCUMENTS.values(), "Zażółć gęślą jaźń\tdef f(): return 42"]:
        ids = hf(text)["input_ids"]
        assert ids == library.encode(text, add_special_tokens=False).ids
        assert hf.decode(ids) == text

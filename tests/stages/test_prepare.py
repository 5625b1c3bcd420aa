"""`zrodlo corpus prepare` through the real command, and the split -> fit -> prepare chain."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.ipc as ipc
import pytest

from zrodlo.data.tokenizer.char import CharTokenizer


@pytest.fixture
def fitted(tmp_path: Path, write_documents) -> Path:
    """A documents file and a tokenizer directory fitted on it (written with the library)."""
    documents = write_documents(tmp_path / "documents.jsonl", {"one": "abc", "two": "ba"})
    tokenizer = tmp_path / "tokenizer"
    tokenizer.mkdir()
    CharTokenizer.fit(["abc"]).save(tokenizer)
    return documents


def prepare_args(root: Path, output: Path | None = None, tokenizer: Path | None = None):
    return [
        "corpus",
        "prepare",
        "--documents",
        root / "documents.jsonl",
        "--tokenizer",
        tokenizer or root / "tokenizer",
        "--output",
        output or root / "corpus",
    ]


def documents_of(corpus: Path) -> dict[str, list[int]]:
    """Each document's tokens, read from the files themselves: the list, then the uint16 tokens."""
    listing = ipc.open_file(corpus / "documents.arrow").read_all()
    tokens = np.frombuffer((corpus / "tokens.bin").read_bytes(), dtype="<u2").tolist()
    ends = np.cumsum(listing.column("tokens").to_numpy()).tolist()
    starts = [0, *ends[:-1]]
    ids = listing.column("id").to_pylist()
    return {i: tokens[a:b] for i, a, b in zip(ids, starts, ends, strict=True)}


def test_prepare_writes_tokens_and_a_manifest(tmp_path, fitted, run_zrodlo):
    returncode, stdout, stderr = run_zrodlo(*prepare_args(tmp_path), cwd=tmp_path)
    assert (returncode, stderr) == (0, "")
    corpus = tmp_path / "corpus"
    assert sorted(p.name for p in corpus.iterdir()) == [
        "corpus.json",
        "documents.arrow",
        "tokens.bin",
    ]
    assert documents_of(corpus) == {"one": [1, 3, 4, 5, 2], "two": [1, 4, 3, 2]}
    manifest = json.loads((corpus / "corpus.json").read_text())
    assert (manifest["documents"], manifest["tokens"], manifest["targets"]) == (2, 9, 7)
    assert stdout.startswith(f"wrote {corpus}: 2 documents, 9 tokens, 7 targets, unknown rate ")
    assert stdout.endswith(f"digest {manifest['corpus_digest']}\n")


def test_prepare_refuses_an_existing_output(tmp_path, fitted, assert_refused):
    (tmp_path / "corpus").mkdir()
    sentence = f"{tmp_path / 'corpus'} already exists; Zrodlo writes a new directory and overwrites nothing"
    assert_refused(*prepare_args(tmp_path), sentence=sentence)


def test_prepare_refuses_a_missing_tokenizer(tmp_path, fitted, assert_refused):
    missing = tmp_path / "no-tokenizer"
    sentence = f"{missing} holds no tokenizer.json; a tokenizer is written by zrodlo tokenizer fit"
    assert_refused(*prepare_args(tmp_path, tokenizer=missing), sentence=sentence)


def test_prepare_refuses_a_tokenizer_edited_after_it_was_fitted(tmp_path, fitted, assert_refused):
    file = tmp_path / "tokenizer" / "tokenizer.json"
    written = json.loads(file.read_text())
    written["characters"].append("z")
    file.write_text(json.dumps(written))
    edited = CharTokenizer(tuple(ord(c) for c in "abcz")).digest
    sentence = (
        f"{file} records digest {written['digest']}, and its content has digest {edited}; "
        "the file was changed after it was fitted"
    )
    assert_refused(*prepare_args(tmp_path), sentence=sentence)


def test_prepare_refuses_a_tokenizer_file_that_is_not_json(tmp_path, fitted, assert_refused):
    file = tmp_path / "tokenizer" / "tokenizer.json"
    file.write_text("{")
    sentence = (
        f"{file} does not load as a tokenizer: Expecting property name enclosed in double quotes: "
        "line 1 column 2 (char 1)"
    )
    assert_refused(*prepare_args(tmp_path), sentence=sentence)


def test_prepare_refuses_a_bad_documents_line(tmp_path, fitted, write_documents, assert_refused):
    documents = write_documents(
        tmp_path / "documents.jsonl", [{"id": "one", "text": "abc"}, {"id": "two", "text": 5}]
    )
    sentence = (
        f'{documents} line 2 (id "two") has text 5, which is not a string; '
        "each document needs a text that is a string"
    )
    assert_refused(*prepare_args(tmp_path), sentence=sentence)


def test_a_documents_file_without_documents_is_refused(tmp_path, fitted, assert_refused):
    (tmp_path / "documents.jsonl").write_bytes(b"")
    assert_refused(
        *prepare_args(tmp_path),
        sentence=f"{tmp_path / 'documents.jsonl'} holds no documents; a corpus is prepared from "
        "one document or more (--allow-empty writes an empty one, as the pipeline does for an "
        "empty test pool)",
    )


def test_allow_empty_prepares_an_empty_corpus(tmp_path, fitted, run_zrodlo):
    """An empty test pool (splits.test 0) is prepared as a corpus of no documents, which
    model evaluate leaves unscored and no run can train on."""
    (tmp_path / "documents.jsonl").write_bytes(b"")
    returncode, _, stderr = run_zrodlo(*prepare_args(tmp_path), "--allow-empty", cwd=tmp_path)
    assert (returncode, stderr) == (0, "")
    manifest = json.loads((tmp_path / "corpus" / "corpus.json").read_text())
    assert (manifest["documents"], manifest["tokens"], manifest["unknown_rate"]) == (0, 0, 0.0)
    assert (tmp_path / "corpus" / "tokens.bin").read_bytes() == b""


def test_a_character_only_validation_has_is_unknown_in_the_validation_corpus(
    tmp_path, write_documents, run_zrodlo
):
    documents = {"t1": "abab", "t2": "ba", "v1": "aqb", "x1": "b"}
    write_documents(tmp_path / "documents.jsonl", documents)
    splits = {"train": ["t1", "t2"], "validation": ["v1"], "test": ["x1"]}
    (tmp_path / "splits.json").write_text(json.dumps(splits))
    steps = [
        ("documents", "split", "--documents", "documents.jsonl", "--splits", "splits.json"),
        ("tokenizer", "fit", "--documents", "pools/train.jsonl"),
        ("corpus", "prepare", "--documents", "pools/validation.jsonl", "--tokenizer", "tokenizer"),
    ]
    for step, output in zip(steps, ["pools", "tokenizer", "validation"], strict=True):
        returncode, _, stderr = run_zrodlo(*step, "--output", output, cwd=tmp_path)
        assert (returncode, stderr) == (0, "")
    fitted = json.loads((tmp_path / "tokenizer" / "tokenizer.json").read_text())
    assert fitted["characters"] == ["a", "b"]
    assert list(documents_of(tmp_path / "validation").values()) == [[1, 3, 0, 4, 2]]
    manifest = json.loads((tmp_path / "validation" / "corpus.json").read_text())
    assert manifest["unknown_tokens"] == 1
    assert manifest["unknown_rate"] == pytest.approx(1 / 3)
    assert manifest["tokenizer_digest"] == fitted["digest"]


def test_every_option_of_corpus_prepare_has_help(run_zrodlo, option_descriptions, tmp_path):
    returncode, stdout, _ = run_zrodlo("corpus", "prepare", "--help", cwd=tmp_path)
    assert returncode == 0
    options = option_descriptions(stdout)
    assert set(options) == {
        "--documents", "--tokenizer", "--output", "--enable-thinking", "--allow-empty", "--help",
    }  # fmt: skip
    assert all(options.values()), options


def test_prepare_refuses_an_id_that_is_not_encodable_as_utf8(
    tmp_path, fitted, run_zrodlo, snapshot
):
    (tmp_path / "documents.jsonl").write_text('{"id": "\\ud800", "text": "a"}\n')
    before = snapshot(tmp_path)
    returncode, _, stderr = run_zrodlo(*prepare_args(tmp_path), cwd=tmp_path)
    assert returncode == 1
    assert stderr == (
        f"Error: {tmp_path / 'documents.jsonl'} line 1 has an id with a lone surrogate "
        '("\\ud800"); an id must be Unicode text that UTF-8 can hold\n'
    )
    assert snapshot(tmp_path) == before

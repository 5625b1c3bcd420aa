"""`zrodlo tokenizer fit` through the real command."""

from __future__ import annotations

import json

from zrodlo.data.tokenizer import CharTokenizer


def fit_args(root, output=None, documents=None):
    return [
        "tokenizer",
        "fit",
        "--documents",
        documents or root / "train.jsonl",
        "--output",
        output or root / "tokenizer",
    ]


def test_fit_writes_the_characters_of_the_documents_in_code_point_order(
    tmp_path, write_documents, run_zrodlo
):
    write_documents(tmp_path / "train.jsonl", {"x": "bca", "y": "ab😀 é"})
    returncode, stdout, stderr = run_zrodlo(*fit_args(tmp_path), cwd=tmp_path)
    assert (returncode, stderr) == (0, "")
    written = json.loads((tmp_path / "tokenizer" / "tokenizer.json").read_text(encoding="utf-8"))
    assert written["kind"] == "char"
    assert written["special"] == {"UNK": 0, "BOS": 1, "EOS": 2}
    assert written["characters"] == [" ", "a", "b", "c", "é", "😀"]
    assert written["vocab_size"] == 9
    assert written["digest"] == CharTokenizer.load(tmp_path / "tokenizer").digest
    assert stdout == f"wrote {tmp_path / 'tokenizer'}: vocab_size 9, digest {written['digest']}\n"
    assert sorted(p.name for p in (tmp_path / "tokenizer").iterdir()) == ["tokenizer.json"]


def test_fit_refuses_an_existing_output(tmp_path, write_documents, assert_refused):
    write_documents(tmp_path / "train.jsonl", {"x": "abc"})
    (tmp_path / "tokenizer").mkdir()
    output = tmp_path / "tokenizer"
    sentence = f"{output} already exists; Zrodlo writes a new directory and overwrites nothing"
    assert_refused(*fit_args(tmp_path), sentence=sentence)


def test_fit_refuses_a_bad_documents_line(tmp_path, write_documents, assert_refused):
    documents = write_documents(tmp_path / "train.jsonl", [{"id": "x", "text": "abc"}, "{oops"])
    sentence = (
        f"{documents} line 2 is not valid JSON (Expecting property name enclosed in double "
        "quotes); each line holds one JSON object with an id and a text"
    )
    assert_refused(*fit_args(tmp_path), sentence=sentence)


def test_fit_refuses_a_documents_path_that_is_a_directory(tmp_path, assert_refused):
    (tmp_path / "train.jsonl").mkdir()
    sentence = f"{tmp_path / 'train.jsonl'} is a directory; a documents file is expected there"
    assert_refused(*fit_args(tmp_path), sentence=sentence)


def test_fit_refuses_a_documents_file_without_documents(tmp_path, run_zrodlo, snapshot):
    (tmp_path / "train.jsonl").write_bytes(b"")
    before = snapshot(tmp_path)
    returncode, _, stderr = run_zrodlo(*fit_args(tmp_path), cwd=tmp_path)
    assert returncode == 1
    assert stderr == (
        f"Error: {tmp_path / 'train.jsonl'} holds no documents; a tokenizer is fitted on one "
        "document or more\n"
    )
    assert snapshot(tmp_path) == before


def test_every_option_of_tokenizer_fit_has_help(run_zrodlo, option_descriptions, tmp_path):
    returncode, stdout, _ = run_zrodlo("tokenizer", "fit", "--help", cwd=tmp_path)
    assert returncode == 0
    options = option_descriptions(stdout)
    assert set(options) == {"--documents", "--output", "--help"}
    assert all(options.values()), options

"""The documents file: streaming validation, line numbers, raw lines, batches and the written form."""

from __future__ import annotations

import json

import pytest

from zrodlo.data.documents import Document, batched, document_line, read_documents
from zrodlo.storage.refusal import Refusal


def test_read_documents_yields_ids_texts_line_numbers_and_raw_lines(tmp_path):
    path = tmp_path / "documents.jsonl"
    path.write_bytes(b'{"id": "a", "text": "x\\ny", "title": "T"}\r\n{"id":"b","text":"\xc5\xbc"}')
    documents = list(read_documents(path))
    assert documents == [
        Document("a", "x\ny", 1, b'{"id": "a", "text": "x\\ny", "title": "T"}'),
        Document("b", "ż", 2, b'{"id":"b","text":"\xc5\xbc"}'),
    ]


def test_read_documents_refuses_a_line_that_is_not_utf8(tmp_path):
    path = tmp_path / "documents.jsonl"
    path.write_bytes(b'{"id": "a", "text": "caf\xe9"}\n')
    with pytest.raises(Refusal) as refused:
        list(read_documents(path))
    assert refused.value.sentence == (
        f"{path} line 1 is not UTF-8 text; each line holds one JSON object with an id and a text"
    )


def test_read_documents_refuses_a_duplicate_only_when_it_is_reached(tmp_path, write_documents):
    path = write_documents(tmp_path / "documents.jsonl", [{"id": "a", "text": "1"}] * 2)
    stream = read_documents(path)
    assert next(stream).id == "a"
    with pytest.raises(Refusal) as refused:
        next(stream)
    assert refused.value.sentence == (
        f'{path} lines 1 and 2 both have id "a"; every document needs an id of its own'
    )


def test_read_documents_refuses_a_missing_file(tmp_path):
    with pytest.raises(Refusal) as refused:
        list(read_documents(tmp_path / "none.jsonl"))
    assert refused.value.sentence == (
        f"{tmp_path / 'none.jsonl'} cannot be read: No such file or directory"
    )


def test_ids_are_shown_as_json_in_sentences(tmp_path, write_documents):
    path = write_documents(tmp_path / "documents.jsonl", [{"id": 'q"ż', "text": ""}])
    with pytest.raises(Refusal) as refused:
        list(read_documents(path))
    assert refused.value.sentence == (
        f'{path} line 1 (id "q\\"ż") has an empty text; a document needs one character or more'
    )


def test_batched_closes_a_batch_once_it_reaches_the_character_budget():
    documents = [Document(str(i), "x" * n, i, b"") for i, n in enumerate([3, 4, 1, 9, 2])]
    sizes = [[len(d.text) for d in batch] for batch in batched(documents, 5)]
    assert sizes == [[3, 4], [1, 9], [2]]
    assert [len(b) for b in batched(documents, 1)] == [1] * 5
    assert list(batched([], 5)) == []


def test_document_line_is_utf8_json_that_reads_back(tmp_path):
    line = document_line("id\n1", 'text "😀" ż')
    assert b"\n" not in line
    assert json.loads(line) == {"id": "id\n1", "text": 'text "😀" ż'}
    assert "😀".encode() in line  # written as UTF-8, not as \\u escapes
    (tmp_path / "documents.jsonl").write_bytes(line + b"\n")
    assert [d.text for d in read_documents(tmp_path / "documents.jsonl")] == ['text "😀" ż']

"""Document sources: folders, Parquet and CSV tables, and the checked writing of documents."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from zrodlo.data.documents import read_documents
from zrodlo.data.sources import folder_documents, source_documents, write_documents
from zrodlo.data.tables import table_documents
from zrodlo.storage.refusal import Refusal


def test_folder_documents_are_named_by_posix_relative_path_and_skip_hidden_names(tmp_path):
    (tmp_path / "x" / ".y").mkdir(parents=True)
    (tmp_path / "x" / "a.txt").write_text("A")
    (tmp_path / "x" / ".y" / "b.txt").write_text("B")
    (tmp_path / "c").write_text("C")
    (tmp_path / ".d").write_text("D")
    assert sorted(folder_documents(tmp_path)) == [("c", "C"), ("x/a.txt", "A")]


def test_folder_documents_keep_bytes_exactly(tmp_path):
    (tmp_path / "crlf.txt").write_bytes("one\r\ntwo\u2028".encode())
    assert list(folder_documents(tmp_path)) == [("crlf.txt", "one\r\ntwo\u2028")]


def test_a_parquet_table_is_read_across_row_groups(tmp_path):
    table = tmp_path / "t.parquet"
    rows = pa.table({"id": [f"r{i}" for i in range(10)], "text": [str(i) for i in range(10)]})
    pq.write_table(rows, table, row_group_size=3)
    assert list(table_documents(table, "id", "text")) == [(f"r{i}", str(i)) for i in range(10)]


def test_a_parquet_id_of_another_type_is_refused(tmp_path):
    table = tmp_path / "t.parquet"
    pq.write_table(pa.table({"id": [1.5], "text": ["x"]}), table)
    with pytest.raises(Refusal) as refused:
        list(table_documents(table, "id", "text"))
    assert (
        refused.value.sentence
        == f"{table} has column id of type double; ids are strings or integers"
    )


def test_a_parquet_row_without_a_text_is_refused(tmp_path):
    table = tmp_path / "t.parquet"
    pq.write_table(pa.table({"id": ["a", "b"], "text": ["x", None]}), table)
    with pytest.raises(Refusal) as refused:
        list(table_documents(table, "id", "text"))
    assert refused.value.sentence == f"{table} row 2 has no text; every row needs an id and a text"


def test_csv_ids_and_texts_are_read_as_strings(tmp_path):
    table = tmp_path / "t.csv"
    table.write_text('id,text\n007,"a, b"\n8,true\n')
    assert list(table_documents(table, "id", "text")) == [("007", "a, b"), ("8", "true")]


def test_a_file_that_does_not_parse_as_its_table_kind_is_refused(tmp_path):
    table = tmp_path / "t.parquet"
    table.write_text("not parquet")
    with pytest.raises(Refusal) as refused:
        list(table_documents(table, "id", "text"))
    assert refused.value.sentence.startswith(f"{table} does not read as a Parquet table: ")


def test_a_source_of_another_kind_is_refused(tmp_path):
    source = tmp_path / "t.json"
    source.write_text("{}")
    with pytest.raises(Refusal) as refused:
        source_documents(source, "id", "text")
    assert refused.value.sentence == (
        f"{source} is neither a folder nor a .txt, .jsonl, .parquet or .csv file; import reads "
        "those five forms"
    )


def test_write_documents_writes_a_file_read_documents_accepts(tmp_path):
    pairs = [("b", "two"), ("a", "one 😀")]
    output = tmp_path / "documents.jsonl"
    assert write_documents(pairs, output, "src") == 2
    assert [(d.id, d.text) for d in read_documents(output)] == pairs


@pytest.mark.parametrize(
    ("pairs", "sentence"),
    [
        ([("a", "x"), ("", "y")], "src document 2 has an empty id; ids must not be empty"),
        (
            [("a", "x"), ("b", "y"), ("a", "z")],
            'src documents 1 and 3 both have id "a"; every document needs an id of its own',
        ),
        ([("a", "")], 'src document "a" has an empty text; a document needs one character or more'),
        ([], "src holds no documents; import needs one document or more"),
    ],
)
def test_write_documents_refuses_bad_pairs(pairs, sentence, tmp_path):
    with pytest.raises(Refusal) as refused:
        write_documents(pairs, tmp_path / "documents.jsonl", "src")
    assert refused.value.sentence == sentence


def test_csv_tables_are_streamed_in_batches(tmp_path):
    table = tmp_path / "t.csv"
    count = 50_000
    pacsv.write_csv(pa.table({"id": list(range(count)), "text": ["t"] * count}), table)
    ids = [doc_id for doc_id, _ in table_documents(table, "id", "text")]
    assert ids == [str(i) for i in range(count)]

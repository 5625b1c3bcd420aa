"""`zrodlo documents import` (folders, text files cut into documents, Parquet, CSV) and the command
line's help."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from zrodlo.data.documents import read_documents

# In `make test`, not `make check`: tables read in blocks of every size.
pytestmark = pytest.mark.slow


def import_args(source: Path, output: Path, *extra: object) -> list[object]:
    return ["documents", "import", "--source", source, "--output", output, *extra]


def read_back(path: Path) -> dict[str, str]:
    return {document.id: document.text for document in read_documents(path)}


def test_a_folder_becomes_documents_named_by_relative_path(tmp_path, run_zrodlo):
    folder = tmp_path / "texts"
    (folder / "sub" / "deeper").mkdir(parents=True)
    (folder / ".git").mkdir()
    (folder / "a.txt").write_text("first\nline two\n", encoding="utf-8")
    (folder / "sub" / "b.md").write_text("zażółć 😀", encoding="utf-8")
    (folder / "sub" / "deeper" / "c").write_text("third", encoding="utf-8")
    (folder / ".hidden.txt").write_text("skip me", encoding="utf-8")
    (folder / "sub" / ".cache").write_text("skip me too", encoding="utf-8")
    (folder / ".git" / "config").write_text("skip", encoding="utf-8")
    output = tmp_path / "documents.jsonl"
    returncode, stdout, stderr = run_zrodlo(*import_args(folder, output), cwd=tmp_path)
    assert (returncode, stderr) == (0, "")
    assert read_back(output) == {
        "a.txt": "first\nline two\n",
        "sub/b.md": "zażółć 😀",
        "sub/deeper/c": "third",
    }
    assert stdout == f"wrote {output}: 3 documents from {folder}\n"


def test_one_text_file_is_cut_into_documents_at_its_blank_lines(tmp_path, run_zrodlo):
    source = tmp_path / "input.txt"
    speeches = ["First Citizen:\nSpeak.", "All:\nSpeak, speak.", "First Citizen:\nYou are."]
    source.write_text("\n\n".join(speeches) + "\n", encoding="utf-8")
    output = tmp_path / "documents.jsonl"
    args = import_args(source, output, "--cut-at", r"\n\s*\n")
    returncode, stdout, stderr = run_zrodlo(*args, cwd=tmp_path)
    assert (returncode, stderr) == (0, "")
    assert stdout == f"wrote {output}: 3 documents from {source}, cut from 1 text\n"
    assert read_back(output) == {
        "input.txt#1": speeches[0], "input.txt#2": speeches[1], "input.txt#3": speeches[2] + "\n",
    }  # fmt: skip


def test_a_text_file_alone_is_one_document_named_by_the_file(tmp_path, run_zrodlo):
    source = tmp_path / "input.txt"
    source.write_text("one\n\ntwo\n", encoding="utf-8")
    output = tmp_path / "documents.jsonl"
    returncode, _, stderr = run_zrodlo(*import_args(source, output), cwd=tmp_path)
    assert (returncode, stderr) == (0, "")
    assert read_back(output) == {"input.txt": "one\n\ntwo\n"}


def test_a_cut_that_cannot_be_made_is_refused_before_anything_is_read(tmp_path, assert_refused):
    source = tmp_path / "input.txt"
    source.write_text("text", encoding="utf-8")
    sentence = "--max-characters is 0; it must be a whole number of 1 or more"
    args = import_args(source, tmp_path / "documents.jsonl", "--max-characters", "0")
    assert_refused(*args, sentence=sentence)


def test_a_parquet_table_with_integer_ids_becomes_documents(tmp_path, run_zrodlo):
    table = tmp_path / "docs.parquet"
    pq.write_table(
        pa.table({"id": pa.array([7, 3], pa.int64()), "text": ["seven", "three"]}), table
    )
    output = tmp_path / "documents.jsonl"
    returncode, _, stderr = run_zrodlo(*import_args(table, output), cwd=tmp_path)
    assert (returncode, stderr) == (0, "")
    assert read_back(output) == {"7": "seven", "3": "three"}


def test_a_parquet_table_with_named_columns_becomes_documents(tmp_path, run_zrodlo):
    table = tmp_path / "docs.parquet"
    pq.write_table(
        pa.table({"name": ["x", "y"], "body": ["ex", "why"], "title": ["T", "U"]}),
        table,
        row_group_size=1,
    )
    output = tmp_path / "documents.jsonl"
    args = import_args(table, output, "--id-column", "name", "--text-column", "body")
    returncode, _, stderr = run_zrodlo(*args, cwd=tmp_path)
    assert (returncode, stderr) == (0, "")
    assert read_back(output) == {"x": "ex", "y": "why"}


def test_a_csv_table_becomes_documents(tmp_path, run_zrodlo):
    table = tmp_path / "docs.csv"
    rows = {"key": pa.array([10, 2], pa.int64()), "content": ['say "hi", then go', "two\nlines"]}
    pacsv.write_csv(pa.table(rows), table)
    output = tmp_path / "documents.jsonl"
    args = import_args(table, output, "--id-column", "key", "--text-column", "content")
    returncode, _, stderr = run_zrodlo(*args, cwd=tmp_path)
    assert (returncode, stderr) == (0, "")
    assert read_back(output) == {"10": 'say "hi", then go', "2": "two\nlines"}


@pytest.mark.parametrize("suffix", ["parquet", "csv"])
def test_import_refuses_a_table_without_the_text_column(suffix, tmp_path, assert_refused):
    table = tmp_path / f"docs.{suffix}"
    data = pa.table({"id": ["x"], "body": ["ex"]})
    if suffix == "parquet":
        pq.write_table(data, table)
    else:
        pacsv.write_csv(data, table)
    sentence = (
        f"{table} has no column text; a table of documents needs the columns id and text "
        "(see --id-column and --text-column)"
    )
    assert_refused(*import_args(table, tmp_path / "documents.jsonl"), sentence=sentence)


def test_import_refuses_a_file_that_is_not_utf8(tmp_path, assert_refused):
    folder = tmp_path / "texts"
    folder.mkdir()
    (folder / "good.txt").write_text("fine", encoding="utf-8")
    (folder / "latin.txt").write_bytes("ok then caf\u00e9".encode("latin-1"))
    sentence = (
        f"{folder / 'latin.txt'} is not UTF-8 text (byte 11); every file of a folder of documents "
        "is read as UTF-8"
    )
    assert_refused(*import_args(folder, tmp_path / "documents.jsonl"), sentence=sentence)


def test_import_refuses_a_duplicate_id(tmp_path, assert_refused):
    table = tmp_path / "docs.parquet"
    pq.write_table(pa.table({"id": [1, 2, 1], "text": ["a", "b", "c"]}), table)
    sentence = f'{table} documents 1 and 3 both have id "1"; every document needs an id of its own'
    assert_refused(*import_args(table, tmp_path / "documents.jsonl"), sentence=sentence)


def test_import_refuses_an_empty_text(tmp_path, assert_refused):
    folder = tmp_path / "texts"
    folder.mkdir()
    (folder / "empty.txt").write_bytes(b"")
    sentence = (
        f'{folder} document "empty.txt" has an empty text; a document needs one character or more'
    )
    assert_refused(*import_args(folder, tmp_path / "documents.jsonl"), sentence=sentence)


def test_import_refuses_a_parquet_text_that_is_not_utf8(tmp_path, assert_refused):
    # Parquet stores strings as bytes and a writer need not check them: build the column from raw
    # bytes, as such a writer would, with an invalid byte at offset 3 of row 2.
    data = b"goodbad\xffly"
    texts = pa.Array.from_buffers(
        pa.string(), 2, [None, pa.py_buffer(pa.array([0, 4, 10], pa.int32()).buffers()[1]),
                         pa.py_buffer(data)]
    )  # fmt: skip
    table = tmp_path / "docs.parquet"
    pq.write_table(pa.table({"id": ["a", "b"], "text": texts}), table)
    sentence = (
        f"{table} row 2 has a text that is not UTF-8 (byte 3); a table's strings are read as UTF-8"
    )
    assert_refused(*import_args(table, tmp_path / "documents.jsonl"), sentence=sentence)


def test_a_csv_cell_larger_than_a_read_block_is_imported(tmp_path, run_zrodlo):
    # 50 MB in one quoted cell, well past pyarrow's 1 MiB default block, after 2 MB of small rows
    # (so some batches are read before the large row is met) and before one more.
    big = 'word, and "quoted"\n' * (50_000_000 // 20)
    small = {f"s{i}": f"small text {i}" for i in range(100_000)}
    rows = {**small, "big": big, "z": "last"}
    table = tmp_path / "docs.csv"
    pacsv.write_csv(pa.table({"id": list(rows), "text": list(rows.values())}), table)
    output = tmp_path / "documents.jsonl"
    returncode, stdout, stderr = run_zrodlo(*import_args(table, output), cwd=tmp_path)
    assert (returncode, stderr) == (0, "")
    assert read_back(output) == rows
    assert stdout == f"wrote {output}: {len(rows)} documents from {table}\n"


def test_import_refuses_a_csv_whose_text_column_is_named_twice(tmp_path, assert_refused):
    table = tmp_path / "docs.csv"
    table.write_text("id,text,text\na,first,second\n", encoding="utf-8")
    sentence = (
        f"{table} has 2 columns named text; a document takes its text from one column, so rename "
        "the others or choose another with --text-column"
    )
    assert_refused(*import_args(table, tmp_path / "documents.jsonl"), sentence=sentence)


def test_import_refuses_a_parquet_whose_id_column_is_named_twice(tmp_path, assert_refused):
    table = tmp_path / "docs.parquet"
    pq.write_table(pa.table([["a"], ["b"], ["ex"]], names=["id", "id", "text"]), table)
    sentence = (
        f"{table} has 2 columns named id; a document takes its id from one column, so rename "
        "the others or choose another with --id-column"
    )
    assert_refused(*import_args(table, tmp_path / "documents.jsonl"), sentence=sentence)


def test_import_refuses_an_existing_output(tmp_path, assert_refused):
    folder = tmp_path / "texts"
    folder.mkdir()
    (folder / "a.txt").write_text("a")
    output = tmp_path / "documents.jsonl"
    output.write_text("mine\n")
    sentence = f"{output} already exists; Zrodlo writes a new file and overwrites nothing"
    assert_refused(*import_args(folder, output), sentence=sentence)


def test_import_refuses_a_source_that_does_not_exist(tmp_path, assert_refused):
    source = tmp_path / "nowhere"
    sentence = (
        f"{source} does not exist; import reads a folder, a .txt, a .jsonl, a .parquet or a "
        ".csv file"
    )
    assert_refused(*import_args(source, tmp_path / "documents.jsonl"), sentence=sentence)


def test_zrodlo_help_lists_the_command_groups(run_zrodlo, tmp_path):
    returncode, stdout, _ = run_zrodlo("--help", cwd=tmp_path)
    assert returncode == 0
    commands = {line.strip("│ ").split(" ")[0] for line in stdout.splitlines() if "│" in line}
    assert {"documents", "tokenizer", "corpus"} <= commands


def test_documents_help_lists_its_commands(run_zrodlo, tmp_path):
    returncode, stdout, _ = run_zrodlo("documents", "--help", cwd=tmp_path)
    assert returncode == 0
    commands = {line.strip("│ ").split(" ")[0] for line in stdout.splitlines() if "│" in line}
    assert {"torch-docs", "import", "assign", "split"} <= commands


@pytest.mark.parametrize(
    ("command", "flags"),
    [
        (
            "import",
            {
                "--source",
                "--output",
                "--id-column",
                "--text-column",
                "--include",
                "--exclude",
                "--skip-empty",
                "--skip-undecodable",
                "--skip-invalid",
                "--skipped",
                "--cut-at",
                "--max-characters",
                "--help",
            },
        ),
        ("torch-docs", {"--output", "--help"}),
    ],
)
def test_every_option_of_the_import_commands_has_help(
    command, flags, run_zrodlo, option_descriptions, tmp_path
):
    returncode, stdout, _ = run_zrodlo("documents", command, "--help", cwd=tmp_path)
    assert returncode == 0
    options = option_descriptions(stdout)
    assert set(options) == flags
    assert all(options.values()), options


def test_import_refuses_a_file_name_that_is_not_utf8(tmp_path, run_zrodlo, snapshot):
    folder = tmp_path / "texts"
    folder.mkdir()
    with open(bytes(folder) + b"/caf\xe9.txt", "w", encoding="utf-8") as handle:
        handle.write("text")
    before = snapshot(tmp_path)
    returncode, _, stderr = run_zrodlo(*import_args(folder, tmp_path / "out.jsonl"), cwd=tmp_path)
    assert returncode == 1
    assert stderr == (
        f"Error: {folder} holds a file whose name is not UTF-8 (caf?.txt); a file's relative "
        "path becomes its id, so rename it\n"
    )
    assert snapshot(tmp_path) == before


@pytest.fixture
def source_tree(tmp_path: Path) -> Path:
    """A folder as a user has one: code in folders, notes, an empty file and one in Latin-1."""
    folder = tmp_path / "project"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.py").write_text("x = 1\n", encoding="utf-8")
    (folder / "sub" / "c.py").write_text("y = 2\n", encoding="utf-8")
    (folder / "notes.txt").write_text("hello", encoding="utf-8")
    (folder / "empty.py").write_bytes(b"")
    (folder / "bad.py").write_bytes("caf\u00e9 = 3".encode("latin-1"))
    return folder


def test_patterns_choose_files_and_skips_are_counted_and_listed(tmp_path, source_tree, run_zrodlo):
    output = tmp_path / "documents.jsonl"
    args = import_args(
        source_tree, output, "--include", "*.py", "--exclude", "sub/*", "--skip-empty",
        "--skip-undecodable",
    )  # fmt: skip
    returncode, stdout, stderr = run_zrodlo(*args, cwd=tmp_path)
    assert (returncode, stderr) == (0, "")
    assert read_back(output) == {"a.py": "x = 1\n"}
    listed = tmp_path / "documents.jsonl.skipped.jsonl"
    assert stdout == (
        f"wrote {output}: 1 documents from {source_tree}; 2 left out by --include and --exclude\n"
        f"skipped 2 (1 empty, 1 not UTF-8), listed in {listed}\n"
    )
    assert listed.read_text() == (
        '{"id": "bad.py", "reason": "not UTF-8"}\n{"id": "empty.py", "reason": "empty"}\n'
    )


def test_patterns_alone_still_refuse_what_is_not_text(tmp_path, source_tree, assert_refused):
    args = import_args(source_tree, tmp_path / "documents.jsonl", "--include", "*.py")
    sentence = (
        f"{source_tree / 'bad.py'} is not UTF-8 text (byte 3); every file of a folder of "
        "documents is read as UTF-8"
    )
    assert_refused(*args, sentence=sentence)


def test_a_folder_skipping_nothing_writes_no_list(tmp_path, source_tree, run_zrodlo):
    output = tmp_path / "documents.jsonl"
    args = import_args(source_tree, output, "--include", "sub/*", "--skip-empty")
    returncode, stdout, _ = run_zrodlo(*args, cwd=tmp_path)
    assert returncode == 0
    assert read_back(output) == {"sub/c.py": "y = 2\n"}
    assert (
        stdout
        == f"wrote {output}: 1 documents from {source_tree}; 4 left out by --include and --exclude\n"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["documents.jsonl", "project"]


def test_a_list_of_skipped_documents_that_exists_is_refused_first(
    tmp_path, source_tree, assert_refused
):
    listed = tmp_path / "documents.jsonl.skipped.jsonl"
    listed.write_text("mine\n")
    args = import_args(source_tree, tmp_path / "documents.jsonl", "--skip-empty")
    sentence = f"{listed} already exists; Zrodlo writes a new file and overwrites nothing"
    assert_refused(*args, sentence=sentence)


def test_a_table_skips_empty_texts_and_takes_ids_by_pattern(tmp_path, run_zrodlo):
    table = tmp_path / "docs.csv"
    table.write_text('id,text\nkeep-1,one\nkeep-2,""\ndrop-3,three\n', encoding="utf-8")
    output = tmp_path / "documents.jsonl"
    args = import_args(table, output, "--include", "keep-*", "--skip-empty")
    returncode, stdout, stderr = run_zrodlo(*args, cwd=tmp_path)
    assert (returncode, stderr) == (0, "")
    assert read_back(output) == {"keep-1": "one"}
    assert stdout.splitlines()[1] == (
        f"skipped 1 (1 empty), listed in {tmp_path / 'documents.jsonl.skipped.jsonl'}"
    )


def test_a_documents_file_imports_to_the_same_bytes_and_drops_other_fields(tmp_path, run_zrodlo):
    """A .jsonl source is a documents file: ids, texts and order kept, other fields dropped, so a
    file Zrodlo wrote comes back byte for byte (the pipeline imports the default documents so)."""
    source = tmp_path / "mine.jsonl"
    lines = [
        {"id": "b", "text": "zażółć\n😀", "lang": "pl"},
        {"id": "a", "text": "tea"},
    ]
    source.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    output = tmp_path / "documents.jsonl"
    returncode, _, stderr = run_zrodlo(*import_args(source, output), cwd=tmp_path)
    assert (returncode, stderr) == (0, "")
    assert output.read_bytes() == (
        '{"id": "b", "text": "zażółć\\n😀"}\n{"id": "a", "text": "tea"}\n'.encode()
    )
    again = tmp_path / "again.jsonl"
    assert run_zrodlo(*import_args(output, again), cwd=tmp_path)[0] == 0
    assert again.read_bytes() == output.read_bytes()


def test_a_documents_file_skips_empty_texts_and_takes_ids_by_pattern(tmp_path, run_zrodlo):
    source = tmp_path / "mine.jsonl"
    lines = [
        {"id": "keep-1", "text": "one"},
        {"id": "keep-2", "text": ""},
        {"id": "x", "text": "3"},
    ]
    source.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    output = tmp_path / "documents.jsonl"
    args = import_args(source, output, "--include", "keep-*", "--skip-empty")
    returncode, stdout, stderr = run_zrodlo(*args, cwd=tmp_path)
    assert (returncode, stderr) == (0, "")
    assert read_back(output) == {"keep-1": "one"}
    assert stdout.splitlines() == [
        f"wrote {output}: 1 documents from {source}; 1 left out by --include and --exclude",
        f"skipped 1 (1 empty), listed in {tmp_path / 'documents.jsonl.skipped.jsonl'}",
    ]


def test_a_documents_file_with_an_empty_text_is_refused_without_skip_empty(
    tmp_path, assert_refused
):
    source = tmp_path / "mine.jsonl"
    source.write_text('{"id": "a", "text": ""}\n', encoding="utf-8")
    sentence = f'{source} line 1 (id "a") has an empty text; a document needs one character or more'
    assert_refused(*import_args(source, tmp_path / "documents.jsonl"), sentence=sentence)


def test_skipped_names_the_list_and_writes_it_even_empty(tmp_path, source_tree, run_zrodlo):
    """--skipped: the list goes where a pipeline declares it, and exists whatever was skipped."""
    empty = [{"id": "empty.py", "reason": "empty"}]
    for flags, listed in ((("--exclude", "empty.py"), []), (("--skip-empty",), empty)):
        output = tmp_path / f"documents{len(flags)}.jsonl"
        listing = tmp_path / f"skipped{len(flags)}.jsonl"
        args = import_args(source_tree, output, "--exclude", "bad.py", "--skipped", listing, *flags)
        returncode, _, stderr = run_zrodlo(*args, cwd=tmp_path)
        assert (returncode, stderr) == (0, ""), stderr
        assert [json.loads(line) for line in listing.read_text().splitlines()] == listed
    assert not list(tmp_path.glob("*.jsonl.skipped.jsonl"))

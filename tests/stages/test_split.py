"""`zrodlo documents split` and `zrodlo documents assign` through the real command."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

NEEDS_LINE = "each line holds one JSON object with an id and a text"
NEEDS_ID = "each document needs an id that is a non-empty string"
NEEDS_TEXT = "each document needs a text that is a string"
ONE_POOL = "every id belongs to exactly one pool"
SPLITS_SHAPE = "it holds one object with the pools train, validation and test"

GOOD_LINES = [
    {"id": "a", "text": "alpha"},
    {"id": "b", "text": "beta", "title": "kept in the line"},
    {"id": "c", "text": "gamma"},
    {"id": "d", "text": "delta"},
]
GOOD_SPLITS = {"train": ["a", "d"], "validation": ["b"], "test": ["c"]}


@pytest.fixture
def workspace(tmp_path: Path, write_documents) -> Path:
    write_documents(tmp_path / "documents.jsonl", GOOD_LINES)
    (tmp_path / "splits.json").write_text(json.dumps(GOOD_SPLITS))
    return tmp_path


def split_args(root: Path, output: Path | None = None) -> list[object]:
    return [
        "documents",
        "split",
        "--documents",
        root / "documents.jsonl",
        "--splits",
        root / "splits.json",
        "--output",
        output or root / "pools",
    ]


def test_split_writes_each_pool_with_its_lines_unchanged_and_a_manifest(workspace, run_zrodlo):
    returncode, stdout, stderr = run_zrodlo(*split_args(workspace), cwd=workspace)
    assert (returncode, stderr) == (0, "")
    pools = workspace / "pools"
    assert sorted(p.name for p in pools.iterdir()) == [
        "manifest.json",
        "test.jsonl",
        "train.jsonl",
        "validation.jsonl",
    ]
    lines = (workspace / "documents.jsonl").read_bytes().splitlines(keepends=True)
    assert (pools / "train.jsonl").read_bytes() == lines[0] + lines[3]
    assert (pools / "validation.jsonl").read_bytes() == lines[1]  # the title stays in the line
    assert (pools / "test.jsonl").read_bytes() == lines[2]
    manifest = json.loads((pools / "manifest.json").read_text())
    for pool, documents, characters in (("train", 2, 10), ("validation", 1, 4), ("test", 1, 5)):
        entry = manifest["pools"][pool]
        assert entry["documents"] == documents
        assert entry["characters"] == characters
        assert entry["sha256"] == hashlib.sha256((pools / f"{pool}.jsonl").read_bytes()).hexdigest()
    assert manifest["documents"]["sha256"] == hashlib.sha256(b"".join(lines)).hexdigest()
    assert f"train: 2 documents, 10 characters -> {pools / 'train.jsonl'}" in stdout


def test_split_removes_temporaries_a_killed_run_left(workspace, run_zrodlo):
    leftover = workspace / ".pools.partial-999999"
    leftover.mkdir()
    (leftover / "train.jsonl").write_text("half")
    returncode, _, _ = run_zrodlo(*split_args(workspace), cwd=workspace)
    assert returncode == 0
    assert not leftover.exists()
    assert sorted(p.name for p in workspace.iterdir()) == [
        "documents.jsonl",
        "pools",
        "splits.json",
    ]


BAD_DOCUMENT_LINES = {
    "malformed JSON": (
        '{"id": "b", "text": ',
        "{d} line 2 is not valid JSON (Expecting value); " + NEEDS_LINE,
    ),
    "not an object": (
        '["b", "beta"]',
        "{d} line 2 holds a JSON list, not an object; " + NEEDS_LINE,
    ),
    "missing id": ('{"text": "beta"}', "{d} line 2 has no id; " + NEEDS_ID),
    "non-string id": (
        '{"id": 7, "text": "beta"}',
        "{d} line 2 has id 7, which is not a string; " + NEEDS_ID,
    ),
    "empty id": ('{"id": "", "text": "beta"}', "{d} line 2 has an empty id; " + NEEDS_ID),
    "missing text": ('{"id": "b"}', '{d} line 2 (id "b") has no text; ' + NEEDS_TEXT),
    "non-string text": (
        '{"id": "b", "text": ["beta"]}',
        '{d} line 2 (id "b") has text ["beta"], which is not a string; ' + NEEDS_TEXT,
    ),
    "empty text": (
        '{"id": "b", "text": ""}',
        '{d} line 2 (id "b") has an empty text; a document needs one character or more',
    ),
    "blank line": ("", "{d} line 2 is empty; " + NEEDS_LINE),
    "duplicate id": (
        '{"id": "a", "text": "again"}',
        '{d} lines 1 and 2 both have id "a"; every document needs an id of its own',
    ),
}


@pytest.mark.parametrize("case", BAD_DOCUMENT_LINES, ids=list(BAD_DOCUMENT_LINES))
def test_split_refuses_a_bad_documents_line(case, workspace, write_documents, assert_refused):
    line, sentence = BAD_DOCUMENT_LINES[case]
    documents = write_documents(
        workspace / "documents.jsonl", [GOOD_LINES[0], line, *GOOD_LINES[1:]]
    )
    assert_refused(*split_args(workspace), sentence=sentence.format(d=documents))


def test_split_refuses_a_duplicate_id_naming_both_lines(workspace, write_documents, assert_refused):
    documents = write_documents(workspace / "documents.jsonl", [*GOOD_LINES, GOOD_LINES[2]])
    sentence = f'{documents} lines 3 and 5 both have id "c"; every document needs an id of its own'
    assert_refused(*split_args(workspace), sentence=sentence)


BAD_SPLITS = {
    "id in two pools": (
        {"train": ["a", "b", "d"], "validation": ["b"], "test": ["c"]},
        '{s} puts id "b" in both train and validation; ' + ONE_POOL,
    ),
    "id twice in one pool": (
        {"train": ["a", "d", "a"], "validation": ["b"], "test": ["c"]},
        '{s} lists id "a" twice in train; ' + ONE_POOL,
    ),
    "id no document has": (
        {"train": ["a", "d", "zeta"], "validation": ["b"], "test": ["c"]},
        '{s} names id "zeta" in train, and no document of {d} has it',
    ),
    "document in no pool": (
        {"train": ["a"], "validation": ["b"], "test": ["c"]},
        '{d} line 4 has id "d", which {s} puts in no pool; '
        "every document belongs to exactly one pool",
    ),
    "empty pool": (
        {"train": ["a", "d"], "validation": [], "test": ["b", "c"]},
        "{s} gives the validation pool no ids; train and validation each need one or more (test "
        "may have none)",
    ),
    "missing pool": (
        {"validation": ["a", "c", "d"], "test": ["b"]},
        "{s} gives the train pool no ids; train and validation each need one or more (test may "
        "have none)",
    ),
    "unknown pool name": (
        {"train": ["a", "d"], "valid": ["b"], "test": ["c"]},
        '{s} names a pool "valid"; the pools are train, validation and test',
    ),
    "not an object": (
        ["a", "b", "c", "d"],
        "{s} holds a JSON list, not an object; " + SPLITS_SHAPE,
    ),
    "pool not a list of strings": (
        {"train": ["a", "d"], "validation": "b", "test": ["c"]},
        "{s} gives the validation pool something other than a list of id strings",
    ),
}


@pytest.mark.parametrize("case", BAD_SPLITS, ids=list(BAD_SPLITS))
def test_split_refuses_bad_splits(case, workspace, assert_refused):
    splits, sentence = BAD_SPLITS[case]
    (workspace / "splits.json").write_text(json.dumps(splits))
    expected = sentence.format(s=workspace / "splits.json", d=workspace / "documents.jsonl")
    assert_refused(*split_args(workspace), sentence=expected)


def test_split_refuses_splits_that_are_not_json(workspace, assert_refused):
    (workspace / "splits.json").write_text("train: [a, d]\n")
    sentence = f"{workspace / 'splits.json'} is not valid JSON (Expecting value); {SPLITS_SHAPE}"
    assert_refused(*split_args(workspace), sentence=sentence)


def test_split_refuses_an_existing_output(workspace, assert_refused):
    output = workspace / "pools"
    output.mkdir()
    (output / "train.jsonl").write_text("mine")
    sentence = f"{output} already exists; Zrodlo writes a new directory and overwrites nothing"
    assert_refused(*split_args(workspace, output), sentence=sentence)


def test_split_makes_the_missing_parents_of_its_output(workspace, run_zrodlo):
    output = workspace / "missing" / "pools"
    returncode, _, stderr = run_zrodlo(*split_args(workspace, output), cwd=workspace)
    assert (returncode, stderr) == (0, "")
    assert (output / "train.jsonl").is_file()


def test_split_refuses_a_file_where_a_parent_would_be(workspace, assert_refused):
    (workspace / "data").write_text("mine")
    output = workspace / "data" / "pools"
    sentence = (
        f"{output} cannot be written: {output.parent} is not a directory, so it cannot hold the "
        "output"
    )
    assert_refused(*split_args(workspace, output), sentence=sentence)


def test_split_refuses_a_missing_documents_file(workspace, assert_refused):
    (workspace / "documents.jsonl").unlink()
    sentence = f"{workspace / 'documents.jsonl'} cannot be read: No such file or directory"
    assert_refused(*split_args(workspace), sentence=sentence)


def test_split_takes_relative_paths_from_the_working_directory(workspace, run_zrodlo):
    args = ["documents", "split", "--documents", "documents.jsonl", "--splits", "splits.json"]
    returncode, stdout, _ = run_zrodlo(*args, "--output", "pools", cwd=workspace)
    assert returncode == 0
    assert "validation: 1 documents, 4 characters -> pools/validation.jsonl" in stdout
    manifest = json.loads((workspace / "pools" / "manifest.json").read_text())
    assert manifest["documents"]["path"] == "documents.jsonl"


# `zrodlo documents assign`: pools drawn from a hash of each id.


def assign_args(root: Path, *extra: object) -> list[object]:
    return [
        "documents",
        "assign",
        "--documents",
        root / "documents.jsonl",
        "--output",
        root / "splits.json",
        *extra,
    ]


def test_splits_assigns_every_id_to_one_pool_and_split_accepts_it(
    tmp_path, write_documents, run_zrodlo
):
    write_documents(tmp_path / "documents.jsonl", {f"doc-{i:03d}": f"text {i}" for i in range(200)})
    returncode, stdout, stderr = run_zrodlo(
        *assign_args(tmp_path, "--validation", "0.2", "--test", "0.3"), cwd=tmp_path
    )
    assert (returncode, stderr) == (0, "")
    pools = json.loads((tmp_path / "splits.json").read_text())
    assert sorted(pools) == ["test", "train", "validation"]
    assert sorted(i for ids in pools.values() for i in ids) == [f"doc-{i:03d}" for i in range(200)]
    assert 20 < len(pools["validation"]) < 60 and 40 < len(pools["test"]) < 80
    assert (
        stdout
        == f"wrote {tmp_path / 'splits.json'}: "
        + json.dumps({pool: len(ids) for pool, ids in pools.items()})
        + "\n"
    )
    returncode, _, _ = run_zrodlo(*split_args(tmp_path), cwd=tmp_path)
    assert returncode == 0


def test_splits_refuses_a_fraction_of_one(tmp_path, write_documents, assert_refused):
    write_documents(tmp_path / "documents.jsonl", {"a": "x"})
    sentence = "--test is 1.0; it must be a fraction from 0 up to but not including 1"
    assert_refused(*assign_args(tmp_path, "--test", "1"), sentence=sentence)


def test_splits_refuses_an_existing_output(tmp_path, write_documents, assert_refused):
    write_documents(tmp_path / "documents.jsonl", {"a": "x"})
    (tmp_path / "splits.json").write_text("{}")
    sentence = f"{tmp_path / 'splits.json'} already exists; Zrodlo writes a new file and overwrites nothing"
    assert_refused(*assign_args(tmp_path), sentence=sentence)


def test_splits_refuses_fractions_that_leave_a_pool_empty(
    tmp_path, write_documents, assert_refused
):
    documents = write_documents(tmp_path / "documents.jsonl", {"a": "x", "b": "y"})
    sentence = (
        f"{documents} has 2 documents, and --validation 0.01 puts none of them in the validation "
        "pool; train and validation each need one document or more, and test does with --test "
        "above 0, so cut the texts into more documents: "
        "documents import --cut-at '\\n\\s*\\n' cuts a text at its blank lines, "
        "--max-characters into parts"
    )
    assert_refused(*assign_args(tmp_path, "--validation", "0.01"), sentence=sentence)


def test_one_document_is_told_how_to_become_several(tmp_path, write_documents, assert_refused):
    """One text file imported whole is one document: the refusal says so in the singular and
    names the flags that cut it."""
    documents = write_documents(tmp_path / "documents.jsonl", {"input.txt": "To be.\n\nOr not."})
    sentence = (
        f"{documents} has 1 document, and what --validation and --test leave does not put it in "
        "the train pool; train and validation each need one document or more, and test does "
        "with --test above 0, so cut the texts into more documents: "
        "documents import --cut-at '\\n\\s*\\n' cuts a text at its blank lines, "
        "--max-characters into parts"
    )
    assert_refused(*assign_args(tmp_path), sentence=sentence)


@pytest.mark.parametrize("command", [("documents", "split"), ("documents", "assign")])
def test_every_option_of_the_split_commands_has_help(
    command, run_zrodlo, option_descriptions, tmp_path
):
    returncode, stdout, _ = run_zrodlo(*command, "--help", cwd=tmp_path)
    assert returncode == 0
    options = option_descriptions(stdout)
    expected = {
        "split": {"--documents", "--splits", "--output", "--help"},
        "assign": {"--documents", "--output", "--validation", "--test", "--source", "--help"},
    }[command[1]]
    assert set(options) == expected
    assert all(options.values()), options


def test_splits_refuses_an_id_that_is_not_encodable_as_utf8(tmp_path, run_zrodlo, snapshot):
    (tmp_path / "documents.jsonl").write_text('{"id": "\\ud800", "text": "a"}\n')
    before = snapshot(tmp_path)
    returncode, _, stderr = run_zrodlo(*assign_args(tmp_path), cwd=tmp_path)
    assert returncode == 1
    assert stderr == (
        f"Error: {tmp_path / 'documents.jsonl'} line 1 has an id with a lone surrogate "
        '("\\ud800"); an id must be Unicode text that UTF-8 can hold\n'
    )
    assert snapshot(tmp_path) == before

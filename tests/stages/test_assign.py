"""`zrodlo documents assign --source`: pools a user chose, in a splits.json of their own, checked
against the documents and written as the command writes the pools it draws."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

DOCUMENTS = {"a": "alpha", "b": "beta", "c": "gamma", "d": "delta"}
ONE_POOL = "every id belongs to exactly one pool"


@pytest.fixture
def workspace(tmp_path: Path, write_documents) -> Path:
    write_documents(tmp_path / "documents.jsonl", DOCUMENTS)
    return tmp_path


def assign_args(root: Path, *extra: object) -> list[object]:
    return [
        "documents", "assign", "--documents", root / "documents.jsonl",
        "--output", root / "splits.json", *extra,
    ]  # fmt: skip


def test_your_own_pools_are_written_in_the_order_of_the_documents(workspace, run_zrodlo):
    """The pools as the user wrote them, in any order and layout, come out as assign writes the
    pools it draws: train, validation, test, each in the order of the documents file. The shares
    are not read: these would be refused."""
    mine = workspace / "mine.json"
    mine.write_text('{"test": ["c"],\n "validation": ["b"], "train": ["d", "a"]}')
    returncode, stdout, stderr = run_zrodlo(
        *assign_args(workspace, "--source", mine, "--validation", "0.9", "--test", "0.5"),
        cwd=workspace,
    )
    assert (returncode, stderr) == (0, "")
    written = (workspace / "splits.json").read_text()
    assert json.loads(written) == {"train": ["a", "d"], "validation": ["b"], "test": ["c"]}
    assert list(json.loads(written)) == ["train", "validation", "test"]
    counts = '{"train": 2, "validation": 1, "test": 1}'
    assert stdout == f"wrote {workspace / 'splits.json'}: {counts}\n"


def test_a_source_that_is_the_documents_draws_each_pool_from_a_hash(workspace, run_zrodlo):
    """The params' default: splits.source names the documents file itself, here by another
    spelling of its path, and the pools are drawn as without --source."""
    args = ["documents", "assign", "--documents", "documents.jsonl"]
    returncode, _, _ = run_zrodlo(*args, "--output", "drawn.json", cwd=workspace)
    assert returncode == 0
    returncode, _, stderr = run_zrodlo(
        *args, "--output", "sourced.json", "--source", "./documents.jsonl", cwd=workspace
    )
    assert (returncode, stderr) == (0, "")
    drawn = (workspace / "drawn.json").read_bytes()
    assert (workspace / "sourced.json").read_bytes() == drawn


def test_a_test_pool_of_no_ids_is_yours_to_choose(workspace, run_zrodlo):
    (workspace / "mine.json").write_text('{"train": ["a", "b", "c"], "validation": ["d"]}')
    returncode, _, stderr = run_zrodlo(
        *assign_args(workspace, "--source", workspace / "mine.json"), cwd=workspace
    )
    assert (returncode, stderr) == (0, "")
    pools = json.loads((workspace / "splits.json").read_text())
    assert pools == {"train": ["a", "b", "c"], "validation": ["d"], "test": []}


BAD_SOURCES = {
    "id in two pools": (
        {"train": ["a", "b", "d"], "validation": ["b"], "test": ["c"]},
        '{s} puts id "b" in both train and validation; ' + ONE_POOL,
    ),
    "id no document has": (
        {"train": ["a", "d", "zeta"], "validation": ["b"], "test": ["c"]},
        '{s} names id "zeta" in train, and no document of {d} has it',
    ),
    "document left out": (
        {"train": ["a"], "validation": ["b"], "test": ["c"]},
        '{d} line 4 has id "d", which {s} puts in no pool; '
        "every document belongs to exactly one pool",
    ),
    "empty validation": (
        {"train": ["a", "b", "c", "d"], "validation": []},
        "{s} gives the validation pool no ids; train and validation each need one or more (test "
        "may have none)",
    ),
    "not JSON": (
        "train: [a, b]\n",
        "{s} is not valid JSON (Expecting value); it holds one object with the pools train, "
        "validation and test",
    ),
}


@pytest.mark.parametrize("case", BAD_SOURCES, ids=list(BAD_SOURCES))
def test_your_own_pools_are_refused_where_they_do_not_fit_the_documents(
    case, workspace, assert_refused
):
    pools, sentence = BAD_SOURCES[case]
    mine = workspace / "mine.json"
    mine.write_text(pools if isinstance(pools, str) else json.dumps(pools))
    expected = sentence.format(s=mine, d=workspace / "documents.jsonl")
    assert_refused(*assign_args(workspace, "--source", mine), sentence=expected)


def test_a_missing_source_is_refused(workspace, assert_refused):
    mine = workspace / "mine.json"
    sentence = f"{mine} cannot be read: No such file or directory"
    assert_refused(*assign_args(workspace, "--source", mine), sentence=sentence)

"""Pools: assignment by a hash of each id, the fraction checks, and reading splits.json."""

from __future__ import annotations

import hashlib
import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zrodlo.data.pools import assign_pools, id_position, read_splits, split_documents
from zrodlo.storage.refusal import Refusal

IDS = [f"doc-{i:04d}" for i in range(500)]


def pool_of(pools: dict[str, list[str]]) -> dict[str, str]:
    return {doc_id: pool for pool, ids in pools.items() for doc_id in ids}


def test_an_ids_position_is_the_first_8_bytes_of_its_sha256():
    head = hashlib.sha256("zażółć".encode()).digest()[:8]
    assert id_position("zażółć") == int.from_bytes(head, "big") / 2**64
    assert 0 <= id_position("") < 1


def test_assignment_follows_the_position_of_each_id(tmp_path):
    pools = assign_pools(IDS, 0.2, 0.3, tmp_path)
    for doc_id, pool in pool_of(pools).items():
        position = id_position(doc_id)
        expected = "validation" if position < 0.2 else "test" if position < 0.5 else "train"
        assert pool == expected
    assert 60 < len(pools["validation"]) < 140 and 110 < len(pools["test"]) < 190


def test_assignment_keeps_the_input_order_within_each_pool(tmp_path):
    pools = assign_pools(IDS, 0.1, 0.1, tmp_path)
    for ids in pools.values():
        assert ids == sorted(ids, key=IDS.index)


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.text(min_size=1, max_size=8), min_size=1, max_size=40, unique=True),
    st.floats(0.05, 0.45),
    st.floats(0.05, 0.45),
)
def test_adding_documents_never_moves_an_existing_id(extra, validation, test):
    before = pool_of(assign_pools(IDS, validation, test, "before"))
    after = pool_of(
        assign_pools(IDS + [e for e in extra if e not in IDS], validation, test, "after")
    )
    assert {doc_id: after[doc_id] for doc_id in IDS} == before


@pytest.mark.parametrize("value", [-0.1, 1.0, 1.5, math.nan])
def test_a_fraction_outside_zero_to_one_is_refused(value, tmp_path):
    with pytest.raises(Refusal) as refused:
        assign_pools(IDS, value, 0.1, tmp_path)
    assert refused.value.sentence == (
        f"--validation is {value!r}; it must be a fraction from 0 up to but not including 1"
    )


def test_fractions_that_leave_nothing_to_train_on_are_refused(tmp_path):
    with pytest.raises(Refusal) as refused:
        assign_pools(IDS, 0.6, 0.4, tmp_path)
    assert refused.value.sentence == (
        "--validation 0.6 and --test 0.4 leave no documents to train on; their sum must be below 1"
    )


def test_a_pool_left_empty_is_refused(tmp_path):
    source = tmp_path / "documents.jsonl"
    with pytest.raises(Refusal) as refused:
        assign_pools(IDS[:20], 0.5, 0.001, source)
    assert refused.value.sentence == (
        f"{source} has 20 documents, and --test 0.001 puts none of them in the test pool; "
        "train and validation each need one document or more, and test does with --test above "
        "0, so raise --test"
    )


def test_a_test_share_of_0_leaves_the_test_pool_empty(tmp_path):
    """A split of train and validation alone, as nanoGPT's 90/10."""
    pools = assign_pools(IDS[:20], 0.1, 0.0, tmp_path / "documents.jsonl")
    assert pools["test"] == [] and pools["train"] and pools["validation"]


def test_read_splits_gives_the_pool_of_every_id(tmp_path):
    path = tmp_path / "splits.json"
    path.write_text(json.dumps({"train": ["a", "b"], "validation": ["c"], "test": ["d"]}))
    assert read_splits(path) == {"a": "train", "b": "train", "c": "validation", "d": "test"}


def test_read_splits_refuses_a_missing_file(tmp_path):
    with pytest.raises(Refusal) as refused:
        read_splits(tmp_path / "splits.json")
    assert refused.value.sentence == (
        f"{tmp_path / 'splits.json'} cannot be read: No such file or directory"
    )


def test_split_documents_writes_lines_as_read_and_counts_characters(tmp_path, write_documents):
    documents = write_documents(
        tmp_path / "documents.jsonl",
        ['{"id":"a","text":"😀x","n":1}', {"id": "b", "text": "yy"}, {"id": "c", "text": "z"}],
    )
    splits = tmp_path / "splits.json"
    splits.write_text(json.dumps({"train": ["a"], "validation": ["b"], "test": ["c"]}))
    output = tmp_path / "pools"
    output.mkdir()
    manifest = split_documents(documents, splits, output)
    assert (output / "train.jsonl").read_bytes() == b'{"id":"a","text":"\xf0\x9f\x98\x80x","n":1}\n'
    assert manifest["pools"]["train"]["characters"] == 2
    assert manifest["pools"]["validation"] == {
        "documents": 1,
        "characters": 2,
        "sha256": hashlib.sha256((output / "validation.jsonl").read_bytes()).hexdigest(),
    }
    assert manifest["splits"] == {
        "path": str(splits),
        "sha256": hashlib.sha256(splits.read_bytes()).hexdigest(),
    }

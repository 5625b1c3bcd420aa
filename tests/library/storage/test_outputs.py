"""Outputs appear whole through a rename, or not at all."""

from __future__ import annotations

import os

import pytest

from zrodlo.storage.outputs import (
    check_new_directory,
    check_new_file,
    new_directory,
    new_file,
    partial_name,
)
from zrodlo.storage.refusal import Refusal


def test_new_directory_appears_only_when_the_block_ends(tmp_path):
    output = tmp_path / "out"
    with new_directory(output) as partial:
        assert partial == tmp_path / f".out.partial-{os.getpid()}"
        (partial / "a").write_text("a")
        assert not output.exists()
    assert (output / "a").read_text() == "a"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


@pytest.mark.parametrize("error", [Refusal("no"), KeyboardInterrupt()])
def test_new_directory_leaves_nothing_when_the_block_fails(tmp_path, error):
    with pytest.raises(type(error)), new_directory(tmp_path / "out") as partial:
        (partial / "a").write_text("a")
        raise error
    assert list(tmp_path.iterdir()) == []


def test_new_file_appears_only_when_the_block_ends_and_leaves_nothing_on_failure(tmp_path):
    output = tmp_path / "f.json"
    with new_file(output) as partial:
        partial.write_text("{}")
        assert not output.exists()
    assert output.read_text() == "{}"
    with pytest.raises(Refusal), new_file(tmp_path / "g.json") as partial:
        partial.write_text("half")
        raise Refusal("no")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.json"]


def test_leftovers_of_killed_processes_are_removed_on_the_next_write(tmp_path):
    output = tmp_path / "out"
    (tmp_path / ".out.partial-1").mkdir()
    (tmp_path / ".out.partial-2").write_text("x")
    (tmp_path / ".other.partial-3").write_text("not ours")
    with new_directory(output):
        pass
    assert sorted(p.name for p in tmp_path.iterdir()) == [".other.partial-3", "out"]


def test_an_existing_directory_is_refused(tmp_path):
    with pytest.raises(Refusal) as refused:
        check_new_directory(tmp_path)
    assert refused.value.sentence == (
        f"{tmp_path} already exists; Zrodlo writes a new directory and overwrites nothing"
    )


def test_an_existing_file_in_place_of_a_directory_is_refused(tmp_path):
    (tmp_path / "out").write_text("x")
    with pytest.raises(Refusal) as refused:
        check_new_directory(tmp_path / "out")
    assert refused.value.sentence == (
        f"{tmp_path / 'out'} exists and is not a directory; Zrodlo writes a new directory"
    )


def test_a_dangling_symlink_counts_as_existing(tmp_path):
    (tmp_path / "link").symlink_to(tmp_path / "nowhere")
    with pytest.raises(Refusal) as refused:
        check_new_file(tmp_path / "link")
    assert refused.value.sentence == (
        f"{tmp_path / 'link'} already exists; Zrodlo writes a new file and overwrites nothing"
    )


def test_missing_parents_are_made_and_removed_again_when_the_write_fails(tmp_path):
    output = tmp_path / "a" / "b" / "out"
    check_new_directory(output)  # missing parents are no reason to refuse
    with pytest.raises(Refusal), new_directory(output):
        assert (tmp_path / "a" / "b").is_dir()
        raise Refusal("no")
    assert list(tmp_path.iterdir()) == []
    with new_file(tmp_path / "c" / "d.json") as partial:
        partial.write_text("{}")
    assert (tmp_path / "c" / "d.json").read_text() == "{}"


def test_a_file_where_a_parent_would_be_is_refused(tmp_path):
    (tmp_path / "a").write_text("mine")
    for path, shown in ((tmp_path / "a" / "b.json", "a"), (tmp_path / "a" / "b" / "c", "a")):
        with pytest.raises(Refusal) as refused:
            check_new_file(path)
        assert refused.value.sentence == (
            f"{path} cannot be written: {tmp_path / shown} is not a directory, so it cannot hold "
            "the output"
        )


def test_partial_names_are_hidden_siblings_named_by_process(tmp_path):
    assert partial_name(tmp_path / "x") == tmp_path / f".x.partial-{os.getpid()}"

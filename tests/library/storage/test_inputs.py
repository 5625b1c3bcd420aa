"""The one opener of every file a command reads, and the one of every record it appends to: what
each refuses, and a check that no other module of the library opens a file to read it."""

from __future__ import annotations

import ast
import os
import socket
from pathlib import Path

import pytest

from zrodlo.storage.inputs import open_input, read_input
from zrodlo.storage.outputs import open_in_place
from zrodlo.storage.refusal import Refusal

LIBRARY = Path(__file__).resolve().parents[3] / "src" / "zrodlo"
# Files of the system, read for what they say about the machine, not inputs a user names.
SYSTEM_FILES = ("/proc/",)


def test_a_regular_file_is_read_through_a_link(tmp_path):
    (tmp_path / "file").write_bytes(b"held")
    (tmp_path / "link").symlink_to(tmp_path / "file")  # as DVC links what it tracks
    assert read_input(tmp_path / "link") == b"held"


@pytest.mark.parametrize("kind", ["a directory", "a FIFO", "a character device", "a socket"])
def test_what_is_no_regular_file_is_refused_without_waiting(tmp_path, kind):
    path = tmp_path / "input"
    if kind == "a directory":
        path.mkdir()
    elif kind == "a FIFO":
        os.mkfifo(path)  # no writer: a blocking open would wait for one forever
    elif kind == "a character device":
        path = Path("/dev/zero")
    else:
        listening = socket.socket(socket.AF_UNIX)
        listening.bind(str(path))
    with pytest.raises(Refusal) as refused:
        open_input(path, "a documents file")
    assert refused.value.sentence == f"{path} is {kind}; a documents file is expected there"


def test_a_file_past_its_bound_is_refused_before_it_is_read(tmp_path):
    path = tmp_path / "config.json"
    path.write_bytes(b"x" * 11)
    assert read_input(path, limit=11) == b"x" * 11
    with pytest.raises(Refusal) as refused:
        read_input(path, limit=10)
    assert (
        refused.value.sentence
        == f"{path} holds 11 bytes, more than the 10 a file of its kind holds"
    )


def test_a_record_is_never_opened_through_a_link_or_as_a_fifo(tmp_path):
    target = tmp_path / "elsewhere"
    target.write_bytes(b"kept")
    (tmp_path / "steps.csv").symlink_to(target)
    with pytest.raises(Refusal, match="is a symbolic link"):
        open_in_place(tmp_path / "steps.csv", os.O_WRONLY | os.O_APPEND)
    os.mkfifo(tmp_path / "ledger.jsonl")
    with pytest.raises(Refusal, match="is no regular file"):
        open_in_place(tmp_path / "ledger.jsonl", os.O_WRONLY | os.O_APPEND)
    assert target.read_bytes() == b"kept"
    fd = open_in_place(tmp_path / "new.csv", os.O_WRONLY | os.O_APPEND)
    os.close(fd)
    assert (tmp_path / "new.csv").is_file()


def _reads_elsewhere(tree: ast.AST) -> list[int]:
    """Lines that open a file to read it without the opener: open() in a reading mode,
    Path.read_bytes / read_text, and pyarrow's memory_map of a path not yet checked."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        function = node.func
        if isinstance(function, ast.Attribute) and function.attr in ("read_bytes", "read_text"):
            if not (isinstance(function.value, ast.Call) and _system_path(function.value)):
                found.append(node.lineno)
        elif isinstance(function, ast.Name) and function.id == "open":
            mode = node.args[1] if len(node.args) > 1 else None
            text = mode.value if isinstance(mode, ast.Constant) else "r"
            if not any(flag in str(text) for flag in "wa+"):
                found.append(node.lineno)
    return found


def _system_path(call: ast.Call) -> bool:
    first = call.args[0] if call.args else None
    value = first.value if isinstance(first, ast.Constant) else None
    if isinstance(first, ast.JoinedStr):
        value = first.values[0].value if isinstance(first.values[0], ast.Constant) else None
    return isinstance(value, str) and value.startswith(SYSTEM_FILES)


def test_no_module_but_the_opener_opens_a_file_to_read_it():
    offenders = {}
    for file in sorted(LIBRARY.rglob("*.py")):
        if file.name == "inputs.py" and file.parent.name == "storage":
            continue
        lines = _reads_elsewhere(ast.parse(file.read_text()))
        if lines:
            offenders[file.relative_to(LIBRARY).as_posix()] = lines
    assert offenders == {}

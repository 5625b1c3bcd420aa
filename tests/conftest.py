"""Shared fixtures: the real `zrodlo` command in a subprocess, directory snapshots, tiny documents."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

import pytest

# The console script installed next to the interpreter running the tests.
ZRODLO = Path(sys.executable).parent / "zrodlo"

# A wide, colourless terminal, so that help text is one line per option and has no escape codes.
_ENV = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb"}

_OPTION_LINE = re.compile(r"^\*?\s*(--[a-z][a-z-]*)\s+<\w+>\s*(.*)$")
_ANNOTATION = re.compile(r"\[(required|default: [^\]]*)\]")


def _run_zrodlo(*args: object, cwd: Path) -> tuple[int, str, str]:
    completed = subprocess.run(
        [str(ZRODLO), *(str(arg) for arg in args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=_ENV,
        timeout=120,
        check=False,
    )
    return completed.returncode, completed.stdout, completed.stderr


def _snapshot(root: Path) -> dict[str, bytes | None]:
    """Every name under `root` (hidden ones included) with its bytes; None for a directory."""
    return {
        path.relative_to(root).as_posix(): None if path.is_dir() else path.read_bytes()
        for path in sorted(root.rglob("*"))
    }


def _write_documents(path: Path, documents: Mapping[str, str] | Iterable[object]) -> Path:
    """Write a documents file: a mapping id -> text, or lines (a dict is dumped, a str kept as is)."""
    if isinstance(documents, Mapping):
        lines: list[object] = [{"id": i, "text": t} for i, t in documents.items()]
    else:
        lines = list(documents)
    with open(path, "w", encoding="utf-8") as handle:
        for line in lines:
            text = line if isinstance(line, str) else json.dumps(line, ensure_ascii=False)
            handle.write(text + "\n")
    return path


def _option_descriptions(help_text: str) -> dict[str, str]:
    """The options of a command's --help, each with its description (without [required] etc.)."""
    options = {}
    for line in help_text.splitlines():
        match = _OPTION_LINE.match(line.strip().strip("│").strip())
        if match:
            options[match.group(1)] = _ANNOTATION.sub("", match.group(2)).strip()
    return options


@pytest.fixture
def run_zrodlo() -> Callable[..., tuple[int, str, str]]:
    """`run_zrodlo(*args, cwd=...)` runs the real console script: (returncode, stdout, stderr)."""
    return _run_zrodlo


@pytest.fixture
def snapshot() -> Callable[[Path], dict[str, bytes | None]]:
    return _snapshot


@pytest.fixture
def write_documents() -> Callable[..., Path]:
    return _write_documents


@pytest.fixture
def option_descriptions() -> Callable[[str], dict[str, str]]:
    return _option_descriptions


@pytest.fixture
def assert_refused(tmp_path: Path) -> Callable[..., None]:
    """Run `zrodlo *args` in tmp_path and check the refusal: the sentence, exit 1, nothing written."""

    def check(*args: object, sentence: str) -> None:
        before = _snapshot(tmp_path)
        returncode, stdout, stderr = _run_zrodlo(*args, cwd=tmp_path)
        assert stderr == f"Error: {sentence}\n"
        assert returncode == 1
        assert stdout == ""
        assert _snapshot(tmp_path) == before

    return check

"""Scores that take a while show their progress on a terminal: the held-out scores of a run (in
its step line, at one process and through the workers' channel at two) and `model evaluate`'s.

The real command runs on a pseudo-terminal, with a held-out corpus long enough that one score
takes seconds, past the second after which progress shows.
"""

from __future__ import annotations

import fcntl
import os
import struct
import subprocess
import termios
from pathlib import Path

import pytest
from conftest import TRAINING_DOCUMENTS, ZRODLO

# About 8,500 windows at --context 9: seconds of scoring for the tiny model, one window a pass
# (3,400 took 0.9 s at two processes, under the second after which progress shows).
LONG_TEXT = " ".join(TRAINING_DOCUMENTS.values()) * 1000


def on_terminal(*args: object, cwd: Path) -> tuple[int, str]:
    """Run `zrodlo args` with a 250-column terminal as its stdout and stderr; its exit status and
    what it wrote there."""
    primary, secondary = os.openpty()
    fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 250, 0, 0))
    env = {**os.environ, "TERM": "xterm", "COLUMNS": "250"}
    env.pop("NO_COLOR", None)
    process = subprocess.Popen(
        [str(ZRODLO), *map(str, args)], cwd=cwd, env=env,
        stdin=subprocess.DEVNULL, stdout=secondary, stderr=secondary,
    )  # fmt: skip
    os.close(secondary)
    written = bytearray()
    while True:
        try:
            chunk = os.read(primary, 1 << 16)
        except OSError:  # the terminal's other end closed: the command is done
            break
        if not chunk:
            break
        written += chunk
    os.close(primary)
    return process.wait(timeout=300), written.decode(errors="replace")


@pytest.fixture(scope="module")
def long_held_out(training_data, tmp_path_factory, write_documents) -> Path:
    root = tmp_path_factory.mktemp("long")
    documents = write_documents(root / "long.jsonl", {"long": LONG_TEXT})
    corpus = root / "long"
    completed = subprocess.run(
        [ZRODLO, "corpus", "prepare", "--documents", documents, "--tokenizer",
         training_data.tokenizer, "--output", corpus],
        capture_output=True, check=False,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr
    return corpus


@pytest.mark.parametrize("processes", [1, 2])
def test_a_long_held_out_score_shows_its_progress_in_the_step_line(
    processes, training_data, long_held_out, train_args, tmp_path
):
    args = train_args(training_data.model, training_data.corpus, tmp_path / "run", 2)
    status, written = on_terminal(
        *args, "--eval-corpus", long_held_out, "--eval-every", "2", "--micro-batch-size", "1",
        "--processes", processes, cwd=tmp_path,
    )  # fmt: skip
    assert status == 0, written
    assert "scoring the held-out corpus at step 2: " in written
    assert "held-out scores took" in written


def test_a_long_evaluation_shows_its_progress(training_data, long_held_out, tmp_path):
    status, written = on_terminal(
        "model", "evaluate", "--model", training_data.model, "--corpus", long_held_out,
        "--context", "9", "--batch-size", "1", cwd=tmp_path,
    )  # fmt: skip
    assert status == 0, written
    assert "scoring long" in written

"""The command line as a user meets it: every command's --help lists the values of each flag with a
fixed set of them, shows a switch as a switch and ends with an example of the command."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ZRODLO = Path(sys.executable).parent / "zrodlo"
COMMANDS = [
    ("documents", "torch-docs"), ("documents", "import"), ("documents", "assign"),
    ("documents", "split"), ("tokenizer", "fit"), ("corpus", "prepare"), ("model", "init"),
    ("model", "train"), ("model", "evaluate"), ("model", "sample"), ("model", "export"),
    ("checkpoint", "resume"), ("checkpoint", "diff"), ("report",), ("pipeline", "check"),
]  # fmt: skip
CHOICES = {
    ("model", "train"): {
        "--device": "[cpu|metal|cuda]",
        "--precision": "[f32|bf16]",
        "--decay-scope": "[all|matrices]",
        "--decay-shape": "[cosine|linear]",
    },
    ("checkpoint", "resume"): {"--device": "[cpu|metal|cuda]"},
    ("model", "evaluate"): {"--device": "[cpu|metal|cuda]"},
    ("model", "sample"): {"--device": "[cpu|metal|cuda]"},
}


def help_of(command: tuple[str, ...], columns: int = 300) -> str:
    done = subprocess.run(
        [ZRODLO, *command, "--help"], capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, "COLUMNS": str(columns)},
    )  # fmt: skip
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    return done.stdout


def rows(text: str) -> dict[str, str]:
    """Each option of a --help panel with what its type column shows."""
    found = re.findall(r"^│ [* ]  (--[a-z0-9-]+) +(<\w+>|\[[a-z0-9|]+\])? ", text, re.M)
    return dict(found)


@pytest.mark.slow
@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_every_command_help_ends_with_an_example_of_itself(command):
    text = help_of(command)
    last = [line.strip() for line in text.splitlines() if line.strip()][-1]
    example = re.search(r"Example: (.*?)$", text, re.S)
    assert example, text
    assert example.group(1).split()[: len(command) + 1] == ["zrodlo", *command], last
    assert text.rstrip().endswith(last)


@pytest.mark.slow
@pytest.mark.parametrize(
    "command", [*COMMANDS, ("tokenizer", "import"), ("model", "import")], ids=" ".join
)
def test_every_help_reads_whole_at_80_columns(command):
    """Nothing cut (rich ends what it cuts with an ellipsis), no line past the terminal."""
    text = help_of(command, columns=80)
    assert "…" not in text, text
    assert max(map(len, text.splitlines())) <= 80


@pytest.mark.parametrize("command", list(CHOICES), ids=" ".join)
def test_flags_with_fixed_values_list_them(command):
    shown = rows(help_of(command))
    for flag, values in CHOICES[command].items():
        assert shown[flag] == values, (flag, shown)


def test_shuffle_shows_as_a_switch():
    shown = rows(help_of(("model", "train")))
    assert shown["--shuffle"] == ""


def test_the_command_line_and_its_data_commands_start_without_torch():
    """`zrodlo --help` and the data stages load no torch: it costs seconds a command."""
    code = (
        "import sys; from zrodlo.stages import cli, documents, assign, split, tokenizer, prepare; "
        "print('torch' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout == "False\n"

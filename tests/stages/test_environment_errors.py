"""What the operating system refuses, through the real commands: every command that writes, on a
full disk (a small tmpfs mounted here) and into a read-only directory, prints one sentence naming
the output and the cause, exits 1 and leaves nothing half-written; a run that meets a full disk
midway keeps every earlier checkpoint, and the run continues once there is room.

Mounting needs root; where this machine does not permit it, the tests that mount say so and skip.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from zrodlo.training.checkpoint import read_checkpoint

# In `make test`, not `make check`: full and read-only file systems for every command.
pytestmark = pytest.mark.slow

ZRODLO = Path(sys.executable).parent / "zrodlo"
NO_MOUNT = "mounting a tmpfs or a read-only bind needs root with CAP_SYS_ADMIN, not given here"
FULL = "No space left on device"
READ_ONLY = "Read-only file system"


def mount(*args: object) -> bool:
    return subprocess.run(["mount", *map(str, args)], capture_output=True).returncode == 0


def unmount(point: Path) -> None:
    subprocess.run(["umount", str(point)], capture_output=True, check=True)


def fill(disk: Path, leave: int = 0) -> None:
    """Write a filler file on `disk` until fewer than `leave` bytes are free."""
    with open(disk / "filler", "wb") as handle:
        free = shutil.disk_usage(disk).free - leave
        try:
            while free > 0:
                handle.write(b"\0" * min(free, 1 << 16))
                handle.flush()
                free = shutil.disk_usage(disk).free - leave
        except OSError:
            pass


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs of this test's own, unmounted afterwards."""
    point = tmp_path / "disk"
    point.mkdir()
    if not mount("-t", "tmpfs", "-o", "size=2m", "tmpfs", point):
        pytest.skip(NO_MOUNT)
    try:
        yield point
    finally:
        unmount(point)


@pytest.fixture
def read_only(tmp_path: Path) -> Iterator[Path]:
    """A directory bound read-only onto itself."""
    point = tmp_path / "read-only"
    point.mkdir()
    if not mount("--bind", point, point):
        pytest.skip(NO_MOUNT)
    try:
        if not mount("-o", "remount,bind,ro", point):
            pytest.skip(NO_MOUNT)
        yield point
    finally:
        unmount(point)


@pytest.fixture(scope="module")
def inputs(training_data, trained_run, tmp_path_factory) -> dict[str, Path]:
    """Something to read for every command that writes: documents, splits, a tokenizer, a corpus,
    a model, a run and its scores, all written by the real commands."""
    root = tmp_path_factory.mktemp("inputs")
    many = root / "many.jsonl"  # enough ids that every pool gets some
    many.write_text("".join(json.dumps({"id": f"d{n}", "text": "text"}) + "\n" for n in range(30)))
    splits = root / "splits.json"
    splits.write_text(json.dumps({"train": ["fox"], "validation": ["dog"], "test": ["box"]}))
    folder = root / "texts"
    folder.mkdir()
    (folder / "a.txt").write_text("the quick brown fox")
    corpora = root / "corpora"
    corpora.mkdir()
    shutil.copytree(training_data.corpus, corpora / "train")
    metrics = root / "metrics.json"
    evaluate = [
        "model", "evaluate", "--model", trained_run / "step-6", "--corpus", training_data.corpus,
        "--output", metrics,
    ]  # fmt: skip
    assert subprocess.run([str(ZRODLO), *map(str, evaluate)], capture_output=True).returncode == 0
    return {
        "documents": training_data.documents,
        "many": many,
        "splits": splits,
        "texts": folder,
        "tokenizer": training_data.tokenizer,
        "corpus": training_data.corpus,
        "corpora": corpora,
        "model": training_data.model,
        "run": trained_run,
        "metrics": metrics,
    }


def writers(i: dict[str, Path], train_args, resume_args) -> dict[str, Callable[[Path], list]]:
    """Every command that writes, as the arguments that write `output`."""
    return {
        "documents torch-docs": lambda out: ["documents", "torch-docs", "--output", out],
        "documents import": lambda out: [
            "documents", "import", "--source", i["texts"], "--output", out,
        ],
        "documents assign": lambda out: [
            "documents", "assign", "--documents", i["many"], "--validation", 0.3, "--test", 0.3,
            "--output", out,
        ],
        "documents split": lambda out: [
            "documents", "split", "--documents", i["documents"], "--splits", i["splits"],
            "--output", out,
        ],
        "tokenizer fit": lambda out: [
            "tokenizer", "fit", "--documents", i["documents"], "--output", out,
        ],
        "corpus prepare": lambda out: [
            "corpus", "prepare", "--documents", i["documents"], "--tokenizer", i["tokenizer"],
            "--output", out,
        ],
        "model init": lambda out: [
            "model", "init", "--tokenizer", i["tokenizer"], "--output", out, "--layers", 1,
            "--heads", 2, "--d-model", 16, "--d-ff", 32, "--positions", 16, "--dropout", 0,
            "--seed", 7,
        ],
        "model train": lambda out: train_args(i["model"], i["corpus"], out, 2),
        "checkpoint resume": lambda out: resume_args(i["run"] / "step-4", i["corpus"], out, 6),
        "checkpoint diff": lambda out: [
            "checkpoint", "diff", i["run"], i["run"], "--output", out,
        ],
        "model evaluate": lambda out: [
            "model", "evaluate", "--model", i["run"] / "step-6", "--corpus", i["corpus"],
            "--output", out,
        ],
        "report": lambda out: [
            "report", "--run", i["run"], "--metrics", i["metrics"], "--corpora", i["corpora"],
            "--model", i["run"] / "step-6", "--output", out, "--sample-tokens", 5,
        ],
    }  # fmt: skip


COMMANDS = [
    "documents torch-docs", "documents import", "documents assign", "documents split", "tokenizer fit",
    "corpus prepare", "model init", "model train", "checkpoint resume", "checkpoint diff",
    "model evaluate", "report",
]  # fmt: skip


def assert_write_refused(stderr: str, returncode: int, output: Path, cause: str) -> None:
    """One line, `Error: <path> cannot be written: <cause>`, naming the output or a file in it."""
    match = re.fullmatch(rf"Error: (\S+) cannot be written: {cause}(; [^\n]+)?\n", stderr)
    assert match, stderr
    written = Path(match.group(1))
    assert written == output or output in written.parents, stderr
    assert returncode == 1


@pytest.mark.parametrize("command", COMMANDS)
def test_a_full_disk_is_one_sentence_and_leaves_nothing_half_written(
    disk, inputs, train_args, resume_args, run_zrodlo, snapshot, command
):
    fill(disk)
    before = snapshot(disk)
    output = disk / "out"
    args = writers(inputs, train_args, resume_args)[command](output)
    returncode, _, stderr = run_zrodlo(*args, cwd=disk.parent)
    assert_write_refused(stderr, returncode, output, FULL)
    assert snapshot(disk) == before


@pytest.mark.parametrize("command", COMMANDS)
def test_a_read_only_directory_is_one_sentence_and_nothing_is_written(
    read_only, inputs, train_args, resume_args, run_zrodlo, command
):
    output = read_only / "out"
    args = writers(inputs, train_args, resume_args)[command](output)
    returncode, _, stderr = run_zrodlo(*args, cwd=read_only.parent)
    assert_write_refused(stderr, returncode, output, READ_ONLY)
    assert list(read_only.iterdir()) == []


def test_a_resume_into_its_read_only_run_directory_changes_nothing(
    tmp_path, trained_run, training_data, resume_args, run_zrodlo, snapshot
):
    run = Path(shutil.copytree(trained_run, tmp_path / "run"))
    shutil.rmtree(run / "step-6")
    if not (mount("--bind", run, run) and mount("-o", "remount,bind,ro", run)):
        pytest.skip(NO_MOUNT)
    try:
        before = snapshot(run)
        args = resume_args(run / "step-4", training_data.corpus, run, 6)
        returncode, _, stderr = run_zrodlo(*args, cwd=tmp_path)
        assert_write_refused(stderr, returncode, run, READ_ONLY)
        assert snapshot(run) == before
    finally:
        unmount(run)


def checkpoint_bytes(checkpoint: Path) -> int:
    """What a checkpoint takes on a tmpfs: each file in whole pages."""
    return sum(-(-file.stat().st_size // 4096) * 4096 for file in checkpoint.iterdir())


def test_a_disk_that_fills_midway_keeps_the_checkpoints_before_and_the_run_continues(
    disk, trained_run, dropout_model, training_data, train_args, resume_args, run_zrodlo
):
    run = disk / "run"
    size = checkpoint_bytes(trained_run / "step-2")
    # Room for the records and one checkpoint and a half: the second checkpoint cannot be written.
    fill(disk, leave=8 * 4096 + size + size // 2)
    every = {"--checkpoint-every": 1}
    args = train_args(dropout_model, training_data.corpus, run, 6, every)
    returncode, _, stderr = run_zrodlo(*args, cwd=disk.parent)
    assert stderr == (
        f"Error: {run / 'step-2'} cannot be written: {FULL}; the run stopped at step 2, and its "
        f"newest checkpoint {run / 'step-1'} continues it with zrodlo checkpoint resume\n"
    )
    assert returncode == 1
    assert sorted(p.name for p in run.iterdir() if p.name.startswith((".", "step-"))) == ["step-1"]
    assert read_checkpoint(run / "step-1").step == 1

    (disk / "filler").unlink()
    continued = resume_args(run / "step-1", training_data.corpus, run, 6, every)
    returncode, _, stderr = run_zrodlo(*continued, cwd=disk.parent)
    assert (returncode, stderr) == (0, "")
    for name in ("model.safetensors", "optimizer.safetensors"):
        assert (run / "step-6" / name).read_bytes() == (trained_run / "step-6" / name).read_bytes()
    assert (run / "steps.csv").read_text() == (trained_run / "steps.csv").read_text()


@pytest.mark.parametrize("command", ["checkpoint diff", "model evaluate"])
def test_an_output_file_under_a_file_is_refused(
    tmp_path, inputs, train_args, resume_args, assert_refused_in_process, command
):
    (tmp_path / "reports").write_text("mine")
    output = tmp_path / "reports" / "out.json"
    assert_refused_in_process(
        *writers(inputs, train_args, resume_args)[command](output),
        sentence=f"{output} cannot be written: {output.parent} is not a directory, so it cannot "
        "hold the output",
    )


@pytest.mark.parametrize("command", ["checkpoint diff", "model evaluate"])
def test_an_output_file_that_is_a_directory_is_refused(
    tmp_path, inputs, train_args, resume_args, assert_refused_in_process, command
):
    output = tmp_path / "out.json"
    output.mkdir()
    assert_refused_in_process(
        *writers(inputs, train_args, resume_args)[command](output),
        sentence=f"{output} is a directory; Zrodlo writes a file there, so name a file",
    )


def test_a_timing_file_on_a_full_disk_is_refused_and_none_is_left(
    disk, training_data, dropout_model, train_args, run_zrodlo, tmp_path
):
    fill(disk)
    timing = disk / "timing.csv"
    args = train_args(
        dropout_model, training_data.corpus, tmp_path / "run", 2, {"--timing": timing}
    )
    returncode, stdout, stderr = run_zrodlo(*args, cwd=tmp_path)
    assert_write_refused(stderr, returncode, timing, "No space left on device")
    assert stdout == ""
    assert sorted(p.name for p in disk.iterdir()) == ["filler"]
    assert not (tmp_path / "run").exists()


def test_a_timing_file_on_a_read_only_disk_is_refused_before_the_run_writes(
    read_only, training_data, dropout_model, train_args, run_zrodlo, tmp_path
):
    timing, run = read_only / "logs" / "timing.csv", tmp_path / "run"
    args = train_args(dropout_model, training_data.corpus, run, 2, {"--timing": timing})
    returncode, stdout, stderr = run_zrodlo(*args, cwd=tmp_path)
    assert stderr == f"Error: {timing} cannot be written: {READ_ONLY}\n"
    assert (returncode, stdout, run.exists()) == (1, "", False)

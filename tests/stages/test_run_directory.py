"""A run directory that nothing silently destroys, through the real commands: a second run into it,
a second writer while it is written, a resume past its later checkpoints, retention beside another
run's checkpoint, a killed write's temporary read as a model, and a ledger a kill cut short."""

from __future__ import annotations

import json
import re
import shutil
import signal
import time
from pathlib import Path

import pytest

# In `make test`, not `make check`: second runs and writers into a run directory, each a real training.
pytestmark = pytest.mark.slow

ONE_THREAD = {"OMP_NUM_THREADS": "1"}
HOLD_ONE_RUN = "; a run directory holds one run, so write this one into a new directory"


def held_run(run: Path) -> str:
    return json.loads((run / "run.json").read_text())["run"]


def succeed(run_zrodlo, *args: object, cwd: Path) -> str:
    returncode, stdout, stderr = run_zrodlo(*args, cwd=cwd)
    assert (returncode, stderr) == (0, ""), args
    return stdout


@pytest.fixture
def run(tmp_path: Path, trained_run: Path) -> Path:
    """A copy of trained_run (step-2, step-4 and step-6 of 6) in this test's directory."""
    return Path(shutil.copytree(trained_run, tmp_path / "run"))


@pytest.mark.parametrize("keep", [None, 1])
def test_a_second_train_into_a_run_directory_is_refused_and_the_first_run_kept(
    tmp_path, dropout_model, training_data, train_args, run_zrodlo, snapshot, keep
):
    corpus, run = training_data.corpus, tmp_path / "R"
    first = train_args(dropout_model, corpus, run, 10, {"--checkpoint-every": 5, "--seed": 11})
    succeed(run_zrodlo, *first, cwd=tmp_path)
    before = snapshot(run)
    second = {"--checkpoint-every": 3, "--keep-checkpoints": keep, "--seed": 12}
    # The run the second command is: what it writes into a directory of its own.
    succeed(
        run_zrodlo, *train_args(dropout_model, corpus, tmp_path / "alone", 4, second), cwd=tmp_path
    )

    returncode, stdout, stderr = run_zrodlo(
        *train_args(dropout_model, corpus, run, 4, second), cwd=tmp_path
    )
    assert stderr == (
        f"Error: {run} holds run {held_run(run)}, and this is run {held_run(tmp_path / 'alone')}"
        f"{HOLD_ONE_RUN}\n"
    )
    assert (returncode, stdout) == (1, "")
    assert snapshot(run) == before
    assert held_run(run) != held_run(tmp_path / "alone")


def test_the_same_run_again_into_its_directory_is_refused_past_its_checkpoints(
    tmp_path, dropout_model, training_data, train_args, run_zrodlo, assert_refused_in_process
):
    """The same flags name the same run, but a start from step 0 would cut the records of step-5
    and step-10, which none of its planned checkpoints collides with."""
    run, flags = tmp_path / "R", {"--checkpoint-every": 5}
    succeed(
        run_zrodlo, *train_args(dropout_model, training_data.corpus, run, 10, flags), cwd=tmp_path
    )
    newest = run / "step-10"
    assert_refused_in_process(
        *train_args(dropout_model, training_data.corpus, run, 3, flags),
        sentence=f"{run} holds {newest}, a checkpoint past step 0 where this run starts; "
        f"starting there would cut the records {newest} continues, so resume from {newest}, or "
        "write into a new directory",
    )


@pytest.mark.slow
def test_a_second_writer_is_refused_naming_the_first_and_its_records_stay_its_own(
    tmp_path,
    dropout_model,
    trained_run,
    training_data,
    train_args,
    resume_args,
    start_zrodlo,
    run_zrodlo,
):
    corpus, run = training_data.corpus, tmp_path / "R"
    # Long enough that it is still writing when the second command has started up.
    args = train_args(dropout_model, corpus, run, 100_000, {"--checkpoint-every": 20})
    first = start_zrodlo(*args, cwd=tmp_path, env=ONE_THREAD)
    try:
        while not (run / "step-20").exists():
            assert first.poll() is None, first.communicate()
            time.sleep(0.01)
        sentence = (
            f"Error: {run} is being written by process {first.pid} (zrodlo model train); a run "
            "directory has one writer at a time, so wait for it to end or write into another "
            "directory\n"
        )
        others = [
            train_args(dropout_model, corpus, run, 3, {"--checkpoint-every": 1, "--seed": 12}),
            resume_args(trained_run / "step-2", corpus, run, 3, {"--checkpoint-every": 1}),
            args,
        ]
        for other in others:
            assert run_zrodlo(*other, cwd=tmp_path) == (1, "", sentence), other
        assert first.poll() is None  # the refusals came while it wrote
    finally:
        first.send_signal(signal.SIGKILL)
        first.communicate()

    # Every record is the first run's, in order; no checkpoint is another run's.
    rows = (run / "steps.csv").read_text().splitlines()[1:]
    complete = rows if rows[-1].count(",") == 5 else rows[:-1]
    assert [int(row.split(",")[0]) for row in complete] == list(range(1, len(complete) + 1))
    names = {p.name for p in run.iterdir()} - {"run.json", "steps.csv", "ledger.jsonl"}
    names -= {"timing.csv", "held_out.csv"}
    steps = sorted(int(n.removeprefix("step-")) for n in names if n.startswith("step-"))
    assert steps and steps == list(range(20, 20 * len(steps) + 1, 20))
    # The kill released the lock: the run continues from its newest checkpoint in place.
    newest = run / f"step-{steps[-1]}"
    continued = resume_args(newest, corpus, run, steps[-1] + 1)
    assert run_zrodlo(*continued, cwd=tmp_path)[0] == 0


def test_a_resume_into_its_own_directory_past_later_checkpoints_is_refused(
    run, training_data, resume_args, assert_refused_in_process
):
    newest = run / "step-6"
    assert_refused_in_process(
        *resume_args(run / "step-2", training_data.corpus, run, 3),
        sentence=f"{run} holds {newest}, a checkpoint past step 2 where this run starts; "
        f"starting there would cut the records {newest} continues, so resume from {newest}, or "
        "write into a new directory",
    )


def test_retention_never_removes_a_checkpoint_of_another_run(
    tmp_path,
    run,
    dropout_model,
    training_data,
    train_args,
    resume_args,
    run_zrodlo,
    assert_refused_in_process,
):
    other = tmp_path / "other"
    flags = {"--checkpoint-every": 1, "--seed": 12}
    succeed(
        run_zrodlo, *train_args(dropout_model, training_data.corpus, other, 1, flags), cwd=tmp_path
    )
    shutil.rmtree(run / "step-6")
    stranger = Path(shutil.copytree(other / "step-1", run / "step-1"))
    keep = {"--keep-checkpoints": 1}
    assert_refused_in_process(
        *resume_args(run / "step-4", training_data.corpus, run, 6, keep),
        sentence=f"{stranger} belongs to run {held_run(other)}, and the run written into {run} "
        f"is {held_run(run)}; retention removes only its own run's checkpoints, so move it out",
    )


@pytest.mark.parametrize("command", ["evaluate", "sample", "train"])
def test_a_killed_writes_temporary_is_refused_as_a_model(
    tmp_path, trained_run, training_data, train_args, assert_refused_in_process, command
):
    leftover = Path(shutil.copytree(trained_run / "step-6", tmp_path / ".step-6.partial-4194305"))
    corpus = training_data.corpus
    args = {
        "evaluate": ["model", "evaluate", "--model", leftover, "--corpus", corpus],
        "sample": ["model", "sample", "--model", leftover, "--seed", 1],
        "train": train_args(leftover, corpus, tmp_path / "run", 2),
    }[command]
    assert_refused_in_process(
        *args,
        sentence=f"{leftover} is a temporary that a write left unfinished; only a model directory "
        "or checkpoint renamed into place can be read",
    )


def test_diff_reads_a_ledger_whose_last_line_a_kill_cut(tmp_path, run, trained_run, run_zrodlo):
    ledger = run / "ledger.jsonl"
    ledger.write_bytes(ledger.read_bytes()[:-40])  # inside step 6's checkpoint line
    returncode, stdout, stderr = run_zrodlo("checkpoint", "diff", trained_run, run, cwd=tmp_path)
    assert (returncode, stdout, stderr) == (0, "the runs agree on all 6 steps both recorded\n", "")


def test_diff_refuses_a_ledger_line_that_does_not_load(tmp_path, run, trained_run, run_zrodlo):
    ledger = run / "ledger.jsonl"
    lines = ledger.read_text().splitlines(keepends=True)
    ledger.write_text("".join([lines[0], "{not json\n", *lines[2:]]))
    returncode, stdout, stderr = run_zrodlo("checkpoint", "diff", trained_run, run, cwd=tmp_path)
    assert (returncode, stdout) == (1, "")
    assert re.fullmatch(
        rf"Error: {re.escape(str(ledger))} line 2 does not load as a ledger entry: .+\n", stderr
    )

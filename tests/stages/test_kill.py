"""Fault injection: the real `zrodlo model train` and `zrodlo checkpoint resume` killed with SIGKILL
at random moments, then continued the way a user would. Whatever the moment, every step-<n> left
behind is a whole checkpoint, and the continued run ends byte for byte where the uninterrupted one
does.

ZRODLO_FULL_TESTS=1 kills 20 runs (and half of their resumes); the default run kills 3.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from zrodlo.data.corpus import Corpus
from zrodlo.training.checkpoint import read_checkpoint, read_model
from zrodlo.training.loop import fresh_provenance, run_updates
from zrodlo.training.score import check_data
from zrodlo.training.step import Trainer

# In `make test`, not `make check`: real runs killed at random moments and resumed.
pytestmark = pytest.mark.slow

FULL = os.environ.get("ZRODLO_FULL_TESTS") == "1"
SCENARIOS = 20 if FULL else 3
STEPS = 60
EVERY_STEP = {"--checkpoint-every": 1}
# One thread: a tiny model steps faster without threads waiting for each other, and a resume takes
# the thread count its checkpoint records, so every run here computes the same way.
ONE_THREAD = {"OMP_NUM_THREADS": "1"}
KILL_SEED = 20261129
CHECKPOINT = re.compile(r"step-(\d+)")
TEMPORARY = re.compile(r"\.step-(\d+)\.partial-(\d+)")
RECORDS = {"run.json", "steps.csv", "ledger.jsonl", "timing.csv", "held_out.csv"}


@dataclass(frozen=True)
class Reference:
    run: Path
    seconds: float  # from the first record written to the last checkpoint: where kills land


def finish(process: subprocess.Popen) -> None:
    _, stderr = process.communicate(timeout=300)
    assert (process.returncode, stderr) == (0, "")


def _stamp(file: Path) -> tuple[int, int, int] | None:
    try:
        status = file.stat()
    except FileNotFoundError:
        return None
    return status.st_ino, status.st_size, status.st_mtime_ns


def wait_for_writes(process: subprocess.Popen, run: Path) -> bool:
    """Wait until `process` writes to the run's ledger, past its start-up (importing torch takes
    most of a short command's time); False if it ended first."""
    ledger = run / "ledger.jsonl"
    before = _stamp(ledger)
    while _stamp(ledger) == before:
        if process.poll() is not None:
            return False
        time.sleep(0.0005)
    return True


def run_until(process: subprocess.Popen, run: Path, seconds: float) -> bool:
    """Kill `process` with SIGKILL `seconds` after it starts writing to `run`, unless it ends
    first; return whether it was killed."""
    if wait_for_writes(process, run):
        try:
            process.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGKILL)
            process.communicate()
            assert process.returncode == -signal.SIGKILL
            return True
    finish(process)
    return False


@pytest.fixture(scope="module")
def reference(tmp_path_factory, dropout_model, training_data, train_args, start_zrodlo):
    """The uninterrupted run, computed once: STEPS steps, a checkpoint after every one."""
    run = tmp_path_factory.mktemp("uninterrupted") / "run"
    args = train_args(dropout_model, training_data.corpus, run, STEPS, EVERY_STEP)
    process = start_zrodlo(*args, cwd=run.parent, env=ONE_THREAD)
    assert wait_for_writes(process, run)
    started = time.monotonic()
    while not (run / f"step-{STEPS}").exists() and process.poll() is None:
        time.sleep(0.0005)
    seconds = time.monotonic() - started
    finish(process)
    return Reference(run, seconds)


def whole_checkpoints(run: Path) -> list[int]:
    """The steps of the run's checkpoints, oldest first, each one read back whole (every file
    present and matching its digest); besides them a run holds only its records and temporaries."""
    steps = []
    for entry in run.iterdir() if run.exists() else []:
        if match := CHECKPOINT.fullmatch(entry.name):
            assert read_checkpoint(entry).step == int(match.group(1)), entry
            steps.append(int(match.group(1)))
        else:
            temporary = TEMPORARY.fullmatch(entry.name)
            assert temporary or entry.name.removesuffix(".partial") in RECORDS, entry
    return sorted(steps)


def continuation(run: Path, corpus: Path, model: Path, train_args, resume_args) -> list[object]:
    """What a user runs next: resume from the newest checkpoint into the same run directory, or,
    when the kill came before the first checkpoint, delete the run and train it again."""
    steps = whole_checkpoints(run)
    if not steps:
        shutil.rmtree(run, ignore_errors=True)
        return train_args(model, corpus, run, STEPS, EVERY_STEP)
    return resume_args(run / f"step-{steps[-1]}", corpus, run, STEPS, EVERY_STEP)


def assert_equal_runs(run: Path, reference: Path) -> None:
    last = f"step-{STEPS}"
    for name in ("model.safetensors", "optimizer.safetensors"):
        assert (run / last / name).read_bytes() == (reference / last / name).read_bytes(), name
    for name in sorted(RECORDS - {"timing.csv", "ledger.jsonl"}):
        if (reference / name).exists():
            assert (run / name).read_text() == (reference / name).read_text(), name
    ledger = (run / "ledger.jsonl").read_text().splitlines(keepends=True)
    expected = (reference / "ledger.jsonl").read_text().splitlines(keepends=True)
    # A kill after the last checkpoint was renamed into place, before its digests reached the
    # ledger, leaves a finished run that no command continues: only that line may be missing.
    assert ledger in (expected, expected[:-1])
    assert sorted(p.name for p in run.iterdir()) == sorted(p.name for p in reference.iterdir())


@pytest.mark.slow
@pytest.mark.parametrize("scenario", range(SCENARIOS))
def test_a_run_killed_at_a_random_moment_continues_to_the_uninterrupted_result(
    scenario,
    tmp_path,
    reference,
    dropout_model,
    training_data,
    train_args,
    resume_args,
    start_zrodlo,
):
    rng = random.Random(KILL_SEED + scenario)
    # Scenario i kills the training in the i-th slice of the time the reference run spent past
    # its start-up, so the kills spread from the first step to the last checkpoint; every other
    # scenario kills its resume too.
    delay = reference.seconds * (scenario + rng.random()) / SCENARIOS
    second_kill = rng.random() if scenario % 2 else None
    run, corpus = tmp_path / "run", training_data.corpus
    args = train_args(dropout_model, corpus, run, STEPS, EVERY_STEP)

    while not run_until(start_zrodlo(*args, cwd=tmp_path, env=ONE_THREAD), run, delay):
        shutil.rmtree(run)  # it ended first: this machine is faster now than for the reference
        delay /= 2
    done = whole_checkpoints(run)[-1:]
    if second_kill is not None and done != [STEPS]:
        left = reference.seconds * (STEPS - (done or [0])[0]) / STEPS
        args = continuation(run, corpus, dropout_model, train_args, resume_args)
        run_until(start_zrodlo(*args, cwd=tmp_path, env=ONE_THREAD), run, second_kill * left)
    if whole_checkpoints(run)[-1:] != [STEPS]:
        args = continuation(run, corpus, dropout_model, train_args, resume_args)
        finish(start_zrodlo(*args, cwd=tmp_path, env=ONE_THREAD))

    assert_equal_runs(run, reference.run)


# A kill inside a checkpoint write: a model large enough that writing its checkpoint takes a
# while, and the kill sent as soon as the temporary directory of a write appears.


def kill_inside_a_write(run: Path, process: subprocess.Popen, least_step: int) -> Path | None:
    """Kill `process` inside the checkpoint write of step `least_step` or later, once the write's
    temporary directory holds model.safetensors (its weights possibly half written); None if the
    process ended first."""
    temporary = None
    while process.poll() is None:
        if temporary is None:
            for entry in os.scandir(run) if run.exists() else []:
                match = TEMPORARY.fullmatch(entry.name)
                if match and int(match.group(1)) >= least_step:
                    temporary = run / entry.name
        if temporary is not None and (temporary / "model.safetensors").exists():
            process.send_signal(signal.SIGKILL)
            process.communicate()
            return temporary
        time.sleep(0.0002)
    process.communicate()
    return temporary


@pytest.mark.slow
def test_a_kill_during_a_checkpoint_write_leaves_a_temporary_no_resume_accepts(
    tmp_path,
    large_model,
    training_data,
    train_args,
    resume_args,
    start_zrodlo,
    assert_refused_in_process,
):
    corpus = training_data.corpus
    for attempt in range(10):
        run = tmp_path / f"run-{attempt}"
        args = train_args(large_model, corpus, run, 10, EVERY_STEP)
        process = start_zrodlo(*args, cwd=tmp_path, env=ONE_THREAD)
        temporary = kill_inside_a_write(run, process, 2)
        # Retried when the write got as far as trainer.json (or renamed) before the kill landed.
        if (
            temporary is not None
            and temporary.is_dir()
            and not (temporary / "trainer.json").exists()
        ):
            break
    else:
        pytest.fail("no kill landed inside a checkpoint write in 10 runs")

    steps = whole_checkpoints(run)
    step = int(TEMPORARY.fullmatch(temporary.name).group(1))
    assert steps == list(range(1, step))
    assert_refused_in_process(
        *resume_args(temporary, corpus, tmp_path / "resumed", step + 1),
        sentence=f"{temporary} cannot be read; only a checkpoint can be resumed",
    )

    # The next write in that run removes it.
    args = resume_args(run / f"step-{step - 1}", corpus, run, step, EVERY_STEP)
    finish(start_zrodlo(*args, cwd=tmp_path))
    assert not temporary.exists()
    assert whole_checkpoints(run) == list(range(1, step + 1))
    assert not [p for p in run.iterdir() if TEMPORARY.fullmatch(p.name)]


# Retention deletes old checkpoints while the run goes on, so a kill can land inside a deletion.
# The kill is stood in for here, in this process, by an exception where the deletion's second
# file would go: what a SIGKILL between two unlinks leaves.


class Killed(BaseException):
    """Stands for SIGKILL: raised inside the library, it lets nothing after it run."""


def test_a_kill_while_retention_deletes_an_old_checkpoint_leaves_only_whole_checkpoints(
    tmp_path, dropout_model, training_data, resume_args, start_zrodlo, small_plan, monkeypatch
):
    plan = small_plan(steps=4, shuffle=True, checkpoint_every=1, keep_checkpoints=2)
    model, corpus = read_model(dropout_model), Corpus.open(training_data.corpus)
    table = check_data(corpus, model, plan.context)
    trainer = Trainer.start(plan, model, corpus.tokens, table, torch.device("cpu"))
    provenance = fresh_provenance(model, corpus.digest, plan)

    def killed_after_the_first_file(path, *args, **kwargs):
        os.unlink(next(os.scandir(path)).path)
        raise Killed

    run = tmp_path / "run"
    monkeypatch.setattr(shutil, "rmtree", killed_after_the_first_file)
    with pytest.raises(Killed):
        run_updates(trainer, plan, 0, run, model, provenance)  # killed removing step-1 after step 3
    monkeypatch.undo()

    assert [p.name for p in run.glob("step-*")] and whole_checkpoints(run)
    # And the run continues with the flags it was started with.
    args = resume_args(run / "step-3", training_data.corpus, run, 4, {"--keep-checkpoints": 2})
    finish(start_zrodlo(*args, "--checkpoint-every", 1, cwd=tmp_path))
    assert whole_checkpoints(run) == [3, 4]


# A kill inside retention, in the directory of a second run: a resume of the first run's
# checkpoint into a new directory, which keeps one checkpoint and so deletes the one before it
# after every write. Whatever the kill cuts short there, the first run's directory is untouched and
# the second run continues to the first run's result.


def kill_inside_retention(run: Path, process: subprocess.Popen) -> Path | None:
    """Kill `process` while it deletes an old checkpoint of `run`: once an older step's temporary
    sits beside a newer checkpoint (a write's temporary is always the newest step). The temporary,
    or None if the process ended first."""
    while process.poll() is None:
        entries = [entry.name for entry in os.scandir(run)] if run.exists() else []
        newest = max(
            (int(m.group(1)) for n in entries if (m := CHECKPOINT.fullmatch(n))), default=0
        )
        for name in entries:
            match = TEMPORARY.fullmatch(name)
            if match and int(match.group(1)) < newest:
                process.send_signal(signal.SIGKILL)
                process.communicate()
                return run / name
        time.sleep(0.0001)
    process.communicate()
    return None


@pytest.mark.slow
def test_a_kill_during_retention_in_a_second_runs_directory_spares_the_first_run(
    tmp_path, large_model, training_data, train_args, resume_args, start_zrodlo, snapshot
):
    corpus, first = training_data.corpus, tmp_path / "first"
    finish(
        start_zrodlo(
            *train_args(large_model, corpus, first, 8, EVERY_STEP), cwd=tmp_path, env=ONE_THREAD
        )
    )
    before = snapshot(first)
    keep = {**EVERY_STEP, "--keep-checkpoints": 1}
    for attempt in range(10):
        second = tmp_path / f"second-{attempt}"
        args = resume_args(first / "step-2", corpus, second, 8, keep)
        temporary = kill_inside_retention(second, start_zrodlo(*args, cwd=tmp_path, env=ONE_THREAD))
        if temporary is not None and temporary.exists():
            break
    else:
        pytest.fail("no kill landed inside a retention in 10 runs")

    assert snapshot(first) == before
    steps = whole_checkpoints(second)
    assert steps and steps[-1] < 8
    args = resume_args(second / f"step-{steps[-1]}", corpus, second, 8, keep)
    finish(start_zrodlo(*args, cwd=tmp_path, env=ONE_THREAD))
    assert whole_checkpoints(second) == [8]
    assert not temporary.exists()
    for name in ("model.safetensors", "optimizer.safetensors"):
        assert (second / "step-8" / name).read_bytes() == (first / "step-8" / name).read_bytes()
    rows = (first / "steps.csv").read_text().splitlines(keepends=True)
    assert (second / "steps.csv").read_text() == "".join([rows[0], *rows[3:]])
    assert snapshot(first) == before

"""Data-parallel runs: real worker processes over gloo on 127.0.0.1, started by `--processes` and by
`torchrun`, equal to the one-process run to the bit, and resumed at another number of processes.

Every run here computes on one thread a process (OMP_NUM_THREADS=1), the one-process run included:
the promise is bit-equality at the same threads per process.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ZRODLO = Path(sys.executable).parent / "zrodlo"
TORCHRUN = Path(sys.executable).parent / "torchrun"
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "GLOO_SOCKET_IFNAME": "lo", "COLUMNS": "200"}
# 8 windows a step in micro-batches of 2: 4 micro-batches, which 1, 2 and 4 processes divide.
# Shuffle, dropout (dropout_model), clipping, warmup and decay and held-out scoring all on.
FLAGS = {"--batch-size": 8, "--checkpoint-every": 2, "--eval-every": 2}
STEPS = 6
SAME = ("model.safetensors", "optimizer.safetensors", "config.json", "tokenizer.json", "model.json")


def run(*args: object, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(arg) for arg in args], cwd=cwd, env=ENV, capture_output=True, text=True,
        timeout=timeout, check=False,
    )  # fmt: skip


def start(*args: object, cwd: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [str(arg) for arg in args], cwd=cwd, env=ENV, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def training(train_args, training_data, dropout_model, output: Path, *extra: object) -> list:
    flags = {**FLAGS, "--eval-corpus": training_data.held_out}
    return [*train_args(dropout_model, training_data.corpus, output, STEPS, flags), *extra]


def assert_same_run(first: Path, second: Path) -> None:
    """The same weights, AdamW state, ledger and records at every checkpoint of both runs."""
    for name in ("ledger.jsonl", "steps.csv", "held_out.csv", "run.json"):
        assert (first / name).read_bytes() == (second / name).read_bytes(), name
    for step in range(2, STEPS + 1, 2):
        for name in SAME:
            a, b = first / f"step-{step}" / name, second / f"step-{step}" / name
            assert a.read_bytes() == b.read_bytes(), (step, name)


@pytest.fixture(scope="module")
def alone(train_args, training_data, dropout_model, tmp_path_factory) -> Path:
    """The one-process run every other run here must equal."""
    output = tmp_path_factory.mktemp("alone") / "run"
    done = run(
        ZRODLO, *training(train_args, training_data, dropout_model, output), cwd=output.parent
    )
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    return output


@pytest.mark.parametrize("processes", [2, 4])
def test_processes_make_the_one_process_run_to_the_bit(
    processes, alone, train_args, training_data, dropout_model, tmp_path
):
    output = tmp_path / "run"
    args = training(train_args, training_data, dropout_model, output, "--processes", processes)
    done = run(ZRODLO, *args, cwd=tmp_path)
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    assert done.stdout.endswith(
        f"wrote 3 checkpoints into {output}; the last is {output / f'step-{STEPS}'}\n"
    )
    assert done.stdout.count("step 1/") == 1  # progress is process 0's alone
    assert_same_run(alone, output)
    trainer = (output / f"step-{STEPS}" / "trainer.json").read_text()
    assert f'"processes": {processes}' in trainer and '"threads": 1' in trainer


def test_torchrun_makes_the_one_process_run(
    alone, train_args, training_data, dropout_model, tmp_path
):
    output = tmp_path / "run"
    args = training(train_args, training_data, dropout_model, output)
    done = run(TORCHRUN, "--standalone", "--nproc-per-node", 2, ZRODLO, *args, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert_same_run(alone, output)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_two_torchrun_nodes_make_the_one_process_run(
    alone, train_args, training_data, dropout_model, tmp_path
):
    # Two "machines" on this one, meeting at a rendezvous on 127.0.0.1.
    output = tmp_path / "run"
    args = training(train_args, training_data, dropout_model, output)
    rendezvous = [
        "--nnodes", 2, "--nproc-per-node", 1, "--rdzv-backend", "c10d",
        "--rdzv-endpoint", f"127.0.0.1:{free_port()}", "--rdzv-id", "two-nodes",
    ]  # fmt: skip
    node = (TORCHRUN, *rendezvous, "--node-rank")
    nodes = [start(*node, rank, ZRODLO, *args, cwd=tmp_path) for rank in (0, 1)]
    ended = [node.communicate(timeout=300) for node in nodes]
    assert [node.returncode for node in nodes] == [0, 0], ended
    assert_same_run(alone, output)


@pytest.mark.parametrize(("before", "after"), [(1, 2), (2, 1)])
def test_a_checkpoint_resumes_at_another_number_of_processes(
    before, after, alone, train_args, training_data, dropout_model, resume_args, tmp_path
):
    first = tmp_path / "first"
    if before == 1:
        first = alone
    else:
        args = training(train_args, training_data, dropout_model, first, "--processes", before)
        assert run(ZRODLO, *args, cwd=tmp_path).returncode == 0
    resumed = tmp_path / "resumed"
    flags = {"--eval-corpus": training_data.held_out, "--eval-every": 2, "--checkpoint-every": 2}
    args = resume_args(first / "step-2", training_data.corpus, resumed, STEPS, flags)
    done = run(ZRODLO, *args, "--processes", after, cwd=tmp_path)
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    for step in (4, 6):
        for name in ("model.safetensors", "optimizer.safetensors"):
            straight = (alone / f"step-{step}" / name).read_bytes()
            assert (resumed / f"step-{step}" / name).read_bytes() == straight, (step, name)
    compared = run(ZRODLO, "checkpoint", "diff", alone, resumed, cwd=tmp_path)
    assert compared.stdout == "the runs agree on all 4 steps both recorded\n"


def test_processes_that_do_not_divide_the_micro_batches_are_refused(
    train_args, training_data, dropout_model, tmp_path, snapshot
):
    before = snapshot(tmp_path), snapshot(training_data.root)
    args = training(train_args, training_data, dropout_model, tmp_path / "run", "--processes", 3)
    done = run(ZRODLO, *args, cwd=tmp_path)
    assert done.stderr == (
        "Error: 3 processes do not divide the 4 micro-batches of a step (--batch-size 8 in "
        "micro-batches of 2); every process computes an equal share of each step\n"
    )
    assert (done.returncode, done.stdout) == (1, "")
    assert (snapshot(tmp_path), snapshot(training_data.root)) == before


def test_a_refusal_of_process_0_is_printed_once_and_ends_every_process(
    alone, train_args, training_data, dropout_model, tmp_path, snapshot
):
    # Only process 0 looks into the run directory; it holds the planned checkpoints already.
    output = Path(shutil.copytree(alone, tmp_path / "run"))
    before = snapshot(tmp_path)
    args = training(train_args, training_data, dropout_model, output, "--processes", 2)
    done = run(ZRODLO, *args, cwd=tmp_path)
    assert done.stderr == (
        f"Error: {output / 'step-2'} already exists; Zrodlo writes a new directory and "
        "overwrites nothing\n"
    )
    assert (done.returncode, done.stdout) == (1, "")
    assert snapshot(tmp_path) == before


def test_a_killed_process_ends_the_run_and_its_checkpoints_resume_exactly(
    train_args, training_data, dropout_model, resume_args, tmp_path
):
    steps = 200
    flags = {"--batch-size": 8, "--checkpoint-every": 1, "--keep-checkpoints": 3}
    straight = tmp_path / "straight"
    args = train_args(dropout_model, training_data.corpus, straight, steps, flags)
    assert run(ZRODLO, *args, cwd=tmp_path).returncode == 0

    killed = tmp_path / "killed"
    args = train_args(dropout_model, training_data.corpus, killed, steps, flags)
    launcher = start(ZRODLO, *args, "--processes", 2, cwd=tmp_path)
    worker = wait_for_worker(launcher.pid, rank=1, until=lambda: (killed / "step-5").is_dir())
    os.kill(worker, signal.SIGKILL)
    started = time.monotonic()
    _, stderr = launcher.communicate(timeout=120)  # stdout holds the progress lines
    assert time.monotonic() - started < 60
    assert launcher.returncode == 1
    assert stderr == (
        "Error: process 1 of 2 was killed by SIGKILL; every process of the run has stopped, "
        "and the checkpoints already written are whole\n"
    )
    newest = max(
        (p for p in killed.iterdir() if p.name.startswith("step-")),
        key=lambda p: int(p.name.removeprefix("step-")),
    )
    resumed = tmp_path / "resumed"
    done = run(ZRODLO, *resume_args(newest, training_data.corpus, resumed, steps), cwd=tmp_path)
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    for name in ("model.safetensors", "optimizer.safetensors"):
        last = f"step-{steps}/{name}"
        assert (resumed / last).read_bytes() == (straight / last).read_bytes(), name


def wait_for_worker(launcher: int, rank: int, until) -> int:
    """The pid of worker `rank` of the run `launcher` started, once `until()` holds."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if until():
            for child in Path(f"/proc/{launcher}/task/{launcher}/children").read_text().split():
                environ = Path(f"/proc/{child}/environ").read_bytes().split(b"\0")
                if f"RANK={rank}".encode() in environ:
                    return int(child)
        time.sleep(0.05)
    raise AssertionError("the run did not reach its checkpoint in time")

"""Data-parallel runs: real worker processes over gloo on 127.0.0.1, started by `--processes` and by
`torchrun`, equal to the one-process run to the bit, and resumed at another number of processes.

Every run here computes on one thread a process (OMP_NUM_THREADS=1), the one-process run included:
the promise is bit-equality at the same threads per process.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from zrodlo.training.checkpoint import read_checkpoint

# In `make test`, not `make check`: real worker processes over gloo.
pytestmark = pytest.mark.slow

ZRODLO = Path(sys.executable).parent / "zrodlo"
TORCHRUN = Path(sys.executable).parent / "torchrun"
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "GLOO_SOCKET_IFNAME": "lo", "COLUMNS": "200"}
# 8 windows a step in micro-batches of 2: 4 micro-batches, which 1, 2 and 4 processes divide.
# Shuffle, dropout (dropout_model), clipping, warmup and decay and held-out scoring all on.
FLAGS = {"--batch-size": 8, "--checkpoint-every": 2, "--eval-every": 2}
STEPS = 6
TEMPORARY = re.compile(r"\.step-(\d+)\.partial-\d+")  # a checkpoint being written
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


# Two processes make it too, in the resumes at another number of processes below (1 to 2, 2 to 1);
# ZRODLO_FULL_TESTS=1 runs two here as well.
@pytest.mark.parametrize("processes", [2, 4] if os.environ.get("ZRODLO_FULL_TESTS") == "1" else [4])
def test_processes_make_the_one_process_run_to_the_bit(
    processes, alone, train_args, training_data, dropout_model, tmp_path
):
    output = tmp_path / "run"
    args = training(train_args, training_data, dropout_model, output, "--processes", processes)
    done = run(ZRODLO, *args, cwd=tmp_path)
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    # The summary line ends with the share of wall time the held-out scores took.
    assert re.search(
        re.escape(f"wrote 3 checkpoints into {output}; the last is {output / f'step-{STEPS}'}")
        + r"; held-out scores took \d+\.\d% of the run's wall time \(\d+\.\d of \d+\.\d s\)\n$",
        done.stdout,
    ), done.stdout
    assert done.stdout.count("step 1/") == 1  # progress is process 0's alone
    assert_same_run(alone, output)
    trainer = (output / f"step-{STEPS}" / "trainer.json").read_text()
    assert f'"processes": {processes}' in trainer and '"threads": 1' in trainer


def test_threads_per_process_reach_every_worker_and_the_run_stays_the_one_process_run(
    train_args, training_data, dropout_model, tmp_path
):
    # The run's bits depend on the threads of each process, so --threads goes to every worker.
    alone, shared = tmp_path / "alone", tmp_path / "shared"
    for output, extra in ((alone, ()), (shared, ("--processes", 2))):
        args = training(train_args, training_data, dropout_model, output, "--threads", 2, *extra)
        done = run(ZRODLO, *args, cwd=tmp_path)
        assert (done.returncode, done.stderr) == (0, ""), done.stderr
    assert_same_run(alone, shared)
    environment = json.loads((shared / f"step-{STEPS}" / "trainer.json").read_text())
    assert (environment["environment"]["threads"], environment["environment"]["processes"]) == (
        2,
        2,
    )


def test_no_threads_is_refused_before_anything_is_written(
    train_args, training_data, dropout_model, tmp_path, snapshot
):
    before = snapshot(tmp_path)
    args = training(train_args, training_data, dropout_model, tmp_path / "run", "--threads", 0)
    done = run(ZRODLO, *args, "--processes", 2, cwd=tmp_path)
    assert done.stderr == "Error: --threads is 0; it must be a whole number of one or more\n"
    assert (done.returncode, done.stdout) == (1, "")
    assert snapshot(tmp_path) == before


def test_torchrun_makes_the_one_process_run(
    alone, train_args, training_data, dropout_model, tmp_path
):
    output = tmp_path / "run"
    args = training(train_args, training_data, dropout_model, output)
    done = run(TORCHRUN, "--standalone", "--nproc-per-node", 2, ZRODLO, *args, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert_same_run(alone, output)


def wait_for_listener(port: int) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"nothing listens on 127.0.0.1:{port}")


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
    steps = 100  # still running when the kill lands, a few steps after step-5
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
    assert_newest_resumes_to(killed, straight, steps, resume_args, training_data.corpus, tmp_path)


def assert_newest_resumes_to(
    run_directory: Path, straight: Path, steps: int, resume_args, corpus: Path, cwd: Path
) -> None:
    """Resume the newest checkpoint of `run_directory` to `steps`, by one process: its weights
    and AdamW state then equal those of the run `straight`, never interrupted."""
    newest = max(
        (p for p in run_directory.iterdir() if p.name.startswith("step-")),
        key=lambda p: int(p.name.removeprefix("step-")),
    )
    resumed = cwd / "resumed"
    done = run(ZRODLO, *resume_args(newest, corpus, resumed, steps), cwd=cwd)
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    for name in ("model.safetensors", "optimizer.safetensors"):
        last = f"step-{steps}/{name}"
        assert (resumed / last).read_bytes() == (straight / last).read_bytes(), name


def workers_of(launcher: int) -> dict[int, int]:
    """The pids of the workers `launcher` started, by rank."""
    workers = {}
    for child in Path(f"/proc/{launcher}/task/{launcher}/children").read_text().split():
        for entry in Path(f"/proc/{child}/environ").read_bytes().split(b"\0"):
            if entry.startswith(b"RANK="):
                workers[int(entry.removeprefix(b"RANK="))] = int(child)
    return workers


def wait_for_worker(launcher: int, rank: int, until) -> int:
    """The pid of worker `rank` of the run `launcher` started, once `until()` holds."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if until() and rank in (workers := workers_of(launcher)):
            return workers[rank]
        time.sleep(0.05)
    raise AssertionError("the run did not reach its checkpoint in time")


@pytest.mark.parametrize("killed", [0, 1])
def test_a_process_killed_during_a_checkpoint_write_ends_the_run_and_it_resumes_exactly(
    killed, train_args, training_data, large_model, resume_args, tmp_path
):
    # Process 0 writes some 19 MB a checkpoint; the kill lands once its weights file exists in
    # the write's temporary directory, before the checkpoint is renamed into place.
    steps = 8
    flags = {"--batch-size": 8, "--checkpoint-every": 1}
    straight = tmp_path / "straight"
    assert run(ZRODLO, *train_args(large_model, training_data.corpus, straight, steps, flags),
               cwd=tmp_path).returncode == 0  # fmt: skip
    for attempt in range(10):
        output = tmp_path / f"killed-{attempt}"
        args = train_args(large_model, training_data.corpus, output, steps, flags)
        launcher = start(ZRODLO, *args, "--processes", 2, cwd=tmp_path)
        temporary = inside_a_checkpoint_write(output, launcher)
        if temporary is None:
            continue
        os.kill(worker_of(launcher.pid, killed), signal.SIGKILL)
        landed = temporary.exists()  # still being written when the kill came
        started = time.monotonic()
        _, stderr = launcher.communicate(timeout=120)
        assert time.monotonic() - started < 60
        if landed:
            break
    else:
        pytest.fail("no kill landed inside a checkpoint write in 10 runs")
    assert launcher.returncode == 1
    # Process 0 finishes a write the other's death interrupts, or leaves its temporary; either
    # way every step-<n> is a whole checkpoint.
    for checkpoint in output.glob("step-*"):
        assert read_checkpoint(checkpoint).step == int(checkpoint.name.removeprefix("step-"))
    if killed == 0:
        assert temporary.exists()
    assert stderr == (
        f"Error: process {killed} of 2 was killed by SIGKILL; every process of the run has "
        "stopped, and the checkpoints already written are whole\n"
    )
    assert_newest_resumes_to(output, straight, steps, resume_args, training_data.corpus, tmp_path)


def inside_a_checkpoint_write(output: Path, launcher: subprocess.Popen) -> Path | None:
    """The temporary directory of a checkpoint write of step 2 or later once it holds
    model.safetensors; None if the run ended first."""
    while launcher.poll() is None:
        for entry in os.scandir(output) if output.exists() else []:
            writing = TEMPORARY.fullmatch(entry.name)
            weights = Path(entry.path) / "model.safetensors"
            if writing and int(writing.group(1)) >= 2 and weights.exists():
                return Path(entry.path)
        time.sleep(0.0002)
    launcher.communicate()
    return None


def worker_of(launcher: int, rank: int) -> int:
    return wait_for_worker(launcher, rank, until=lambda: True)


def test_a_node_that_loses_the_other_says_so_once_and_ends(
    train_args, training_data, dropout_model, tmp_path
):
    # Two torchrun nodes; the second one's worker and agent die at once, as a machine would.
    # The first node's agent cannot see that worker: its own worker finds out, in a collective.
    output = tmp_path / "run"
    flags = {"--batch-size": 8, "--checkpoint-every": 1, "--keep-checkpoints": 2}
    args = train_args(dropout_model, training_data.corpus, output, 2000, flags)
    port = free_port()
    rendezvous = [
        "--nnodes", 2, "--nproc-per-node", 1, "--rdzv-backend", "c10d",
        "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", "lost-node",
    ]  # fmt: skip
    # The first node to come up holds the rendezvous store, which the lost one must not.
    first = start(TORCHRUN, *rendezvous, ZRODLO, *args, cwd=tmp_path)
    wait_for_listener(port)
    second = start(TORCHRUN, *rendezvous, ZRODLO, *args, cwd=tmp_path)
    deadline = time.monotonic() + 120
    while not (output / "step-3").is_dir() and time.monotonic() < deadline:
        time.sleep(0.05)
    # The rendezvous may give either node rank 0; the survivor's worker says it lost contact.
    (lost,) = workers_of(second.pid).values()
    os.kill(lost, signal.SIGKILL)
    second.kill()
    second.communicate()
    _, stderr = first.communicate(timeout=120)
    assert first.returncode != 0
    lines = [re.sub(r"^\[rank\d\]: ", "", line) for line in stderr.splitlines()]
    said = [line for line in lines if line.startswith("Error: ")]
    assert len(said) == 1, stderr
    assert re.fullmatch(
        r"Error: process [01] of 2 lost contact with the other processes of the run \([^()]*"
        r"Connection (reset|closed) by peer[^()]*\); the checkpoints already written are whole",
        said[0],
    ), said
    # No traceback of the worker (torchrun's own follows its failed worker, in torch's files).
    assert "src/zrodlo/" not in stderr and "stages/" not in stderr, stderr
    for checkpoint in output.glob("step-*"):
        assert read_checkpoint(checkpoint).step == int(checkpoint.name.removeprefix("step-"))

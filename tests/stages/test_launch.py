"""The caller of `--processes N` as an attacker or a careless user meets it: nothing of the run
listens beyond 127.0.0.1, SIGTERM, Ctrl-C and SIGKILL of the caller end every worker (the first
two with one sentence), and an environment that half describes a launch is refused."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from zrodlo.training.checkpoint import read_checkpoint

ZRODLO = Path(sys.executable).parent / "zrodlo"
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "200"}
WHOLE = "every process of the run has stopped, and the checkpoints already written are whole"
LISTEN = "0A"  # the state of a listening socket in /proc/net/tcp


def listening_sockets() -> dict[int, str]:
    """Every listening TCP socket of the machine: its inode and the address it is bound to."""
    found = {}
    for table, loopback in (("tcp", "0100007F"), ("tcp6", None)):
        for line in Path(f"/proc/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            address, state, inode = fields[1].split(":")[0], fields[3], int(fields[9])
            if state == LISTEN:
                found[inode] = "127.0.0.1" if address == loopback else f"{table} {address}"
    return found


def sockets_of(pid: int) -> set[int]:
    inodes = set()
    for descriptor in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(descriptor)
        except FileNotFoundError:
            continue
        if target.startswith("socket:["):
            inodes.add(int(target[len("socket:[") : -1]))
    return inodes


def workers_of(caller: int) -> list[int]:
    return [int(pid) for pid in Path(f"/proc/{caller}/task/{caller}/children").read_text().split()]


def gone(pid: int) -> bool:
    """Ended: no such process, or one whose status only waits to be collected."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def wait_until(condition, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "the run did not get there in time"
        time.sleep(0.05)


@pytest.mark.slow
@pytest.mark.parametrize("ending", ["SIGTERM", "SIGINT", "SIGKILL"])
def test_the_run_listens_on_loopback_only_and_ends_with_its_caller(
    ending, train_args, training_data, dropout_model, tmp_path
):
    output = tmp_path / "run"
    flags = {"--batch-size": 8, "--checkpoint-every": 1, "--keep-checkpoints": 2}
    # Steps the run cannot finish before it is stopped, however long a loaded machine keeps this
    # process from looking (400, a few seconds of training, once ended before the signal came).
    args = train_args(dropout_model, training_data.corpus, output, 100_000, flags)
    # A session of its own, as a shell gives a command: Ctrl-C goes to the caller's group. Its
    # errors go to a file, not a pipe, whose end the workers hold too: the caller's end and the
    # workers' are waited for apart, each with its own bound.
    said = tmp_path / "stderr.txt"
    with said.open("w") as errors:
        caller = subprocess.Popen(
            [str(ZRODLO), *map(str, args), "--processes", "2"], cwd=tmp_path, env=ENV,
            stdout=subprocess.DEVNULL, stderr=errors, text=True, start_new_session=True,
            # Ctrl-C's default, as a shell's foreground command has it: a test run in the
            # background (`pytest &` in a script) would otherwise pass on SIGINT ignored.
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )  # fmt: skip
    try:
        # A second checkpoint, whichever: with two kept, step-2 lasts only until step-4 is written,
        # and a poller a loaded machine holds back can miss it.
        wait_until(lambda: caller.poll() is not None or len(list(output.glob("step-*"))) >= 2)
        assert caller.poll() is None, said.read_text()
        workers = workers_of(caller.pid)
        assert len(workers) == 2
        listening = listening_sockets()
        for pid in (caller.pid, *workers):
            bound = {listening[inode] for inode in sockets_of(pid) if inode in listening}
            assert bound <= {"127.0.0.1"}, (pid, bound)
        assert not sockets_of(caller.pid) & listening.keys()  # the caller listens on nothing
        assert caller.poll() is None, "the run ended before it was stopped"
        os.killpg(caller.pid, signal.Signals[ending])
        caller.wait(timeout=120)
    finally:
        caller.kill()
    wait_until(lambda: all(gone(pid) for pid in workers), seconds=60)
    stderr = said.read_text()
    if ending != "SIGKILL":
        said = "Ctrl-C (SIGINT)" if ending == "SIGINT" else ending
        assert stderr == f"Error: the run was stopped by {said}; {WHOLE}\n"
        assert caller.returncode == 1
    for checkpoint in output.glob("step-*"):
        assert read_checkpoint(checkpoint).step == int(checkpoint.name.removeprefix("step-"))


ALONE = "unset them to run alone, or start the run with --processes or torchrun"


@pytest.mark.parametrize(
    ("environment", "sentence"),
    [
        ({"WORLD_SIZE": "2", "RANK": "0"}, "the environment sets WORLD_SIZE=2 and RANK=0 but not "
         f"MASTER_ADDR and MASTER_PORT, where the processes of a run meet; {ALONE}"),
        ({"WORLD_SIZE": "two", "RANK": "0"}, "the environment sets WORLD_SIZE='two' and RANK='0', "
         f"which are not a number of processes and a rank below it; {ALONE}"),
        ({"WORLD_SIZE": "2", "RANK": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1"},
         "the environment sets WORLD_SIZE='2' and RANK='2', which are not a number of processes "
         f"and a rank below it; {ALONE}"),
        ({"RANK": "1"}, "the environment sets RANK but not WORLD_SIZE; a launcher of a "
         f"data-parallel run sets both, so {ALONE}"),
    ],
)  # fmt: skip
def test_an_environment_that_half_describes_a_launch_is_refused(
    environment, sentence, train_args, training_data, dropout_model, tmp_path, snapshot
):
    # Whether it starts processes or not, a run asks first where it stands (training/place.py).
    before = snapshot(tmp_path)
    args = train_args(dropout_model, training_data.corpus, tmp_path / "run", 2)
    stray = {name: value for name, value in ENV.items() if name not in ("RANK", "WORLD_SIZE")}
    done = subprocess.run(
        [str(ZRODLO), *map(str, args), "--processes", "2"], cwd=tmp_path,
        env={**stray, **environment}, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert (done.returncode, done.stdout, done.stderr) == (1, "", f"Error: {sentence}\n")
    assert snapshot(tmp_path) == before

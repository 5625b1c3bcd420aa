"""The caller of a data-parallel run (`zrodlo.training.launch`): its reports travel whole over the
workers' pipes, and each wait for the workers has a bound that ends the run with one sentence
naming the process that did not arrive, every process stopped."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zrodlo.storage.refusal import Refusal
from zrodlo.training.channel import LONGEST_MESSAGE, Messages, encoded
from zrodlo.training.launch import Reports, Waits, _watch, _Worker, run_workers
from zrodlo.training.runs import quiet

PLAN = dict(
    steps=50, context=9, batch_size=4, micro_batch_size=2, learning_rate=0.01, beta1=0.9,
    beta2=0.99, epsilon=1e-8, weight_decay=0.1, decay_scope="matrices", seed=11, precision="f32",
)  # fmt: skip
WHOLE = "every process of the run has stopped, and the checkpoints already written are whole"

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)


@given(st.lists(st.lists(json_values, min_size=1, max_size=4), max_size=6), st.integers(1, 7))
def test_messages_arrive_whole_however_the_bytes_are_cut(messages, cut):
    stream = b"".join(encoded(*message) for message in messages)
    reader = Messages()
    arrived = []
    for start in range(0, len(stream), cut):
        arrived += reader.feed(stream[start : start + cut])
    assert arrived == [json.loads(json.dumps(message)) for message in messages]


def test_a_length_no_report_has_is_not_read_as_one():
    with pytest.raises(ValueError, match="a report of"):
        Messages().feed((LONGEST_MESSAGE + 1).to_bytes(4, "big"))


def request(dropout_model: Path, training_data, output: Path) -> dict:
    return {
        "command": "train", "model": dropout_model, "corpus": training_data.corpus,
        "output": output, "device": "cpu", "ordinal": None, "threads": 1, "eval_corpus": None,
        "timing": None, **PLAN,
    }  # fmt: skip


def workers() -> dict[int, int]:
    """The pids of this process's workers, by rank."""
    found = {}
    me = os.getpid()
    for child in Path(f"/proc/{me}/task/{me}/children").read_text().split():
        try:
            environment = Path(f"/proc/{child}/environ").read_bytes().split(b"\0")
        except FileNotFoundError:
            continue
        for entry in environment:
            if entry.startswith(b"RANK="):
                found[int(entry.removeprefix(b"RANK="))] = int(child)
    return found


def environment_of(pid: int) -> dict[str, str]:
    entries = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(entry.decode().split("=", 1) for entry in entries if b"=" in entry)


def on_sight_of(rank: int, action) -> tuple[threading.Thread, list]:
    """Watch, on a thread, for this process's worker `rank`, and call `action(pid)` on it the
    moment it appears (a few milliseconds after its start; importing torch takes seconds); the
    list holds what `action` returned."""
    done: list = []

    def watch() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not done:
            if rank in (found := workers()):
                done.append(action(found[rank]))
            time.sleep(0.002)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread, done


def gone(pid: int) -> bool:
    return not Path(f"/proc/{pid}").exists()


@pytest.mark.slow
def test_a_process_that_does_not_start_ends_the_run_in_its_bound(
    dropout_model, training_data, tmp_path
):
    def stop(pid: int) -> int:
        os.kill(pid, signal.SIGSTOP)
        return pid

    watcher, stopped = on_sight_of(1, stop)
    began = time.monotonic()
    with pytest.raises(Refusal) as refused:
        run_workers(request(dropout_model, training_data, tmp_path / "run"), 2, 1, quiet,
                    Waits(start=15, join=15))  # fmt: skip
    watcher.join()
    assert refused.value.sentence == f"process 1 of 2 did not start within 15 s; {WHOLE}"
    assert 15 <= time.monotonic() - began < 45
    assert stopped and gone(stopped[0])
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_a_rendezvous_that_does_not_complete_ends_the_run_in_its_bound(
    dropout_model, training_data, tmp_path
):
    # The processes meet through a file store, which takes a lock on its file for every read and
    # write: the store's file, locked before the processes come, holds both at the rendezvous.
    def lock_the_store(pid: int):
        # Held open, and so locked, until the test closes it after the run.
        file = Path(environment_of(pid)["ZRODLO_RENDEZVOUS"]).open("a")  # noqa: SIM115
        fcntl.flock(file, fcntl.LOCK_EX)
        return file

    watcher, held = on_sight_of(0, lock_the_store)
    began = time.monotonic()
    with pytest.raises(Refusal) as refused:
        run_workers(request(dropout_model, training_data, tmp_path / "run"), 2, 1, quiet,
                    Waits(start=60, join=10))  # fmt: skip
    watcher.join()
    held[0].close()
    assert refused.value.sentence == f"process 0 of 2 did not join the others within 10 s; {WHOLE}"
    assert time.monotonic() - began < 70
    assert workers() == {}
    assert not (tmp_path / "run").exists()


def test_a_process_that_fails_after_its_pipe_closed_still_ends_the_run_with_its_status():
    # The pipe closes as a process ends, a moment before the process can be waited for; this one
    # holds that moment open for half a second, then fails.
    report_read, report_write = os.pipe()
    lifeline_read, lifeline_write = os.pipe()
    ends = f"import os, time; os.close({report_write}); time.sleep(0.5); raise SystemExit(3)"
    process = subprocess.Popen([sys.executable, "-c", ends], pass_fds=(report_write,))
    os.close(report_write)
    os.close(lifeline_read)
    worker = _Worker(0, 1, process, report_read, lifeline_write)
    with pytest.raises(Refusal) as refused, Reports(quiet) as reports:
        _watch([worker], reports, Waits())
    os.close(lifeline_write)
    assert refused.value.sentence == f"process 0 of 1 ended with exit status 3; {WHOLE}"
    assert process.returncode == 3

"""The run directory: which run it holds, who writes it, and what a run may do to what is there.

A run directory belongs to one run, named in its `run.json`. A run's identity is the digest of what
determines its updates (the starting model, the corpus and tokenizer, the generator and the
hyperparameters), so the run a checkpoint continues keeps the identity of the run that wrote it,
and the same flags on the same inputs name the same run. One process writes a run directory at a
time: it holds an exclusive lock on the directory for the life of the run, which the kernel
releases when the process ends, however it ends, so a kill never leaves a stale lock.

Before anything is written, and under the lock, a run into a directory is refused when:
- a checkpoint it plans to write exists (seed 001's sentence);
- the directory holds another run, or a run's records and checkpoints without a run.json;
- the directory holds a checkpoint past the step the run starts from: starting there would cut
  the records that checkpoint continues;
- with --keep-checkpoints, a checkpoint retention may delete is not a whole checkpoint of this run.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

from zrodlo.model.directory import Model
from zrodlo.model.weights import weights_sha256
from zrodlo.storage import jsonfile
from zrodlo.storage.digest import json_sha256, json_text
from zrodlo.storage.inputs import read_input
from zrodlo.storage.outputs import (
    check_in_place,
    check_parent,
    parents_made,
    remove_stale_partials,
    replace_file,
    sync_directory,
)
from zrodlo.storage.refusal import Refusal, WriteFailure
from zrodlo.training.checkpoint import (
    check_removable,
    check_run_of,
    checkpoint_name,
    checkpoints_in,
)
from zrodlo.training.plan import RunPlan
from zrodlo.training.records import HELD_OUT_FILE, LEDGER_FILE, STEPS_FILE, TIMING_FILE

RUN_FILE = "run.json"
RUN_FORMAT = 1
RECORD_FILES = (STEPS_FILE, LEDGER_FILE, TIMING_FILE, HELD_OUT_FILE)


def run_identity(generator: str, start: Model, corpus_digest: str, plan: RunPlan) -> str:
    """The digest that names a fresh run: everything its updates depend on besides the machine."""
    return json_sha256(
        {
            "generator": generator,
            "config": start.config.to_json(),
            "weights": weights_sha256(start.weights),
            "tokenizer_digest": start.tokenizer.digest,
            "corpus_digest": corpus_digest,
            "hyperparameters": plan.hyperparameters(),
        }
    )


@contextlib.contextmanager
def claim(path: Path, run: dict, plan: RunPlan, done: int) -> Iterator[None]:
    """Hold `path` as the directory of `run` (the run.json record) from step `done` for the block.

    Creates the directory if need be, takes its lock, refuses what the module docstring lists and
    writes run.json; yields the checkpoints it read whole (those retention may delete). A write
    that fails before the first checkpoint removes a directory this call created.
    """
    if path.exists() and not path.is_dir():
        raise Refusal(
            f"{path} exists and is not a directory; a run writes its checkpoints into a directory"
        )
    if not path.exists():
        check_parent(path)
    with parents_made(path):  # as DVC makes an output's folders; removed again if it fails
        created = False
        if not path.exists():
            try:
                path.mkdir()
                created = True
            except FileExistsError:  # another writer made it first; its lock decides below
                pass
            except OSError as error:
                raise WriteFailure(path, error) from None
        lock = _lock(path)
        try:
            verified = _check_contents(path, run, plan, done)
            remove_stale_partials(path)  # what a killed run left half-written is no checkpoint
            if not (path / RUN_FILE).exists():
                replace_file(path / RUN_FILE, json_text(run))
            yield verified
        except Refusal:  # a WriteFailure among them
            if created and not checkpoints_in(path):  # nothing of the run is worth keeping
                shutil.rmtree(path, ignore_errors=True)
                sync_directory(path.absolute().parent)
            raise
        finally:
            os.close(lock)


def _check_contents(path: Path, run: dict, plan: RunPlan, done: int) -> set[Path]:
    """Seed 001's refusals of what is there come first, then the rules of one run a directory;
    returns the checkpoints read whole on the way."""
    for name in (RUN_FILE, *RECORD_FILES):
        check_in_place(path / name)  # a link would carry the records out of the directory
    for step in plan.checkpoint_steps(done):
        planned = path / checkpoint_name(step)
        if planned.exists() or planned.is_symlink():
            raise Refusal(
                f"{planned} already exists; Zrodlo writes a new directory and overwrites nothing"
            )
    checkpoints = checkpoints_in(path)
    removable = []
    if plan.keep_checkpoints is not None:
        removable = [(checkpoint, check_removable(checkpoint)) for _, checkpoint in checkpoints]
    held = read_run(path)
    if held is None:
        found = [path / name for name in RECORD_FILES if (path / name).exists()]
        found += [checkpoint for _, checkpoint in checkpoints]
        if found:
            raise Refusal(
                f"{path} holds {found[0].name} but no {RUN_FILE} naming the run it belongs to; "
                "a run is written only into a new directory or one that holds the same run"
            )
    elif held.get("run") != run["run"]:
        raise Refusal(
            f"{path} holds run {held.get('run')}, and this is run {run['run']}; a run directory "
            "holds one run, so write this one into a new directory"
        )
    later = [checkpoint for step, checkpoint in checkpoints if step > done]
    if later:
        raise Refusal(
            f"{path} holds {later[-1]}, a checkpoint past step {done} where this run starts; "
            f"starting there would cut the records {later[-1]} continues, so resume from "
            f"{later[-1]}, or write into a new directory"
        )
    for checkpoint, record in removable:
        check_run_of(checkpoint, record, run["run"])
    return {checkpoint for checkpoint, _ in removable}


def read_run(path: Path) -> dict | None:
    """The run.json of a run directory, or None where there is none."""
    file = path / RUN_FILE
    if not file.exists():
        return None
    try:
        held = jsonfile.loads(read_input(file))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise Refusal(f"{file} does not load as a run record: {error}") from None
    if not isinstance(held, dict) or not isinstance(held.get("run"), str):
        raise Refusal(f"{file} does not load as a run record: it names no run")
    return held


def _lock(path: Path) -> int:
    """An exclusive lock on the directory itself (no lock file to leave behind), or the refusal
    that names the process holding it."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as error:
        os.close(fd)
        if error.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            raise Refusal(
                f"{path} is being written by {_holder(path)}; a run directory has one writer at "
                "a time, so wait for it to end or write into another directory"
            ) from None
        raise Refusal(
            f"{path} cannot be locked for writing: {error.strerror}; Zrodlo writes a run only "
            "into a directory it can hold alone"
        ) from None
    return fd


def _holder(path: Path) -> str:
    """The process that holds the lock on `path`, from the kernel's table of locks (Linux)."""
    status = os.stat(path)
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/locks").read_text().splitlines():
            fields = line.split()
            # 1: FLOCK  ADVISORY  WRITE 3347 fe:00:2155002 0 EOF
            if len(fields) < 6 or fields[1] != "FLOCK":
                continue
            major, minor, inode = fields[5].split(":")
            if (int(major, 16), int(minor, 16), int(inode)) == (
                os.major(status.st_dev),
                os.minor(status.st_dev),
                status.st_ino,
            ):
                pid = int(fields[4])
                return f"process {pid}{_command_of(pid)}"
    return "another process"


def _command_of(pid: int) -> str:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return ""
    words = [os.fsdecode(word) for word in argv if word]
    if len(words) > 1 and Path(words[0]).name.startswith("python"):
        words = words[1:]  # a console script runs as `python <script> ...`
    command = [Path(words[0]).name] if words else []
    for word in words[1:]:  # the command's name, not its flags
        if word.startswith("-"):
            break
        command.append(word)
    return f" ({' '.join(command)})" if command else ""

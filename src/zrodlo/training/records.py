"""The per-step records of a run directory.

- steps.csv: step, loss, learning_rate, grad_norm, targets, eval_loss, eval_bits_per_byte, for
  people and `dvc plots`;
- ledger.jsonl: per step the sha256 of its window indices and the loss, rate, norm and held-out loss
  as exact hex floats; after each checkpoint, the sha256 of its state files (what
  `zrodlo.evaluation.compare` compares);
- held_out.csv: step, eval_loss, eval_bits_per_byte on the steps that scored the held-out corpus,
  a dense series for `dvc plots` (steps.csv leaves the columns empty between scores);
- timing.csv: step, seconds, tokens_per_second, the only machine-dependent record; a run may write
  it to another file instead (`--timing`), so that what a pipeline hashes holds no wall-clock time.

steps.csv, held_out.csv and ledger.jsonl hold only what the run's plan determines, so a resumed run writes the
same lines as the run that was never interrupted. When a run continues in the directory it was
killed in, the lines past the checkpoint it continues from are dropped first. The records are
synced before each checkpoint is renamed into place, so a checkpoint that survives a power cut
never points past the records it continues.

Runs written by releases up to 0.1.0 have no eval_bits_per_byte column; a run that continues in
such a directory goes on writing that file's columns, so that its files stay one table each.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from zrodlo.storage import jsonfile
from zrodlo.storage.inputs import open_input
from zrodlo.storage.outputs import check_in_place, open_in_place
from zrodlo.storage.refusal import Refusal, WriteFailure

STEPS_FILE = "steps.csv"
LEDGER_FILE = "ledger.jsonl"
TIMING_FILE = "timing.csv"
HELD_OUT_FILE = "held_out.csv"
HELD_OUT_HEADER = "step,eval_loss,eval_bits_per_byte"
STEPS_HEADER = "step,loss,learning_rate,grad_norm,targets,eval_loss,eval_bits_per_byte"
# The headers releases up to 0.1.0 wrote, without the held-out bits per byte.
HELD_OUT_HEADER_0_1 = "step,eval_loss"
STEPS_HEADER_0_1 = "step,loss,learning_rate,grad_norm,targets,eval_loss"
TIMING_HEADER = "step,seconds,tokens_per_second"


@dataclass(frozen=True)
class StepRecord:
    """What one update did: `step` is the count of updates done after it."""

    step: int
    loss: float
    learning_rate: float
    grad_norm: float
    targets: int
    windows_digest: str  # sha256 of the step's window indices (int64 little-endian)
    seconds: float
    eval_loss: float | None = None
    eval_windows: str | None = None  # sha256 of the held-out windows scored, where not all
    eval_seconds: float | None = None  # wall time of the held-out score
    eval_bits_per_byte: float | None = None  # the held-out loss in bits per byte of its text


# What a run shows its progress with: given the steps done and the steps to reach, a context that
# yields the callback called after every step. Only the process that reports opens it. A callback
# with an attribute `scoring(step, batches done, batches)` also hears of each forward pass of the
# held-out scores, which take a while on a large held-out corpus.
Progress = Callable[[int, int], AbstractContextManager[Callable[[StepRecord], None]]]


def _hex(value: float | None) -> str | None:
    return None if value is None else float(value).hex()


def _field(value: float | None) -> str:
    """A value as a CSV field: exact (repr), or empty for none."""
    return "" if value is None else repr(value)


_LEGACY_HEADERS = {STEPS_HEADER_0_1.encode(), HELD_OUT_HEADER_0_1.encode()}


def _first_line(path: Path) -> bytes:
    with open_input(path) as handle:
        return handle.readline(256).rstrip(b"\n")


def _cut_point(path: Path, done: int, step_of: Callable[[bytes], int | None]) -> tuple[int, bytes]:
    """Where to cut `path` so that the records of steps after `done`, and any half-written last
    line, go; and the last line kept (b"" if none). Reads only.

    Records are appended in step order, so only the tail after the last kept record is read: the
    cost does not grow with the steps already done.
    """
    with open_input(path) as handle:
        cut = handle.seek(0, os.SEEK_END)
        position, buffer = cut, b""
        while cut > 0:
            if position > 0 and buffer.count(b"\n") < 2:
                read = min(1 << 16, position)
                position -= read
                handle.seek(position)
                buffer = handle.read(read) + buffer
                continue
            if not buffer.endswith(b"\n"):  # a line a killed process left half-written
                start = buffer.rfind(b"\n") + 1
            else:
                start = buffer.rfind(b"\n", 0, len(buffer) - 1) + 1
                step = step_of(buffer[start:-1])
                if step is None or step <= done:
                    return cut, buffer[start:-1]
            cut -= len(buffer) - start
            buffer = buffer[:start]
    return cut, b""


def last_record(path: Path) -> bytes:
    """The last complete line of a records file, or b"" if none."""
    return _cut_point(path, 2**63, lambda line: None)[1]


def _ledger_entry(path: Path, line: bytes, cut: int) -> dict | None:
    """The ledger entry `line`, the last before byte `cut` of `path`; refused by its number where it
    is none (what a kill leaves has no newline, and is cut off instead)."""
    try:
        return jsonfile.loads(line) if line else None
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        with open_input(path) as handle:  # only now: the count reads the ledger up to the line
            number = handle.read(cut).count(b"\n")
        raise Refusal(f"{path} line {number} does not load as a ledger entry: {error}") from None


def _csv_step(line: bytes) -> int | None:
    head = line.split(b",", 1)[0]
    return int(head) if head.isdigit() else None


_LEDGER_STEP = re.compile(rb'\{"step": (\d+)')


def _ledger_step(line: bytes) -> int | None:
    match = _LEDGER_STEP.match(line)
    return int(match.group(1)) if match else None


class RunLog:
    """Appends a run's records to its directory, continuing after step `done`; the timing goes to
    `timing`, the run directory's timing.csv unless the run names another file."""

    def __init__(self, run: Path, done: int, timing: Path | None = None) -> None:
        self._files: dict[str, TextIO] = {}
        self._paths: dict[str, Path] = {}
        records = (
            (STEPS_FILE, run / STEPS_FILE, STEPS_HEADER, _csv_step),
            (LEDGER_FILE, run / LEDGER_FILE, None, _ledger_step),
            (TIMING_FILE, timing or run / TIMING_FILE, TIMING_HEADER, _csv_step),
            (HELD_OUT_FILE, run / HELD_OUT_FILE, HELD_OUT_HEADER, _csv_step),
        )
        # Every record is checked, and where it is cut found, before any of them is changed.
        cuts: dict[str, int | None] = {}
        self._legacy: set[str] = set()  # the files that keep the columns of releases up to 0.1.0
        self.ledger_tail: dict | None = None  # the ledger's last entry at or before `done`
        for name, path, _, step_of in records:
            check_in_place(path)
            self._paths[name] = path
            try:
                cut, last = _cut_point(path, done, step_of) if path.exists() else (None, b"")
                if cut and _first_line(path) in _LEGACY_HEADERS:
                    self._legacy.add(name)
            except OSError as error:
                raise WriteFailure(path, error) from None
            cuts[name] = cut
            if name == LEDGER_FILE and cut is not None:
                self.ledger_tail = _ledger_entry(path, last, cut)
        try:
            for name, path, header, _ in records:
                try:
                    path.parent.mkdir(parents=True, exist_ok=True)  # a --timing file's folders
                    fd = open_in_place(path, os.O_WRONLY | os.O_APPEND)
                    if cuts[name] is not None:
                        os.ftruncate(fd, cuts[name])
                except OSError as error:
                    raise WriteFailure(path, error) from None
                self._files[name] = handle = open(fd, "a", encoding="utf-8")  # noqa: SIM115
                if header and handle.tell() == 0:
                    self._write(name, header)
        except BaseException:
            self.close()
            for name, path, _, _ in records:  # a refusal leaves no record file it made
                if cuts[name] is None:
                    path.unlink(missing_ok=True)
            raise

    def step(self, record: StepRecord) -> None:
        held_out = _field(record.eval_loss)
        if STEPS_FILE not in self._legacy:
            held_out += f",{_field(record.eval_bits_per_byte)}"
        self._write(
            STEPS_FILE,
            f"{record.step},{record.loss!r},{record.learning_rate!r},{record.grad_norm!r},"
            f"{record.targets},{held_out}",
        )
        entry = {
            "step": record.step,
            "windows": record.windows_digest,
            "loss": _hex(record.loss),
            "learning_rate": _hex(record.learning_rate),
            "grad_norm": _hex(record.grad_norm),
            "eval_loss": _hex(record.eval_loss),
        }
        if record.eval_windows is not None:  # a score of some windows records which
            entry["eval_windows"] = record.eval_windows
        self._write(LEDGER_FILE, json.dumps(entry))
        if record.eval_loss is not None:
            held_out = f"{record.step},{record.eval_loss!r}"
            if HELD_OUT_FILE not in self._legacy:
                held_out += f",{_field(record.eval_bits_per_byte)}"
            self._write(HELD_OUT_FILE, held_out)
        rate = record.targets / record.seconds if record.seconds > 0 else 0.0
        self._write(TIMING_FILE, f"{record.step},{record.seconds:.6f},{rate:.1f}")

    def checkpoint(self, step: int, files: dict[str, str]) -> None:
        """Record the digests of a checkpoint's state files, once it is complete on disk."""
        self._write(LEDGER_FILE, json.dumps({"step": step, "checkpoint": files}))

    def continue_from(self, step: int, files: dict[str, str]) -> None:
        """Make sure the ledger records the checkpoint a continued run starts from: once the
        ledger is cut back to `step`, that checkpoint's entry, if it was written, is its last line."""
        if self.ledger_tail != {"step": step, "checkpoint": files}:
            self.checkpoint(step, files)

    def sync(self) -> None:
        """Put every record written so far on disk, before a checkpoint that relies on them."""
        for name, handle in self._files.items():
            try:
                os.fsync(handle.fileno())
            except OSError as error:
                raise WriteFailure(self._paths[name], error) from None

    def _write(self, name: str, line: str) -> None:
        handle = self._files[name]
        try:
            handle.write(line + "\n")
            handle.flush()
        except OSError as error:
            raise WriteFailure(self._paths[name], error) from None

    def close(self) -> None:
        for handle in self._files.values():
            # A record the disk would not take is dropped here; a resume cuts any half line.
            with contextlib.suppress(OSError):
                handle.close()


def read_ledger(path: Path) -> list[dict]:
    """The entries of a ledger; a last line without its newline, which a killed run leaves
    half-written, is not an entry (a resume cuts it off too)."""
    if not path.is_file():
        return []
    with open_input(path) as handle:
        lines = handle.read().split(b"\n")
    entries = []
    for number, line in enumerate(lines[:-1], start=1):  # lines[-1]: after the last newline
        try:
            entry = jsonfile.loads(line)
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise Refusal(
                f"{path} line {number} does not load as a ledger entry: {error}"
            ) from None
        if not isinstance(entry, dict) or not isinstance(entry.get("step"), int):
            raise Refusal(f"{path} line {number} does not load as a ledger entry: it names no step")
        entries.append(entry)
    return entries

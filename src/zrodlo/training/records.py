"""The per-step records of a run directory.

- steps.csv: step, loss, learning_rate, grad_norm, targets, eval_loss, for people and `dvc plots`;
- ledger.jsonl: per step the sha256 of its window indices and the loss, rate, norm and held-out loss
  as exact hex floats; after each checkpoint, the sha256 of its state files (what
  `zrodlo.evaluation.compare` compares);
- held_out.csv: step, eval_loss on the steps that scored the held-out corpus, a dense series for
  `dvc plots` (steps.csv leaves the column empty between scores);
- timing.csv: step, seconds, tokens_per_second, the only machine-dependent record; a run may write
  it to another file instead (`--timing`), so that what a pipeline hashes holds no wall-clock time.

steps.csv, held_out.csv and ledger.jsonl hold only what the run's plan determines, so a resumed run writes the
same lines as the run that was never interrupted. When a run continues in the directory it was
killed in, the lines past the checkpoint it continues from are dropped first. The records are
synced before each checkpoint is renamed into place, so a checkpoint that survives a power cut
never points past the records it continues.
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

from zrodlo.storage import jsonfile
from zrodlo.storage.refusal import Refusal, WriteFailure

STEPS_FILE = "steps.csv"
LEDGER_FILE = "ledger.jsonl"
TIMING_FILE = "timing.csv"
HELD_OUT_FILE = "held_out.csv"
HELD_OUT_HEADER = "step,eval_loss"
STEPS_HEADER = "step,loss,learning_rate,grad_norm,targets,eval_loss"
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


# What a run shows its progress with: given the steps done and the steps to reach, a context that
# yields the callback called after every step. Only the process that reports opens it.
Progress = Callable[[int, int], AbstractContextManager[Callable[[StepRecord], None]]]


def _hex(value: float | None) -> str | None:
    return None if value is None else float(value).hex()


def _truncate_after(path: Path, done: int, step_of: Callable[[bytes], int | None]) -> None:
    """Cut the records of steps after `done`, and any half-written last line, off `path`.

    Records are appended in step order, so only the tail after the last kept record is read: the
    cost does not grow with the steps already done.
    """
    with open(path, "rb+") as handle:
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
                    break
            cut -= len(buffer) - start
            buffer = buffer[:start]
        handle.truncate(cut)


def last_record(path: Path) -> bytes:
    """The last complete line of a records file (read from the end), or b"" if none."""
    with open(path, "rb") as handle:
        end = handle.seek(0, os.SEEK_END)
        handle.seek(max(end - (1 << 16), 0))
        lines = handle.read().splitlines()
    return lines[-1] if lines else b""


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
        self._files = {}
        for name, path, header, step_of in (
            (STEPS_FILE, run / STEPS_FILE, STEPS_HEADER, _csv_step),
            (LEDGER_FILE, run / LEDGER_FILE, None, _ledger_step),
            (TIMING_FILE, timing or run / TIMING_FILE, TIMING_HEADER, _csv_step),
            (HELD_OUT_FILE, run / HELD_OUT_FILE, HELD_OUT_HEADER, _csv_step),
        ):
            try:
                if path.exists():
                    _truncate_after(path, done, step_of)
                handle = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed by close()
            except OSError as error:
                self.close()
                raise WriteFailure(path, error) from None
            self._files[name] = handle
            if header and handle.tell() == 0:
                self._write(name, header)

    def step(self, record: StepRecord) -> None:
        eval_loss = "" if record.eval_loss is None else repr(record.eval_loss)
        self._write(
            STEPS_FILE,
            f"{record.step},{record.loss!r},{record.learning_rate!r},{record.grad_norm!r},"
            f"{record.targets},{eval_loss}",
        )
        entry = {
            "step": record.step,
            "windows": record.windows_digest,
            "loss": _hex(record.loss),
            "learning_rate": _hex(record.learning_rate),
            "grad_norm": _hex(record.grad_norm),
            "eval_loss": _hex(record.eval_loss),
        }
        self._write(LEDGER_FILE, json.dumps(entry))
        if record.eval_loss is not None:
            self._write(HELD_OUT_FILE, f"{record.step},{record.eval_loss!r}")
        rate = record.targets / record.seconds if record.seconds > 0 else 0.0
        self._write(TIMING_FILE, f"{record.step},{record.seconds:.6f},{rate:.1f}")

    def checkpoint(self, step: int, files: dict[str, str]) -> None:
        """Record the digests of a checkpoint's state files, once it is complete on disk."""
        self._write(LEDGER_FILE, json.dumps({"step": step, "checkpoint": files}))

    def continue_from(self, step: int, files: dict[str, str]) -> None:
        """Make sure the ledger records the checkpoint a continued run starts from: once the
        ledger is cut back to `step`, that checkpoint's entry, if it was written, is its last line."""
        last = last_record(Path(self._files[LEDGER_FILE].name))
        if not (last and jsonfile.loads(last) == {"step": step, "checkpoint": files}):
            self.checkpoint(step, files)

    def sync(self) -> None:
        """Put every record written so far on disk, before a checkpoint that relies on them."""
        for handle in self._files.values():
            try:
                os.fsync(handle.fileno())
            except OSError as error:
                raise WriteFailure(Path(handle.name), error) from None

    def _write(self, name: str, line: str) -> None:
        handle = self._files[name]
        try:
            handle.write(line + "\n")
            handle.flush()
        except OSError as error:
            raise WriteFailure(Path(handle.name), error) from None

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
    lines = path.read_bytes().split(b"\n")
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

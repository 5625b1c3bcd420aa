"""A run's records read back for its report: the pools' corpus manifests, steps.csv, the step times
and the evaluation scores, each refused with a sentence naming the file and the command that writes
it when it is bad or missing.
"""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from zrodlo.data.corpus import MANIFEST_FILE
from zrodlo.storage import jsonfile
from zrodlo.storage.inputs import open_input, read_input
from zrodlo.storage.refusal import Refusal
from zrodlo.training.records import STEPS_FILE, STEPS_HEADER, STEPS_HEADER_0_1, TIMING_HEADER

# The pools of the pipeline, in the order people read them; other corpora follow by name.
POOL_ORDER = ("train", "validation", "test")


@dataclass(frozen=True)
class Pool:
    """A prepared corpus as its corpus.json describes it."""

    name: str
    path: Path
    documents: int
    characters: int
    tokens: int
    targets: int
    unknown_tokens: int
    unknown_rate: float
    digest: str
    weighted_targets: int | None = None  # a chat corpus's targets in answers, the ones trained on


@dataclass(frozen=True)
class Steps:
    """steps.csv by column; the held-out columns are NaN on the steps without a held-out score
    (and eval_bits_per_byte on every step of a run written by a release up to 0.1.0)."""

    step: list[int]
    loss: list[float]
    learning_rate: list[float]
    grad_norm: list[float]
    targets: list[int]
    eval_loss: list[float]
    eval_bits_per_byte: list[float]

    def through(self, last: int) -> Steps:
        """The records of steps 1..last only."""
        keep = [i for i, step in enumerate(self.step) if step <= last]
        return Steps(*([getattr(self, f.name)[i] for i in keep] for f in fields(self)))

    @property
    def tokens_seen(self) -> int:
        """The targets the model was trained on: every step's scored tokens, summed."""
        return sum(self.targets)

    def last_held_out(self) -> tuple[int, float, float] | None:
        """The last step with a held-out score, its loss and bits per byte (NaN where unknown)."""
        scored = [
            (s, loss, bpb)
            for s, loss, bpb in zip(self.step, self.eval_loss, self.eval_bits_per_byte, strict=True)
            if not math.isnan(loss)
        ]
        return scored[-1] if scored else None


def _read_json(path: Path, what: str, written_by: str) -> Any:
    if not path.is_file():
        raise Refusal(f"{path} does not exist; {written_by} writes {what}")
    try:
        return jsonfile.loads(read_input(path))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise Refusal(f"{path} does not load as {what}: {error}") from None


def _pool_order(name: str) -> tuple[int, str]:
    return (POOL_ORDER.index(name) if name in POOL_ORDER else len(POOL_ORDER), name)


def read_pools(corpora: Path) -> list[Pool]:
    """Every prepared corpus directly under `corpora` (a directory holding corpus.json)."""
    if not corpora.is_dir():
        raise Refusal(
            f"{corpora} is not a directory; prepared corpora are read from a directory that "
            "holds one corpus directory each"
        )
    found = sorted(
        (entry for entry in corpora.iterdir() if (entry / MANIFEST_FILE).is_file()),
        key=lambda entry: _pool_order(entry.name),
    )
    if not found:
        raise Refusal(
            f"{corpora} holds no prepared corpus (no <pool>/{MANIFEST_FILE}); "
            "corpora are written by zrodlo corpus prepare"
        )
    pools = []
    for entry in found:
        file = entry / MANIFEST_FILE
        manifest = _read_json(file, "a corpus manifest", "zrodlo corpus prepare")
        try:
            pools.append(
                Pool(
                    name=entry.name,
                    path=entry,
                    documents=int(manifest["documents"]),
                    characters=int(manifest["characters"]),
                    tokens=int(manifest["tokens"]),
                    targets=int(manifest["targets"]),
                    unknown_tokens=int(manifest["unknown_tokens"]),
                    unknown_rate=float(manifest["unknown_rate"]),
                    digest=str(manifest["corpus_digest"]),
                    weighted_targets=(
                        int(manifest["weighted_targets"])
                        if "weighted_targets" in manifest
                        else None
                    ),
                )
            )
        except (KeyError, TypeError, ValueError) as error:
            raise Refusal(f"{file} does not load as a corpus manifest: {_problem(error)}") from None
    return pools


def _problem(error: Exception) -> str:
    return f"it has no {error.args[0]}" if isinstance(error, KeyError) else str(error)


def _number(text: str) -> float:
    return math.nan if text == "" else float(text)


def _csv_rows(file: Path, row: str) -> list[list[str]]:
    """The rows of a CSV file of Zrodlo's records; a line that is not UTF-8 is refused by its
    number (`row` says what a line records)."""
    with open_input(file) as handle:
        data = handle.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        number = data.count(b"\n", 0, error.start) + 1
        raise Refusal(f"{file} line {number} does not read as {row}: it is not UTF-8") from None
    return list(csv.reader(io.StringIO(text, newline="")))


def read_steps(run: Path) -> Steps:
    """A run's steps.csv, as zrodlo model train writes it."""
    file = run / STEPS_FILE
    if not file.is_file():
        raise Refusal(
            f"{run} holds no {STEPS_FILE}; a run directory is written by zrodlo model train"
        )
    lines = _csv_rows(file, "a step record")
    header = ",".join(lines[0]) if lines else "nothing"
    if header not in (STEPS_HEADER, STEPS_HEADER_0_1):
        raise Refusal(
            f"{file} starts with {header!r}; a run's {STEPS_FILE} starts with {STEPS_HEADER!r}"
        )
    width = len(lines[0])
    columns: tuple[list, ...] = ([], [], [], [], [], [], [])
    for number, line in enumerate(lines[1:], start=2):
        try:
            if len(line) != width:
                raise ValueError(f"it has {len(line)} fields, and its header {width}")
            step, loss, rate, norm, targets, eval_loss, *held_out_bits = line
            values = (
                int(step),
                float(loss),
                float(rate),
                float(norm),
                int(targets),
                _number(eval_loss),
                _number(held_out_bits[0] if held_out_bits else ""),
            )
        except ValueError as error:
            raise Refusal(f"{file} line {number} does not read as a step record: {error}") from None
        for column, value in zip(columns, values, strict=True):
            column.append(value)
    if not columns[0]:
        raise Refusal(f"{file} records no step; the run made no update")
    return Steps(*columns)


def read_metrics(path: Path) -> dict:
    """The scores zrodlo model evaluate --output wrote: {"model": {...}, "corpora": {...}}."""
    metrics = _read_json(path, "evaluation scores", "zrodlo model evaluate --output")
    if not (
        isinstance(metrics, dict)
        and isinstance(metrics.get("model"), dict)
        and isinstance(metrics.get("corpora"), dict)
        and metrics["corpora"]
    ):
        raise Refusal(
            f"{path} does not load as evaluation scores: it needs a model and one corpus or more"
        )
    for name, entry in metrics["corpora"].items():
        missing = [
            key
            for key in ("loss", "perplexity", "targets")
            if not isinstance(entry, dict) or not isinstance(entry.get(key), int | float)
        ]
        if missing:
            raise Refusal(
                f"{path} does not load as evaluation scores: corpus {name} has no number "
                f"{missing[0]}"
            )
    return metrics


@dataclass(frozen=True)
class Timing:
    """A run's step times by column: step, seconds and tokens (targets) per second."""

    step: list[int]
    seconds: list[float]
    tokens_per_second: list[float]


def read_timing(path: Path) -> Timing:
    """A run's timing file, as zrodlo model train writes it (timing.csv or its --timing file)."""
    if not path.is_file():
        raise Refusal(f"{path} is not a file; --timing names a run's step times")
    lines = _csv_rows(path, "a step time")
    if not lines or ",".join(lines[0]) != TIMING_HEADER:
        header = ",".join(lines[0]) if lines else "nothing"
        raise Refusal(f"{path} starts with {header!r}; step times start with {TIMING_HEADER!r}")
    timing = Timing([], [], [])
    for number, line in enumerate(lines[1:], start=2):
        try:
            step, seconds, rate = line
            values = (int(step), float(seconds), float(rate))
        except ValueError as error:
            raise Refusal(f"{path} line {number} does not read as a step time: {error}") from None
        columns = (timing.step, timing.seconds, timing.tokens_per_second)
        for column, value in zip(columns, values, strict=True):
            column.append(value)
    return timing

"""trainer.json: a checkpoint's record of its step, its run, the run's hyperparameters, seed,
generator, corpus and tokenizer digests, environment and the sha256 of every other file, read back
and checked here, every check of it in this one place. The record carries the sha256 of its own
canonical content, so an edited value is caught like an edited weight.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from zrodlo.model.adapters import ADAPTERS_FILE
from zrodlo.model.directory import CONFIG_FILE, LISTING_FILE, MODEL_FILES, TOKENIZER_FILE
from zrodlo.storage import jsonfile
from zrodlo.storage.digest import json_sha256
from zrodlo.storage.inputs import read_input
from zrodlo.storage.listing import read_listed
from zrodlo.storage.refusal import Refusal
from zrodlo.training.plan import RunPlan

TRAINER_FILE = "trainer.json"
OPTIMIZER_FILE = "optimizer.safetensors"
# 2: the record names the run it belongs to (`run`), which format 1 did not.
TRAINER_FORMAT = 2
# What a checkpoint records of where its run came from; a resumed run records the same.
PROVENANCE = ("run", "seed", "corpus_digest", "tokenizer_digest")
# The model a run of adapters adapts: its path from the run directory and its weights' sha256.
BASE = "base"
# Every key a record of this format holds (base: only a run of adapters').
RECORD_KEYS = {
    "format_version", "generator", *PROVENANCE, "hyperparameters", "environment", "step", "files",
    "record_sha256", BASE,
}  # fmt: skip
# The files a checkpoint lists: a model directory's and the optimizer state, or for a run of
# adapters, the adapters in place of the weights (the base's are the base's).
LISTED_FILES = (*MODEL_FILES, LISTING_FILE, OPTIMIZER_FILE)
ADAPTER_FILES = (CONFIG_FILE, TOKENIZER_FILE, ADAPTERS_FILE, OPTIMIZER_FILE)
MAX_THREADS = (
    1024  # more than any machine Zrodlo runs on; a record beyond it was not written by one
)
_STEP_NAME = re.compile(r"step-(.*)")
_DIGEST = re.compile(r"[0-9a-f]{64}")


def read_record(path: Path) -> dict:
    """The trainer.json of a checkpoint, with its own digest and every file's sha256 verified."""
    return read_verified(path)[0]


def read_verified(path: Path) -> tuple[dict, dict[str, memoryview]]:
    """trainer.json and the bytes of every file it lists, each checked against its sha256.

    Each file is read once: what is checked is what the caller loads.
    """
    file = path / TRAINER_FILE
    if not file.is_file():
        raise Refusal(f"{path} cannot be read; only a checkpoint can be resumed")
    try:
        record = jsonfile.loads(read_input(file))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise Refusal(f"{file} does not load as a checkpoint record: {error}") from None
    if not isinstance(record, dict) or not isinstance(record.get("files"), dict):
        raise Refusal(f"{file} does not load as a checkpoint record: it lists no files")
    body = {key: value for key, value in record.items() if key != "record_sha256"}
    if record.get("record_sha256") != json_sha256(body):
        raise Refusal(
            f"{file} does not match the digest it was written with; it was edited after the "
            "checkpoint was written, so the checkpoint cannot be trusted"
        )
    if record.get("format_version") != TRAINER_FORMAT:
        raise Refusal(
            f"{file} has format version {record.get('format_version')!r}, and this build reads "
            f"version {TRAINER_FORMAT}"
        )
    _check_record_fields(file, record)
    return record, read_listed(path, record["files"], file, "the checkpoint")


def _check_record_fields(file: Path, record: dict) -> None:
    """Refuse a trainer.json whose own digest matches but whose step or file list no build of
    Zrodlo writes: a file outside the checkpoint is never read, a step is a count of updates."""
    listed = ADAPTER_FILES if BASE in record else LISTED_FILES
    for name, digest in record["files"].items():
        if name not in listed:
            raise Refusal(
                f"{file} lists {name!r}, which is no file of a checkpoint; a checkpoint lists "
                f"only {', '.join(listed)}"
            )
        if not isinstance(digest, str):
            raise Refusal(f"{file} records {digest!r} as the sha256 of {name}, not a digest")
    missing = [name for name in listed if name not in record["files"]]
    if missing:
        raise Refusal(f"{file} does not list {missing[0]}; the checkpoint is incomplete")
    step = record.get("step")
    if isinstance(step, bool) or not isinstance(step, int) or step < 1:
        raise Refusal(
            f"{file} records step {json.dumps(step)}; a checkpoint's step is a whole number of "
            "1 or more"
        )
    unknown = sorted(set(record) - RECORD_KEYS)
    if unknown:
        raise Refusal(
            f"{file} records {json.dumps(unknown[0])}, which no checkpoint of format "
            f"{TRAINER_FORMAT} holds"
        )
    _check_provenance(file, record)
    _check_base(file, record)


def _check_base(file: Path, record: dict) -> None:
    """Refuse a run of adapters' record whose base is not named by a path and a digest, or whose
    hyperparameters give the adapters no rank (and a record of every weight that gives one)."""
    hyperparameters = record.get("hyperparameters")
    rank = hyperparameters.get("lora_rank") if isinstance(hyperparameters, dict) else None
    if BASE not in record:
        if rank is not None:
            raise Refusal(f"{file} records adapters of rank {rank} and no base they adapt")
        return
    base = record[BASE]
    if not (
        isinstance(base, dict)
        and sorted(base) == ["path", "weights_sha256"]
        and isinstance(base["path"], str)
        and base["path"]
        and isinstance(base["weights_sha256"], str)
        and _DIGEST.fullmatch(base["weights_sha256"])
    ):
        raise Refusal(
            f"{file} records base {json.dumps(base)}; a run of adapters names its base by path "
            "and weights_sha256, a sha256 digest"
        )
    if rank is None:
        raise Refusal(f"{file} records a base and no adapters over it (no lora_rank)")


def _check_provenance(file: Path, record: dict) -> None:
    """Refuse a record whose names and provenance no run writes: the run, corpus and tokenizer are
    named by sha256 digests, and the seed is the one its hyperparameters hold."""
    run = record.get("run")
    if not isinstance(run, str) or not run:
        raise Refusal(f"{file} names no run it belongs to; the checkpoint is incomplete")
    for key in ("run", "corpus_digest", "tokenizer_digest"):
        value = record.get(key)
        if not (isinstance(value, str) and _DIGEST.fullmatch(value)):
            raise Refusal(f"{file} records {key} {json.dumps(value)}, which is no sha256 digest")
    hyperparameters = record.get("hyperparameters")
    planned = hyperparameters.get("seed") if isinstance(hyperparameters, dict) else None
    if record.get("seed") != planned or isinstance(planned, bool):
        raise Refusal(
            f"{file} records seed {json.dumps(record.get('seed'))} and hyperparameters of seed "
            f"{json.dumps(planned)}; a run draws from one seed"
        )


def named_step(path: Path) -> int | None:
    """The step a `step-<n>` directory's name states, None for a name not like a checkpoint's;
    a name like one that holds no step count (`step-x`, `step-02`) is refused."""
    match = _STEP_NAME.fullmatch(path.name)
    if match is None:
        return None
    name = match.group(1)
    if not (name.isascii() and name.isdigit()) or (len(name) > 1 and name.startswith("0")):
        raise Refusal(f"{path} is named like a checkpoint, but {name} is no step count")
    return int(name)


def check_named_step(path: Path, record: dict) -> None:
    """Refuse a checkpoint whose verified record counts other steps than its name states."""
    step = named_step(path)
    if step is not None and record.get("step") != step:
        raise Refusal(
            f"{path} records {record.get('step')} steps, not the {step} its directory name states"
        )


def recorded_plan(
    checkpoint: Path,
    record: dict,
    steps: int,
    eval_every: int | None,
    checkpoint_every: int | None,
    keep_checkpoints: int | None,
    eval_windows: int | None = None,
) -> RunPlan:
    """The checkpoint's recorded plan, taken to `steps` with a resume's scoring and writing."""
    try:
        plan = RunPlan.from_hyperparameters(
            record["hyperparameters"],
            steps=steps,
            eval_every=eval_every,
            eval_windows=eval_windows,
            checkpoint_every=checkpoint_every,
            keep_checkpoints=keep_checkpoints,
        )
        plan.validate()
    except (KeyError, TypeError) as error:
        raise Refusal(
            f"{checkpoint} records hyperparameters this build cannot read: {error}"
        ) from None
    except Refusal as refusal:  # named by its flag, as model train would have refused it
        raise Refusal(
            f"{checkpoint} records hyperparameters no run can have: {refusal.sentence}"
        ) from None
    return plan


def recorded_threads(checkpoint: Path, recorded: object) -> int:
    """The thread count a checkpoint's environment records, which a resume takes on."""
    record = checkpoint / TRAINER_FILE
    if not isinstance(recorded, dict):
        raise Refusal(f"{record} records an environment that is not an object of named values")
    threads = recorded.get("threads")
    if isinstance(threads, bool) or not isinstance(threads, int) or not 1 <= threads <= MAX_THREADS:
        raise Refusal(
            f"{record} records {json.dumps(threads)} threads; a run computes on 1 to "
            f"{MAX_THREADS} threads"
        )
    return threads

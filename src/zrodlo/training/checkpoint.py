"""Training checkpoints on disk, written whole and read back checked.

A checkpoint `step-<n>/` holds a model directory's files (`zrodlo.model.directory`) and adds
optimizer.safetensors (AdamW moments and step counts by parameter name) and trainer.json (the step,
the run it belongs to, the run's hyperparameters, seed, generator, corpus and tokenizer digests,
environment and the sha256 of every other file). trainer.json also carries the sha256 of its own
canonical content, so an edited value is caught like an edited weight. No pickle anywhere: loading a
stranger's checkpoint never runs code.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import torch

from zrodlo.model.directory import (
    LISTING_FILE,
    MODEL_FILES,
    WEIGHTS_FILE,
    Model,
    check_readable,
    model_from_files,
    read_config,
    read_model_directory,
    write_model_files,
)
from zrodlo.storage import jsonfile, tensorfile
from zrodlo.storage.digest import json_sha256, write_json
from zrodlo.storage.listing import read_listed
from zrodlo.storage.outputs import is_partial
from zrodlo.storage.refusal import Refusal

OPTIMIZER_FILE = "optimizer.safetensors"
TRAINER_FILE = "trainer.json"
CHECKPOINT_FILES = (*MODEL_FILES, LISTING_FILE, OPTIMIZER_FILE, TRAINER_FILE)
# 2: the record names the run it belongs to (`run`), which format 1 did not.
TRAINER_FORMAT = 2
# What a checkpoint records of where its run came from; a resumed run records the same.
PROVENANCE = ("run", "seed", "corpus_digest", "tokenizer_digest")
_STEP_NAME = re.compile(r"step-(.*)")


def checkpoint_name(step: int) -> str:
    """The directory name of the checkpoint after `step` updates: step-<n>, n in plain decimal."""
    return f"step-{step}"


def read_model(path: Path) -> Model:
    """Read a model directory or a checkpoint's model, every file checked against model.json or,
    in a checkpoint, trainer.json, and loaded from the bytes checked."""
    return read_model_and_record(path)[0]


def read_model_and_record(path: Path) -> tuple[Model, dict | None]:
    """A model directory or checkpoint read once: its model, and a checkpoint's verified
    trainer.json (None for a model directory). Each file is read, hashed and checked once."""
    check_readable(path)
    if (path / TRAINER_FILE).exists():
        record, files = read_verified(path)
        return model_from_files(path, files), record
    return read_model_directory(path), None


def write_checkpoint(
    directory: Path,
    model: Model,
    optimizer_state: dict[str, torch.Tensor],
    record: dict,
) -> dict:
    """Write a checkpoint's five files into `directory`; return the trainer.json record written."""
    tensor_files = {WEIGHTS_FILE: model.weights, OPTIMIZER_FILE: optimizer_state}
    files = write_model_files(directory, model.config, model.tokenizer, tensor_files)
    body = {"format_version": TRAINER_FORMAT, **record, "files": files}
    full = {**body, "record_sha256": json_sha256(body)}
    write_json(directory / TRAINER_FILE, full)
    return full


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
        record = jsonfile.loads(file.read_bytes())
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
    listed = (*MODEL_FILES, LISTING_FILE, OPTIMIZER_FILE)
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


@dataclass(frozen=True)
class Checkpoint:
    """A checkpoint read back whole: the model, the AdamW state tensors and the trainer record."""

    model: Model
    optimizer_state: dict[str, torch.Tensor]
    record: dict

    @property
    def step(self) -> int:
        return int(self.record["step"])

    @property
    def provenance(self) -> dict:
        """Where the checkpoint's run came from, as its continuation records it too."""
        return {key: self.record.get(key) for key in PROVENANCE}


def read_checkpoint(path: Path) -> Checkpoint:
    """Read a checkpoint whole, refusing a temporary a killed write left and a misnamed step."""
    if not path.is_dir():
        raise Refusal(f"{path} cannot be read; only a checkpoint can be resumed")
    if is_partial(path) and (path / TRAINER_FILE).is_file():
        raise Refusal(
            f"{path} is a temporary that a write left unfinished; only a checkpoint renamed into "
            "place can be resumed"
        )
    record, files = read_verified(path)
    check_named_step(path, record)
    if not isinstance(record.get("run"), str):
        raise Refusal(
            f"{path / TRAINER_FILE} names no run it belongs to; the checkpoint is incomplete"
        )
    model = model_from_files(path, files)
    optimizer_state = tensorfile.parse(path / OPTIMIZER_FILE, files[OPTIMIZER_FILE])
    return Checkpoint(model, optimizer_state, record)


def check_removable(path: Path, run: str | None = None) -> dict:
    """Refuse to delete a directory under a run unless it is a checkpoint Zrodlo wrote whole, and,
    given `run`, one of that run: retention removes only the checkpoints of the run being written.
    Return its verified trainer.json (an empty dict for a directory not named like a checkpoint)."""
    if named_step(path) is None:
        return {}
    record = read_record(path)
    check_named_step(path, record)
    read_config(path)
    for entry in sorted(path.iterdir()):
        if entry.name not in CHECKPOINT_FILES:
            raise Refusal(
                f"{path} holds {entry.name}, which Zrodlo does not write into a checkpoint "
                "directory; move it out, then delete the checkpoint again"
            )
    if run is not None:
        check_run_of(path, record, run)
    return record


def check_run_of(path: Path, record: dict, run: str) -> None:
    """Refuse a checkpoint whose verified record names another run than `run`."""
    if record.get("run") != run:
        raise Refusal(
            f"{path} belongs to run {record.get('run')}, and the run written into {path.parent} "
            f"is {run}; retention removes only its own run's checkpoints, so move it out"
        )


def checkpoints_in(run: Path) -> list[tuple[int, Path]]:
    """The step-<n> directories directly under a run directory, oldest first.

    A directory named like a checkpoint whose name holds no step count is refused here, since its
    place in the order is unknown; `check_removable` checks the rest before anything is deleted.
    """
    found = []
    if run.is_dir():
        for entry in run.iterdir():
            if entry.is_dir() and (step := named_step(entry)) is not None:
                found.append((step, entry))
    return sorted(found)


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

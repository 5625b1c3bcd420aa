"""Training checkpoints on disk, written whole and read back checked.

A checkpoint `step-<n>/` holds a model directory's files (`zrodlo.model.directory`) and adds
optimizer.safetensors (AdamW moments and step counts by parameter name) and trainer.json, its record
(`zrodlo.training.record`, where every check of it lives); a run of adapters' holds the adapters in
place of the weights and names its base (`zrodlo.training.adapted`). No pickle anywhere: loading a
stranger's checkpoint never runs code.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import torch

from zrodlo.data.tokenizer import tokenizer_from_bytes
from zrodlo.model.adapter_spec import AdapterSpec
from zrodlo.model.adapters import ADAPTERS_FILE, Adapters, initial_adapters
from zrodlo.model.directory import (
    CONFIG_FILE,
    LISTING_FILE,
    MODEL_FILES,
    TOKENIZER_FILE,
    WEIGHTS_FILE,
    Model,
    check_readable,
    model_from_files,
    parse_listing,
    read_config,
    read_model_directory,
    write_model_files,
)
from zrodlo.storage import tensorfile
from zrodlo.storage.digest import json_sha256, write_json
from zrodlo.storage.inputs import read_input
from zrodlo.storage.outputs import is_partial
from zrodlo.storage.refusal import Refusal
from zrodlo.training.adapted import adapted_model, base_entry, base_path, write_adapter_files
from zrodlo.training.record import (
    BASE,
    OPTIMIZER_FILE,
    PROVENANCE,
    TRAINER_FILE,
    TRAINER_FORMAT,
    check_named_step,
    named_step,
    read_record,
    read_verified,
)

CHECKPOINT_FILES = (*MODEL_FILES, LISTING_FILE, OPTIMIZER_FILE, TRAINER_FILE)
# What a checkpoint of a run of adapters may hold besides (the adapters in place of the weights).
WRITTEN_FILES = (*CHECKPOINT_FILES, ADAPTERS_FILE)


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
    return _read(path, adapters=True)


def _read(path: Path, adapters: bool) -> tuple[Model, dict | None]:
    """`read_model_and_record`, refusing a checkpoint of adapters unless `adapters`: a base is
    read without them, so that no chain of bases is followed."""
    check_readable(path)
    if not (path / CONFIG_FILE).exists() and (held := checkpoints_in(path)):
        raise Refusal(
            f"{path} is a run directory, not a model; name one of its checkpoints, such as its "
            f"newest, {held[-1][1]}"
        )
    if (path / TRAINER_FILE).exists():
        record, files = read_verified(path)
        if BASE in record and not adapters:
            raise Refusal(
                f"{path} holds adapters over {base_path(path, record)}; adapters are trained over "
                "a model directory or a checkpoint of every weight, and these continue with "
                "zrodlo checkpoint resume"
            )
        return _model_of(path, record, files), record
    return read_model_directory(path), None


def _model_of(path: Path, record: dict, files: dict[str, memoryview]) -> Model:
    """The model a checkpoint's verified files hold: its own weights, or its base's and its
    adapters."""
    if BASE not in record:
        model = model_from_files(path, files)
        _check_listing(path, record, files)
        return model
    base = base_path(path, record)
    try:
        model, sha256 = read_base(base)
    except Refusal as refusal:
        raise Refusal(
            f"{path} holds adapters over the model {base}, which cannot be read: {refusal.sentence}"
        ) from None
    return adapted_model(path, record, files, model, sha256)


def read_base(path: Path) -> tuple[Model, str]:
    """A model that adapters are trained over, and its weights file's sha256: a model directory
    or a checkpoint of every weight, not one of adapters."""
    model, record = _read(path, adapters=False)
    if record is not None:
        return model, record["files"][WEIGHTS_FILE]
    # Read whole above against this same listing, which names the weights by their sha256.
    listing = parse_listing(path / LISTING_FILE, read_input(path / LISTING_FILE))
    return model, listing[WEIGHTS_FILE]


def with_fresh_adapters(path: Path, spec: AdapterSpec, seed: int) -> Model:
    """The model at `path` with fresh adapters of `spec` drawn from `seed`: the start of a run of
    adapters."""
    model, sha256 = read_base(path)
    spec.check(model.config)
    tensors = initial_adapters(model.config, spec, seed)
    return replace(model, adapters=Adapters(spec, tensors, path, sha256))


def _check_listing(path: Path, record: dict, files: dict[str, memoryview]) -> None:
    """A checkpoint's model.json, checked as in a model directory: it must list what trainer.json
    lists."""
    for name, digest in parse_listing(path / LISTING_FILE, files[LISTING_FILE]).items():
        if digest != record["files"][name]:
            raise Refusal(
                f"{path / LISTING_FILE} records {digest} as the sha256 of {name}, and "
                f"{path / TRAINER_FILE} records {record['files'][name]}; the checkpoint was "
                "altered after it was written"
            )


def write_checkpoint(
    directory: Path,
    model: Model,
    optimizer_state: dict[str, torch.Tensor],
    record: dict,
) -> dict:
    """Write a checkpoint's files into `directory` (a temporary beside the checkpoint's place,
    in its run directory); return the trainer.json record written."""
    if model.adapters is None:
        tensor_files = {WEIGHTS_FILE: model.weights, OPTIMIZER_FILE: optimizer_state}
        files = write_model_files(directory, model.config, model.tokenizer, tensor_files)
    else:
        files = write_adapter_files(directory, model, optimizer_state)
        record = {**record, BASE: base_entry(directory.parent, model.adapters)}
    body = {"format_version": TRAINER_FORMAT, **record, "files": files}
    full = {**body, "record_sha256": json_sha256(body)}
    write_json(directory / TRAINER_FILE, full)
    return full


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
    tokenizer = tokenizer_from_bytes(path / TOKENIZER_FILE, files[TOKENIZER_FILE])
    if tokenizer.digest != record["tokenizer_digest"]:  # seed 000's sentence comes first
        raise Refusal(f"{path / TOKENIZER_FILE} is not the tokenizer {path} was trained with")
    model = _model_of(path, record, files)
    optimizer_state = tensorfile.parse(path / OPTIMIZER_FILE, files[OPTIMIZER_FILE])
    return Checkpoint(model, optimizer_state, record)


def check_removable(path: Path, run: str | None = None, vouched: bool = False) -> dict:
    """Refuse to delete a directory under a run unless it is a checkpoint Zrodlo wrote whole, and,
    given `run`, one of that run: retention removes only the checkpoints of the run being written.
    Return its verified trainer.json (an empty dict for a directory not named like a checkpoint).

    A checkpoint `vouched` for (written by this run, or read whole when it claimed the directory)
    is not read again: only its entries are checked, so retention hashes no file twice."""
    if named_step(path) is None:
        return {}
    if vouched:
        _check_only_checkpoint_files(path)
        return {}
    record = read_record(path)
    check_named_step(path, record)
    read_config(path)
    _check_only_checkpoint_files(path)
    if run is not None:
        check_run_of(path, record, run)
    return record


def _check_only_checkpoint_files(path: Path) -> None:
    """Refuse a checkpoint directory that holds a file Zrodlo does not write into one."""
    for entry in sorted(path.iterdir()):
        if entry.name not in WRITTEN_FILES:
            raise Refusal(
                f"{path} holds {entry.name}, which Zrodlo does not write into a checkpoint "
                "directory; move it out, then delete the checkpoint again"
            )


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

"""Checkpoints of a run of adapters (LoRA): config.json, tokenizer.json, adapters.safetensors and
optimizer.safetensors (the adapters' AdamW state), with trainer.json naming the base model by its
path from the run directory and the sha256 of its weights file. The base's weights are never
copied into a checkpoint: every read of one reads the base and holds it to that digest, so a base
that changed is refused instead of adapted.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import torch

from zrodlo.data.tokenizer import tokenizer_from_bytes
from zrodlo.model.adapter_spec import AdapterSpec
from zrodlo.model.adapters import ADAPTERS_FILE, Adapters, check_adapters
from zrodlo.model.directory import (
    CONFIG_FILE,
    TOKENIZER_FILE,
    WEIGHTS_FILE,
    Model,
    read_config,
)
from zrodlo.storage import tensorfile
from zrodlo.storage.digest import file_sha256, write_json
from zrodlo.storage.refusal import Refusal
from zrodlo.training.record import BASE, OPTIMIZER_FILE, TRAINER_FILE


def write_adapter_files(
    directory: Path, model: Model, optimizer_state: dict[str, torch.Tensor]
) -> dict[str, str]:
    """Write a run of adapters' checkpoint files but trainer.json; return their sha256 by name."""
    assert model.adapters is not None
    write_json(directory / CONFIG_FILE, model.config.to_json())
    model.tokenizer.save(directory)
    digests = {name: file_sha256(directory / name) for name in (CONFIG_FILE, TOKENIZER_FILE)}
    tensor_files = {
        directory / ADAPTERS_FILE: model.adapters.tensors,
        directory / OPTIMIZER_FILE: optimizer_state,
    }
    written = tensorfile.write(tensor_files)
    return digests | {path.name: digest for path, digest in written.items()}


def base_entry(run: Path, adapters: Adapters) -> dict[str, str]:
    """What trainer.json records of the base: its path from the run directory `run` (so that the
    run and its base move together, as in a repository) and its weights file's sha256."""
    path = os.path.relpath(adapters.base.absolute(), run.absolute())
    return {"path": Path(path).as_posix(), "weights_sha256": adapters.base_sha256}


def base_path(checkpoint: Path, record: dict) -> Path:
    """The base a checkpoint's verified record names, as a path from where the command runs."""
    return Path(os.path.normpath(checkpoint.parent / record[BASE]["path"]))


def recorded_spec(checkpoint: Path, record: dict) -> AdapterSpec:
    """The adapters' rank, alpha, targets and base format as the verified record's hyperparameters
    hold them (a record without lora_base held its base in float32)."""
    hyperparameters = record["hyperparameters"]
    rank, alpha = hyperparameters.get("lora_rank"), hyperparameters.get("lora_alpha")
    targets, base = hyperparameters.get("lora_targets"), hyperparameters.get("lora_base", "f32")
    if not (isinstance(targets, str) and isinstance(alpha, (int, float))):
        raise Refusal(
            f"{checkpoint / TRAINER_FILE} records adapters without their lora_alpha and "
            "lora_targets"
        )
    return AdapterSpec(rank, float(alpha), tuple(targets.split(",")), base)


def adapted_model(
    checkpoint: Path, record: dict, files: dict[str, memoryview], base: Model, sha256: str
) -> Model:
    """The model a run of adapters' checkpoint holds: its base's weights (read from `base`,
    whose weights file has `sha256`) and its adapters, each checked against the record."""
    config = read_config(checkpoint, files[CONFIG_FILE])
    tokenizer = tokenizer_from_bytes(checkpoint / TOKENIZER_FILE, files[TOKENIZER_FILE])
    expected = record[BASE]["weights_sha256"]
    if sha256 != expected:
        raise Refusal(
            f"{base.path / WEIGHTS_FILE} has sha256 {sha256}, and the adapters of {checkpoint} "
            f"were trained on a base whose weights have sha256 {expected}; give them the model "
            "they were trained on"
        )
    if base.config != config or base.tokenizer.digest != tokenizer.digest:
        raise Refusal(
            f"{checkpoint} holds a {CONFIG_FILE} or {TOKENIZER_FILE} other than its base "
            f"{base.path}'s; the checkpoint was altered after it was written"
        )
    spec = recorded_spec(checkpoint, record)
    try:
        spec.check(config)
    except Refusal as refusal:
        raise Refusal(
            f"{checkpoint / TRAINER_FILE} records adapters no run can have: {refusal.sentence}"
        ) from None
    file = checkpoint / ADAPTERS_FILE
    tensors = tensorfile.parse(file, files[ADAPTERS_FILE])
    check_adapters(config, spec, tensors, str(file))
    return replace(base, path=checkpoint, adapters=Adapters(spec, tensors, base.path, sha256))

"""Model directories on disk, written whole and read back checked.

A model directory holds config.json, tokenizer.json and model.safetensors, and model.json, which
lists the sha256 of those three: every read checks them. A checkpoint (`zrodlo.training.checkpoint`)
holds the same files and more. No pickle anywhere: loading a stranger's model never runs code.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch

from zrodlo.data.tokenizer import FILE_NAME as TOKENIZER_FILE
from zrodlo.data.tokenizer import Tokenizer, load_tokenizer, tokenizer_from_bytes
from zrodlo.draws.chacha import check_seed
from zrodlo.model.adapters import Adapters
from zrodlo.model.config import ModelConfig
from zrodlo.model.presets import SHAPE, shape_of
from zrodlo.model.weights import check_weights, initial_weights
from zrodlo.storage import jsonfile, tensorfile
from zrodlo.storage.digest import file_sha256, write_json
from zrodlo.storage.inputs import read_input
from zrodlo.storage.listing import read_listed
from zrodlo.storage.outputs import check_new_directory, is_partial, new_directory
from zrodlo.storage.refusal import Refusal

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
LISTING_FILE = "model.json"  # the sha256 of the three files below
MODEL_FILES = (CONFIG_FILE, TOKENIZER_FILE, WEIGHTS_FILE)
MODEL_FORMAT = 1


def write_model(
    directory: Path, config: ModelConfig, tokenizer: Tokenizer, weights: dict[str, torch.Tensor]
) -> dict[str, str]:
    """Write the files of a model directory; return their sha256 by file name."""
    return write_model_files(directory, config, tokenizer, {WEIGHTS_FILE: weights})


def write_model_files(
    directory: Path,
    config: ModelConfig,
    tokenizer: Tokenizer,
    tensor_files: dict[str, dict[str, torch.Tensor]],
) -> dict[str, str]:
    """Write the files of a model directory, its weights among `tensor_files` (file name to
    tensors), and any other tensor files in the same pass, so that one file's hash overlaps the
    next one's write; return every file's sha256 by file name."""
    write_json(directory / CONFIG_FILE, config.to_json())
    tokenizer.save(directory)
    digests = {name: file_sha256(directory / name) for name in (CONFIG_FILE, TOKENIZER_FILE)}
    written = tensorfile.write({directory / name: t for name, t in tensor_files.items()})
    tensor_digests = {path.name: digest for path, digest in written.items()}
    digests[WEIGHTS_FILE] = tensor_digests.pop(WEIGHTS_FILE)
    write_json(directory / LISTING_FILE, {"format_version": MODEL_FORMAT, "files": digests})
    return {**digests, LISTING_FILE: file_sha256(directory / LISTING_FILE), **tensor_digests}


def read_config(path: Path, data: memoryview | None = None) -> ModelConfig:
    """The configuration of a model directory, from `data` when its checked bytes are at hand."""
    file = path / CONFIG_FILE
    if data is None and not file.is_file():
        raise Refusal(
            f"{path} holds no {CONFIG_FILE}; a model directory is written by zrodlo model init "
            "or by zrodlo model train"
        )
    try:
        parsed = jsonfile.loads(read_input(file) if data is None else data)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise Refusal(f"{file} does not load as a model configuration: {error}") from None
    return ModelConfig.from_json(parsed, str(file))


@dataclass(frozen=True)
class Model:
    """A model directory read back: its configuration, tokenizer and float32 weights by name; a
    checkpoint of a run that trained adapters also holds those, its weights its base's."""

    path: Path
    config: ModelConfig
    tokenizer: Tokenizer
    weights: dict[str, torch.Tensor]
    adapters: Adapters | None = None

    def without_weights(self) -> Model:
        """This model with its weights let go: what a run keeps of where it started once its
        network holds copies of them, so that it does not hold them twice."""
        return replace(self, weights={})


def read_model_directory(path: Path) -> Model:
    """Read a model directory, every file checked against its model.json and loaded from the bytes
    checked."""
    check_readable(path)
    return model_from_files(path, _read_listed(path))


def check_readable(path: Path) -> None:
    """Refuse a path that is no directory, or a temporary a killed write left."""
    if not path.is_dir():
        raise Refusal(
            f"{path} is not a directory; a model directory holds {', '.join(MODEL_FILES)}"
        )
    if is_partial(path):
        raise Refusal(
            f"{path} is a temporary that a write left unfinished; only a model directory or "
            "checkpoint renamed into place can be read"
        )


def model_from_files(path: Path, verified: dict[str, memoryview]) -> Model:
    """The model whose files' checked bytes are `verified` (file name to bytes)."""
    config = read_config(path, verified[CONFIG_FILE])
    tokenizer = tokenizer_from_bytes(path / TOKENIZER_FILE, verified[TOKENIZER_FILE])
    weights_file = path / WEIGHTS_FILE
    weights = tensorfile.parse(weights_file, verified[WEIGHTS_FILE])
    check_weights(config, weights, str(weights_file))
    return Model(path, config, tokenizer, weights)


def _read_listed(path: Path) -> dict[str, memoryview]:
    """The checked bytes of a model directory's files, as its model.json lists them."""
    read_config(path)  # a directory without config.json is no model directory: say so first
    file = path / LISTING_FILE
    if not file.is_file():
        raise Refusal(
            f"{path} holds no {LISTING_FILE}, which lists the sha256 of its files; a model "
            "directory is written by zrodlo model init or by zrodlo model train"
        )
    try:
        data = read_input(file)
    except OSError as error:
        raise Refusal(f"{file} does not load as a model manifest: {error}") from None
    return read_listed(path, parse_listing(file, data), file, "the model directory")


def parse_listing(file: Path, data: bytes | memoryview) -> dict[str, str]:
    """The sha256 of each model file that model.json's bytes `data` list, its form checked."""
    try:
        manifest = jsonfile.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise Refusal(f"{file} does not load as a model manifest: {error}") from None
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if not (
        isinstance(files, dict)
        and sorted(manifest) == ["files", "format_version"]
        and sorted(files) == sorted(MODEL_FILES)
        and all(isinstance(digest, str) for digest in files.values())
    ):
        raise Refusal(
            f"{file} does not load as a model manifest: it holds its format_version and the "
            f"sha256 of {', '.join(MODEL_FILES)}, and nothing else"
        )
    if manifest.get("format_version") != MODEL_FORMAT:
        raise Refusal(
            f"{file} has format version {manifest.get('format_version')!r}, and this build reads "
            f"version {MODEL_FORMAT}"
        )
    return files


def check_tokenizer_fits(model: Model) -> None:
    """Refuse a model whose tokenizer has more tokens than the model has rows for, before a
    command draws or decodes with it. (Training refuses the corpus tokens outside the rows with
    seed 001's own sentence.)"""
    if model.tokenizer.vocab_size > model.config.vocab_size:
        raise Refusal(
            f"{model.path / TOKENIZER_FILE} has {model.tokenizer.vocab_size} tokens, more than "
            f"the vocab_size {model.config.vocab_size} of {model.path / CONFIG_FILE}; the model "
            "has no weights for the rest"
        )


@dataclass(frozen=True)
class InitializedModel:
    """What `init` wrote: the model directory, its configuration and its files' sha256."""

    path: Path
    config: ModelConfig
    digests: dict[str, str]


def init(
    tokenizer: Path, output: Path, *, seed: int, preset: str | None = None, **shape: Any
) -> InitializedModel:
    """Write the new model directory `output` for the tokenizer (or model) directory `tokenizer`:
    its configuration from `shape` (the fields of `ModelConfig` but the vocabulary, which is the
    tokenizer's), where layers, heads, d_model and d_ff not given (or None) are the `preset`'s,
    and weights drawn from ChaCha20 keyed by `seed`."""
    check_new_directory(output)
    fitted = load_tokenizer(tokenizer)
    given = {field: shape.pop(field, None) for field in SHAPE}
    config = ModelConfig.of(vocab_size=fitted.vocab_size, **shape_of(preset, given), **shape)
    config.validate()
    check_seed(seed)
    weights = initial_weights(config, seed)
    with new_directory(output) as partial:
        digests = write_model(partial, config, fitted, weights)
    return InitializedModel(output, config, digests)

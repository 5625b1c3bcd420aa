"""A transformers model's weights (one model.safetensors, or its shards) read as a Zrodlo model's
float32 weights.

The headers are held against the configuration first: the layers they hold, how many numbers,
and each tensor the family names, its dtype and its shape. Until the layers agree nothing is built
whose size config.json states, and no byte of data is read before every tensor agrees, so a
config.json that claims more than its files hold is refused in a sentence instead of filling the
memory. Then only the tensors the model needs are read, each straight from its file into its
float32 weight: no file is mapped whole, so what the files hold beside the model costs nothing,
and the weights are in memory once. Where no tensor's name starts with the family's base model
prefix (the hub's GPT-2 holds `wte.weight`, not `transformer.wte.weight`), every name is read as
if it did, as transformers reads a base model's file into its causal LM; the head's name, outside
the base model, is read as it is.

Every tensor is read or refused: one the model has no place for is named in a sentence (a part
Zrodlo does not compute, a file of another model), but for the buffers transformers computes
itself (the family's `ignored_buffers`), and a head stored beside the embedding it is tied to is
read and must equal it.
"""

from __future__ import annotations

import contextlib
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import torch

from zrodlo.exchange.source_files import Located, Weights
from zrodlo.model.config import ModelConfig
from zrodlo.model.families.base import Family, Names
from zrodlo.model.parts import parameter_count, parameter_shapes
from zrodlo.model.weights import check_weights
from zrodlo.storage import tensorfile
from zrodlo.storage.inputs import open_input
from zrodlo.storage.refusal import Refusal

# The dtypes float32 holds every value of, so the weights are read exactly.
EXACT_IN_FLOAT32 = (torch.float32, torch.bfloat16, torch.float16)


def read_weights(
    config: ModelConfig, stated: dict[str, Any], files: Weights, config_file: Path
) -> dict[str, torch.Tensor]:
    """The weights of the model `config` (read from `config_file`, parsed as `stated`) in the
    transformers weights `files`, under Zrodlo's names, as float32; refused in a sentence naming
    the file and the field or tensor where the two disagree."""
    family = config.family
    header = _as_transformers_reads(family, files.tensors)
    layers = _layers_held(family.block_prefix, header)
    if layers != config.layers:
        field = family.transformers_fields.get("layers", "layers")
        raise Refusal(
            f"{config_file} states {field} {config.layers}, and {files.holder('holds', 'hold')} "
            f"tensors of {layers} layers"
        )
    needed, holds = parameter_count(config), sum(math.prod(s.shape) for s in header.values())
    if needed > holds:
        raise Refusal(
            f"{config_file} states a model of {needed:,} parameters, and "
            f"{files.holder('holds', 'hold')} values for {holds:,} of them"
        )
    names, shapes = family.transformers_names(config), parameter_shapes(config)
    parts, model_type = _part_shapes(names, shapes), stated["model_type"]
    stored_head = _stored_tied_head(config, header)
    if stored_head is not None:  # read too, to be held equal to the embedding
        parts[stored_head] = shapes["token_embedding.weight"]
    for part, shape in parts.items():
        _check_tensor(part, shape, header.get(part), model_type, files, config_file)
    _refuse_unread(family, header, set(parts), model_type)
    try:
        weights = _read(header, names, shapes)
        if stored_head is not None:
            _check_tied_head(config, header, stored_head, weights, config_file)
    except MemoryError:
        raise Refusal(
            f"{files.holder('holds', 'hold')} the {needed:,} weights of the model, "
            f"{needed * 4 / 2**30:.2f} GiB as float32, more than this process can take into memory"
        ) from None
    check_weights(config, weights, str(files.file.parent if files.sharded else files.file))
    return weights


def _as_transformers_reads(family: Family, header: dict[str, Located]) -> dict[str, Located]:
    """The tensors under the names transformers reads them by: a file of the base model alone
    (no name starts with the family's base prefix) read as if each name had the prefix, but for
    the names the family keeps outside the base model (the head)."""
    prefix = family.base_prefix
    if any(name.startswith(prefix) for name in header):
        return header
    outside = {name for name in family.outer_names.values() if not name.startswith(prefix)}
    return {(name if name in outside else prefix + name): held for name, held in header.items()}


def _stored_tied_head(config: ModelConfig, header: dict[str, Located]) -> str | None:
    """The name of the head a checkpoint of a tied model holds beside its token embedding (a
    save that wrote both), or None."""
    head = config.family.outer_names["lm_head.weight"]
    return head if config.parts.tied_head and head in header else None


def _check_tied_head(
    config: ModelConfig,
    header: dict[str, Located],
    head: str,
    weights: dict[str, torch.Tensor],
    config_file: Path,
) -> None:
    """Refuse a stored head that differs from the token embedding it is tied to: transformers
    reads the embedding in its place, so the file states two models."""
    stored = _read(header, {"head": ([(head, config.vocab_size)], False)},
                   {"head": (config.vocab_size, config.d_model)})["head"]  # fmt: skip
    if not torch.equal(stored, weights["token_embedding.weight"]):
        field = config.family.transformers_fields.get("tie_embeddings", "tie_word_embeddings")
        raise Refusal(
            f"{header[head].file} holds {head}, which differs from the token embedding that "
            f"{config_file} ties the head to ({field}); transformers reads the embedding in its "
            "place, so the model cannot be imported exactly"
        )


def _refuse_unread(
    family: Family, header: dict[str, Located], read: set[str], model_type: str
) -> None:
    """Refuse a tensor that the model would not read, naming it (the first by name), unless it is
    a buffer transformers computes itself: every tensor of a checkpoint is read or refused, so
    nothing it holds is dropped without a word."""
    ignored = re.compile(family.ignored_buffers)
    unread = sorted(name for name in header if name not in read and not ignored.fullmatch(name))
    if unread:
        name = unread[0]
        more = f" (and {len(unread) - 1} more)" if len(unread) > 1 else ""
        raise Refusal(
            f"{header[name].file} holds tensor {name}{more}, which a {model_type} model of this "
            "configuration does not read; Zrodlo imports a checkpoint whose every tensor it reads"
        )


def _layers_held(block_prefix: str, header: dict[str, Located]) -> int:
    """How many layers a header holds tensors of: the distinct indices in its blocks' names."""
    before, after = block_prefix.split("{}")
    block = re.compile(re.escape(before) + r"(\d+)" + re.escape(after))
    return len({match.group(1) for name in header if (match := block.match(name))})


def _part_shapes(names: Names, shapes: dict[str, tuple[int, ...]]) -> dict[str, tuple[int, ...]]:
    """The shape transformers holds each of its tensors in: the rows of a Zrodlo parameter, or of
    its transpose, that the tensor holds."""
    parts = {}
    for name, (named, transposed) in names.items():
        stacked = shapes[name][::-1] if transposed else shapes[name]
        parts |= {part: (rows, *stacked[1:]) for part, rows in named}
    return parts


def _check_tensor(
    part: str,
    shape: tuple[int, ...],
    stored: Located | None,
    model_type: str,
    files: Weights,
    config_file: Path,
) -> None:
    if stored is None:
        raise Refusal(f"{files.holder('has', 'have')} no tensor {part}, which a {model_type} needs")
    file = stored.file  # the shard that holds it, where the weights are sharded
    if stored.dtype not in EXACT_IN_FLOAT32:
        *others, last = (tensorfile.DTYPES[dtype][0] for dtype in EXACT_IN_FLOAT32)
        raise Refusal(
            f"{file} holds {part} as {tensorfile.DTYPES[stored.dtype][0]}; Zrodlo reads weights "
            f"stored as {', '.join(others)} or {last}"
        )
    if tuple(stored.shape) != shape:
        raise Refusal(
            f"{file} holds {part} with shape {list(stored.shape)}, but {config_file} needs "
            f"{list(shape)}"
        )


def _read(
    held: dict[str, Located], names: Names, shapes: dict[str, tuple[int, ...]]
) -> dict[str, torch.Tensor]:
    """Each Zrodlo parameter, allocated once as float32 (by numpy, which says MemoryError where
    torch would say RuntimeError), its parts read from their files into their rows of it or of
    its transpose; each file is opened once, when a part it holds is first read."""
    weights = {}
    with contextlib.ExitStack() as opened:
        handles: dict[Path, Any] = {}
        for name, (parts, transposed) in names.items():
            weight = torch.from_numpy(np.empty(shapes[name], dtype=np.float32))
            stacked = weight.t() if transposed else weight
            row = 0
            for part, rows in parts:
                target = stacked[row : row + rows]  # (rows, ...) as transformers holds the part
                file, start, stored = held[part]
                if file not in handles:
                    handles[file] = opened.enter_context(open_input(file, buffering=0))
                handle, offset = handles[file], start + stored.begin
                if stored.dtype == torch.float32 and target.is_contiguous():
                    _read_into(handle, offset, target.numpy(), file, part)
                else:
                    raw = np.empty(stored.stop - stored.begin, dtype=np.uint8)
                    _read_into(handle, offset, raw, file, part)
                    target.copy_(torch.from_numpy(raw).view(stored.dtype).reshape(stored.shape))
                row += rows
            weights[name] = weight
    return weights


def _read_into(handle: Any, offset: int, array: np.ndarray, file: Path, part: str) -> None:
    """Fill `array`'s bytes from the file at `offset`."""
    buffer, filled = memoryview(array).cast("B"), 0
    handle.seek(offset)
    while filled < len(buffer):
        count = handle.readinto(buffer[filled:])
        if not count:  # the file shrank after its header was read
            raise Refusal(f"{file} ends inside the data of tensor {part}")
        filled += count

"""A transformers model.safetensors read as a Zrodlo model's float32 weights.

The file's header is held against the configuration first: the layers it holds, how many numbers
it holds, and each tensor the family names, its dtype and its shape. Until the layers agree
nothing is built whose size config.json states, and no byte of data is read before every tensor
agrees, so a config.json that claims more than its file holds is refused in a sentence instead
of filling the memory. Then only the tensors the model needs are read, each straight into its
float32 weight: the file is never mapped whole, so what it holds beside the model costs nothing,
and the weights are in memory once.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import torch

from zrodlo.model.config import ModelConfig
from zrodlo.model.families.base import Names
from zrodlo.model.parts import parameter_count, parameter_shapes
from zrodlo.model.weights import check_weights
from zrodlo.storage import tensorfile
from zrodlo.storage.inputs import open_input
from zrodlo.storage.refusal import Refusal
from zrodlo.storage.tensorfile import Stored

# The dtypes float32 holds every value of, so the weights are read exactly.
EXACT_IN_FLOAT32 = (torch.float32, torch.bfloat16, torch.float16)


def read_weights(
    config: ModelConfig, stated: dict[str, Any], file: Path, config_file: Path
) -> dict[str, torch.Tensor]:
    """The weights of the model `config` (read from `config_file`, parsed as `stated`) in the
    transformers weights file `file`, under Zrodlo's names, as float32; refused in a sentence
    naming the file and the field or tensor where the two disagree."""
    try:
        start, header = tensorfile.read_header(file)
    except OSError as error:
        raise Refusal(f"{file} does not load as safetensors: {error}") from None
    family = config.family
    layers = _layers_held(family.block_prefix, header)
    if layers != config.layers:
        field = family.transformers_fields.get("layers", "layers")
        raise Refusal(
            f"{config_file} states {field} {config.layers}, and {file} holds tensors of "
            f"{layers} layers"
        )
    # Where transformers reads a tensor under another's name (a tied head), so does the check.
    held = {
        name: stored
        for name, stored in family.transformers_weights_read(stated, header).items()
        if stored is not None
    }
    needed, holds = parameter_count(config), sum(math.prod(s.shape) for s in held.values())
    if needed > holds:
        raise Refusal(
            f"{config_file} states a model of {needed:,} parameters, and {file} holds values for "
            f"{holds:,} of them"
        )
    names, shapes = family.transformers_names(config), parameter_shapes(config)
    for part, shape in _part_shapes(names, shapes).items():
        _check_tensor(part, shape, held.get(part), stated["model_type"], file, config_file)
    try:
        weights = _read(file, start, held, names, shapes)
    except MemoryError:
        raise Refusal(
            f"{file} holds the {needed:,} weights of the model, {needed * 4 / 2**30:.2f} GiB as "
            "float32, more than this process can take into memory"
        ) from None
    check_weights(config, weights, str(file))
    return weights


def _layers_held(block_prefix: str, header: dict[str, Stored]) -> int:
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
    stored: Stored | None,
    model_type: str,
    file: Path,
    config_file: Path,
) -> None:
    if stored is None:
        raise Refusal(f"{file} has no tensor {part}, which a {model_type} needs")
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
    file: Path,
    start: int,
    held: dict[str, Stored],
    names: Names,
    shapes: dict[str, tuple[int, ...]],
) -> dict[str, torch.Tensor]:
    """Each Zrodlo parameter, allocated once as float32 (by numpy, which says MemoryError where
    torch would say RuntimeError), its parts read into their rows of it or of its transpose."""
    weights = {}
    with open_input(file, buffering=0) as handle:
        for name, (parts, transposed) in names.items():
            weight = torch.from_numpy(np.empty(shapes[name], dtype=np.float32))
            stacked = weight.t() if transposed else weight
            row = 0
            for part, rows in parts:
                target = stacked[row : row + rows]  # (rows, ...) as transformers holds the part
                stored = held[part]
                if stored.dtype == torch.float32 and target.is_contiguous():
                    _read_into(handle, start + stored.begin, target.numpy(), file, part)
                else:
                    raw = np.empty(stored.stop - stored.begin, dtype=np.uint8)
                    _read_into(handle, start + stored.begin, raw, file, part)
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

"""A model's weights: drawn from ChaCha20 for a fresh model, bit-identical on every machine, and
checked against the configuration wherever they are read.
"""

from __future__ import annotations

import hashlib
import math

import numpy as np
import torch

from zrodlo.draws.chacha import Purpose, Stream
from zrodlo.draws.floats import normal
from zrodlo.model.config import ModelConfig
from zrodlo.model.parts import MIX_SCALES, parameter_shapes
from zrodlo.storage.refusal import Refusal

INIT_STD = 0.02


def _initial_std(name: str, config: ModelConfig) -> float | None:
    """The standard deviation a parameter is drawn with, or None for a constant (a bias, a norm,
    a projection that starts at zero, a value-embedding gate)."""
    parts = config.parts
    if name.endswith(".bias") or name.endswith("norm.weight") or name in MIX_SCALES:
        return None
    if name.endswith("attention.value_gate.weight"):  # 2 sigmoid(0) = 1: the embeddings whole
        return None
    if name.endswith("attention.out.weight") or name.endswith("mlp.down.weight"):
        if parts.zero_projections:  # each block starts as the identity on the residual stream
            return None
        # Each block adds two branches to the residual stream; scaling them keeps its variance
        # from growing with depth.
        return INIT_STD / math.sqrt(2 * config.layers)
    if name == "lm_head.weight" and parts.head_std is not None:
        return parts.head_std
    return INIT_STD


def _constant(name: str, config: ModelConfig) -> float:
    """What a parameter that is not drawn holds: a norm's unit scale; the x0 mix's scalars, which
    start as the plain residual stream (1) with `x0_mix` of the embeddings' output; else zero."""
    if name.endswith("norm.weight"):
        return config.parts.norm.unit
    return {"residual_scales": 1.0, "x0_scales": config.parts.x0_mix}.get(name, 0.0)


def initial_weights(config: ModelConfig, seed: int) -> dict[str, torch.Tensor]:
    """Float32 initial weights, bit-identical on every machine: the i-th name in sorted order is
    drawn from ChaCha20 stream (seed, INIT, a=i) as row-major standard normals times its std."""
    weights: dict[str, torch.Tensor] = {}
    for index, (name, shape) in enumerate(sorted(parameter_shapes(config).items())):
        std = _initial_std(name, config)
        if std is None:
            weights[name] = torch.full(shape, _constant(name, config), dtype=torch.float32)
            continue
        draws = normal(Stream(seed, Purpose.INIT, a=index), 0, math.prod(shape))
        weights[name] = torch.from_numpy(draws.reshape(shape) * np.float32(std))
    return weights


def check_weights(config: ModelConfig, weights: dict[str, torch.Tensor], source: str) -> None:
    """Refuse weights that do not fit `config`; `source` names where they were read from."""
    shapes = parameter_shapes(config)
    for name, shape in shapes.items():
        if name not in weights:
            raise Refusal(f"{source} has no tensor {name}, which its model configuration needs")
        tensor = weights[name]
        if tuple(tensor.shape) != shape:
            raise Refusal(
                f"{source} holds {name} with shape {list(tensor.shape)}, "
                f"but its model configuration needs {list(shape)}"
            )
        if tensor.dtype != torch.float32:
            raise Refusal(f"{source} holds {name} as {tensor.dtype}; model weights are float32")
    extra = sorted(set(weights) - set(shapes))
    if extra:
        raise Refusal(
            f"{source} holds tensor {extra[0]}, which its model configuration has no place for"
        )
    # A tensor's least and greatest values are NaN if any value is, and infinite if any is: two
    # reductions tell what a pass writing a tensor of booleans per weight would, five times faster.
    named = [name for name in shapes if weights[name].numel()]
    extremes = [torch.stack(torch.aminmax(weights[name])) for name in named]  # P of (2,)
    finite = torch.isfinite(torch.stack(extremes)).all(dim=1).tolist() if named else []
    for name, ok in zip(named, finite, strict=True):
        if not ok:
            raise Refusal(f"{source} holds {name} with values that are not finite numbers")


def weights_sha256(weights: dict[str, torch.Tensor]) -> str:
    """sha256 of weights by content: each tensor's name, dtype, shape and bytes, in name order."""
    digest = hashlib.sha256()
    for name in sorted(weights):
        tensor = weights[name].detach().contiguous().cpu()
        digest.update(f"{name}|{tensor.dtype}|{list(tensor.shape)}|".encode())
        digest.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()

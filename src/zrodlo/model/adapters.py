"""Low-rank adapters (LoRA): beside a frozen linear W, a trained pair A (r, in) and B (out, r) whose
product, scaled by alpha / r, is added to W's output, y = W x + (alpha / r) B A x, so that a
fine-tune trains and keeps r (in + out) numbers a target instead of in x out.

Each target (`zrodlo.model.adapter_spec`) has its own pair, so an adapter exports to the separate
projections of transformers' llama and qwen2 as it is, and to GPT-2's fused c_attn as one adapter
whose B is block-diagonal. A is drawn from ChaCha20 (uniform in +-1/sqrt(in), the bound of the
kaiming-uniform draw the LoRA paper's code uses) and B starts at zero, so a model with fresh
adapters computes what its base computes, to the bit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from zrodlo.draws.chacha import Purpose, Stream
from zrodlo.draws.floats import uniform
from zrodlo.model.adapter_spec import AdapterSpec, places
from zrodlo.model.config import ModelConfig
from zrodlo.model.held_base import rounded
from zrodlo.storage.refusal import Refusal

ADAPTERS_FILE = "adapters.safetensors"


@dataclass(frozen=True)
class Adapters:
    """Adapters over a base model: their spec, their tensors by `AdapterSpec.shapes` name, and
    the base they were trained on, its directory and the sha256 of its weights file."""

    spec: AdapterSpec
    tensors: dict[str, torch.Tensor]
    base: Path
    base_sha256: str


def check_adapters(
    config: ModelConfig, spec: AdapterSpec, tensors: dict[str, torch.Tensor], source: str
) -> None:
    """Refuse adapter tensors that are not the float32 tensors of `spec` for `config`, each of
    its shape, all of them and nothing else."""
    shapes = spec.shapes(config)
    for name in sorted(set(shapes) ^ set(tensors)):
        held = "holds" if name in tensors else "lacks"
        raise Refusal(
            f"{source} {held} {name}; the adapters of rank {spec.rank} on "
            f"{','.join(spec.targets)} of this model are {len(shapes)} tensors"
        )
    for name, shape in shapes.items():
        tensor = tensors[name]
        if tensor.dtype != torch.float32 or tuple(tensor.shape) != shape:
            raise Refusal(
                f"{source} holds {name} as {tensor.dtype} {tuple(tensor.shape)}; it is float32 "
                f"{shape}"
            )


def initial_adapters(config: ModelConfig, spec: AdapterSpec, seed: int) -> dict[str, torch.Tensor]:
    """Fresh adapters: the i-th A in `shapes` order drawn from ChaCha20 stream (seed, ADAPTERS,
    a=i) as row-major uniforms in +-1/sqrt(in), every B zero; float32, the same on every machine."""
    adapters: dict[str, torch.Tensor] = {}
    drawn = 0
    for name, shape in spec.shapes(config).items():
        if name.endswith(".B"):
            adapters[name] = torch.zeros(shape, dtype=torch.float32)
            continue
        bound = np.float32(1.0 / math.sqrt(shape[1]))
        draws = uniform(Stream(seed, Purpose.ADAPTERS, a=drawn), 0, shape[0] * shape[1])
        adapters[name] = torch.from_numpy((draws * np.float32(2) - np.float32(1)) * bound).reshape(
            shape
        )
        drawn += 1
    return adapters


class Adapted(nn.Module):
    """A frozen linear with the adapters of its targets, which add scale * B (A x) to its rows.

    `slices` are (target, first row, row after the last, A (r, in), B (rows, r)), in row order;
    each pair is the parameters A and B of the submodule lora_<target>, so the model names them
    as `AdapterSpec.shapes` does. The pairs are computed as one: A stacked (k r, in) and B placed
    block-diagonally in the linear's rows (out, k r), zero where no target lies, one low-rank
    product added to the linear's output (a whole-tensor add: adding into slices in place makes
    autograd copy the whole gradient once for each)."""

    def __init__(
        self,
        base: nn.Linear,
        slices: list[tuple[str, int, int, torch.Tensor, torch.Tensor]],
        scale: float,
    ) -> None:
        super().__init__()
        self.base, self.scale = base, scale
        self.targets = [target for target, _, _, _, _ in slices]
        # Rows no target adapts, before each target and after the last: empty blocks of B.
        starts = [start for _, start, _, _, _ in slices]
        ends = [0] + [stop for _, _, stop, _, _ in slices]
        self.gaps = [start - end for start, end in zip(starts, ends, strict=False)]
        self.gaps.append(base.weight.shape[0] - ends[-1])
        device = base.weight.device
        for target, _, _, a, b in slices:
            pair = {"A": a, "B": b}
            self.add_module(
                f"lora_{target}",
                nn.ParameterDict(
                    {half: nn.Parameter(t.detach().to(device).clone()) for half, t in pair.items()}
                ),
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pairs = [getattr(self, f"lora_{target}") for target in self.targets]
        a = torch.cat([pair["A"] for pair in pairs])  # (k r, in)
        blocks = []
        for gap, pair in zip(self.gaps, [*pairs, None], strict=True):
            blocks.append(pairs[0]["B"].new_zeros((gap, 0)))  # rows of no target: zero
            if pair is not None:
                blocks.append(pair["B"])
        b = torch.block_diag(*blocks)  # (out, k r)
        return self.base(x) + self.scale * ((x @ a.t()) @ b.t())  # (B, T, out)


def attach(
    model: nn.Module, config: ModelConfig, spec: AdapterSpec, adapters: dict[str, torch.Tensor]
) -> None:
    """Freeze every weight of `model` and put `adapters` (as `initial_adapters` names them) beside
    the linears they target: the parameters that still take gradients are the adapters, named
    as `shapes` names them and in its order."""
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    chosen = {name: place for name, place in places(config).items() if name in spec.targets}
    for layer, block in enumerate(model.blocks):
        by_linear: dict[str, list] = {}
        for target, place in chosen.items():
            stem = f"blocks.{layer}.{place.linear}.lora_{target}"
            part = (target, place.start, place.stop, adapters[f"{stem}.A"], adapters[f"{stem}.B"])
            by_linear.setdefault(place.linear, []).append(part)
        for linear, slices in by_linear.items():
            owner, attribute = linear.split(".")
            base = getattr(getattr(block, owner), attribute)
            adapted = Adapted(base, sorted(slices, key=lambda part: part[1]), spec.scale)
            setattr(getattr(block, owner), attribute, adapted)


def trained_parameters(model: nn.Module) -> dict[str, nn.Parameter]:
    """The parameters a run trains, by name in the model's order: every weight, or where adapters
    are attached, the adapters alone."""
    return {name: p for name, p in model.named_parameters() if p.requires_grad}


def merged(
    weights: dict[str, torch.Tensor],
    config: ModelConfig,
    spec: AdapterSpec,
    adapters: dict[str, torch.Tensor],
) -> dict[str, torch.Tensor]:
    """The base `weights`, as the run held them, with each adapter's scale * B A added to its rows:
    the model a fine-tune made, as one set of float32 weights (what `model export` without
    --adapter writes)."""
    out = rounded(weights, spec.base)
    offered = places(config)
    for layer in range(config.layers):
        for target in (name for name in offered if name in spec.targets):
            place = offered[target]
            stem = f"blocks.{layer}.{place.linear}.lora_{target}"
            delta = adapters[f"{stem}.B"] @ adapters[f"{stem}.A"]  # (rows, in)
            out[f"blocks.{layer}.{place.linear}.weight"][place.start : place.stop] += (
                spec.scale * delta
            )
    return out

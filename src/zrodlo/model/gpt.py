"""The transformer language model: its configuration, its layers and its seeded initial weights.

The model is a GPT-style decoder: token and learned position embeddings, pre-LayerNorm blocks of
causal multi-head self-attention and a GELU MLP, a final LayerNorm and an untied LM head. Dropout
takes its masks from `zrodlo.model.dropout` (ChaCha20, drawn for the whole step), and initial weights come
from `zrodlo.draws.chacha`, so nothing here reads torch's random state.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from zrodlo.draws.chacha import Purpose, Stream, normal
from zrodlo.model.device import memory_of
from zrodlo.model.dropout import Site, StepMasks, apply_dropout
from zrodlo.storage.refusal import Refusal

INIT_STD = 0.02
NORM_EPS = 1e-5


@dataclass(frozen=True)
class ModelConfig:
    """The shape of a model and its dropout rates; stored as config.json in a model directory."""

    vocab_size: int
    positions: int  # the most tokens the model reads in one window
    d_model: int
    layers: int
    heads: int
    d_ff: int
    dropout: float  # on the embedding output and on each residual branch
    attention_dropout: float  # on attention probabilities; > 0 leaves the fused kernel

    def validate(self) -> None:
        """Refuse a configuration no model can be built from, naming the command-line flag."""
        _check(self, lambda field: "--" + field.replace("_", "-"))

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Any, path: str) -> ModelConfig:
        """Read a parsed config.json; anything missing, mistyped or out of range is refused."""

        def refuse(problem: str) -> Refusal:
            return Refusal(f"{path} does not load as a model configuration: {problem}")

        if not isinstance(data, dict):
            raise refuse(f"it holds {_json_kind(data)}, not an object of named values")
        values: dict[str, Any] = {}
        for field in fields(cls):
            if field.name not in data:
                raise refuse(f"it has no {field.name}")
            value = data[field.name]
            if field.type == "int" and not _is_int(value):
                raise refuse(f"{field.name} is {value!r}, not a whole number")
            if field.type == "float" and not (_is_int(value) or isinstance(value, float)):
                raise refuse(f"{field.name} is {value!r}, not a number")
            values[field.name] = float(value) if field.type == "float" else value
        unknown = sorted(set(data) - set(values))
        if unknown:
            raise refuse(f"it holds {unknown[0]}, which no model configuration has")
        config = cls(**values)
        try:
            _check(config, lambda field: field)
        except Refusal as refusal:
            raise refuse(refusal.sentence) from None
        return config


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _json_kind(value: Any) -> str:
    kinds = {list: "a list", str: "a string", bool: "true or false", type(None): "null"}
    return kinds.get(type(value), "a number")


def _check(config: ModelConfig, name: Callable[[str], str]) -> None:
    """Raise the first refusal for `config`; `name(field)` says how the sentence names a field."""
    for field in ("vocab_size", "positions", "d_model", "layers", "heads", "d_ff"):
        value = getattr(config, field)
        if not _is_int(value) or value < 1:
            raise Refusal(f"{name(field)} is {value}; it must be a whole number of one or more")
    if config.d_model % config.heads != 0:
        raise Refusal(
            f"{name('heads')} {config.heads} does not divide {name('d_model')} {config.d_model}; "
            "each head takes an equal share of the model width"
        )
    for field in ("dropout", "attention_dropout"):
        value = getattr(config, field)
        # A NaN fails the comparison and is refused with the rest.
        if (_is_int(value) or isinstance(value, float)) and 0 <= value < 1:
            continue
        raise Refusal(f"{name(field)} is {value}; it must lie from 0 up to but not including 1")
    needed, memory = training_state_bytes(config), memory_of(torch.device("cpu"))
    if needed > memory:
        raise Refusal(
            f"a model of {parameter_count(config):,} parameters needs {needed / 2**30:,.1f} GiB "
            f"for its float32 weights, gradients and AdamW moments, more than the "
            f"{memory / 2**30:,.1f} GiB of memory this machine has"
        )


def training_state_bytes(config: ModelConfig) -> int:
    """Bytes of the four float32 numbers training holds a parameter: the weight, its gradient and
    AdamW's two moments."""
    return parameter_count(config) * 4 * 4


def step_activation_bytes(config: ModelConfig, windows: int, context: int, precision: str) -> int:
    """A lower bound on the bytes one forward pass of `windows` windows at `context` keeps for its
    backward pass: what it needs at the least, so a pass this bound does not fit cannot run.

    Each of the context-1 positions of a window keeps, in every block, the normed input of its two
    branches, the query, key and value, the attention's output (6 d_model numbers) and the MLP's
    hidden layer before and after GELU (2 d_ff), and the attention probabilities of every head
    (heads x positions) when they are masked by dropout; then the last norm's output and two copies
    of the logits, the logits and their log-softmax. Under bf16 no number takes under 2 bytes.
    """
    positions = context - 1
    per_block = 6 * config.d_model + 2 * config.d_ff
    if config.attention_dropout > 0:
        per_block += config.heads * positions
    per_position = config.layers * per_block + config.d_model + 2 * config.vocab_size
    return windows * positions * per_position * (4 if precision == "f32" else 2)


class LayerNorm(nn.Module):
    """LayerNorm that computes in float32 even under bf16 autocast, so the statistics stay exact."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(width))
        self.bias = nn.Parameter(torch.empty(width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weight, bias = self.weight.float(), self.bias.float()
        return F.layer_norm(x.float(), weight.shape, weight, bias, NORM_EPS)  # float32


class CausalSelfAttention(nn.Module):
    """Multi-head self-attention in which position t sees positions 0..t only."""

    def __init__(self, config: ModelConfig, layer: int) -> None:
        super().__init__()
        self.layer, self.heads = layer, config.heads
        self.dropout, self.attention_dropout = config.dropout, config.attention_dropout
        self.qkv = nn.Linear(config.d_model, 3 * config.d_model)
        self.out = nn.Linear(config.d_model, config.d_model)

    def forward(self, x: torch.Tensor, masks: StepMasks | None) -> torch.Tensor:
        B, T, C = x.shape  # batch, time, d_model
        q, k, v = self.qkv(x).split(C, dim=2)  # each (B, T, C)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        if masks is not None and self.attention_dropout > 0:
            y = self._explicit(q, k, v, masks)  # (B, heads, T, head_dim)
        else:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # fused kernel
        y = self.out(y.transpose(1, 2).reshape(B, T, C))  # (B, T, C)
        if masks is not None and self.dropout > 0:
            keep = masks.keep(self.layer, Site.ATTENTION_OUTPUT, (B, T, C), self.dropout, x.device)
            y = apply_dropout(y, keep, self.dropout)
        return y

    def _explicit(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, masks: StepMasks
    ) -> torch.Tensor:
        """Attention spelled out, so the probabilities exist as a tensor that dropout can mask."""
        B, H, T, D = q.shape
        scores = (q @ k.transpose(-2, -1)).float() / math.sqrt(D)  # (B, H, T, T) float32
        future = torch.ones(T, T, dtype=torch.bool, device=q.device).triu(1)  # (T, T)
        probs = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)  # float32
        p = self.attention_dropout
        probs = apply_dropout(
            probs, masks.keep(self.layer, Site.ATTENTION_PROBS, (B, H, T, T), p, q.device), p
        )
        return probs.to(v.dtype) @ v  # (B, H, T, D)


class MLP(nn.Module):
    """The position-wise feed-forward branch: d_model -> d_ff -> GELU -> d_model."""

    def __init__(self, config: ModelConfig, layer: int) -> None:
        super().__init__()
        self.layer, self.dropout = layer, config.dropout
        self.up = nn.Linear(config.d_model, config.d_ff)
        self.down = nn.Linear(config.d_ff, config.d_model)

    def forward(self, x: torch.Tensor, masks: StepMasks | None) -> torch.Tensor:
        y = self.down(F.gelu(self.up(x)))  # (B, T, d_model)
        if masks is not None and self.dropout > 0:
            keep = masks.keep(self.layer, Site.MLP_OUTPUT, tuple(y.shape), self.dropout, y.device)
            y = apply_dropout(y, keep, self.dropout)
        return y


class Block(nn.Module):
    """One pre-LayerNorm transformer block; the residual stream stays float32 under autocast."""

    def __init__(self, config: ModelConfig, layer: int) -> None:
        super().__init__()
        self.attention_norm = LayerNorm(config.d_model)
        self.attention = CausalSelfAttention(config, layer)
        self.mlp_norm = LayerNorm(config.d_model)
        self.mlp = MLP(config, layer)

    def forward(self, x: torch.Tensor, masks: StepMasks | None) -> torch.Tensor:
        x = x + self.attention(self.attention_norm(x), masks)  # (B, T, d_model)
        return x + self.mlp(self.mlp_norm(x), masks)


class GPT(nn.Module):
    """The language model. `GPT(config)` holds placeholders only; build one with `from_weights`."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        # Built on the meta device: torch's own initialisation would read torch's random state,
        # and every real weight comes from `initial_weights` or a checkpoint anyway.
        with torch.device("meta"):
            self.token_embedding = nn.Embedding(config.vocab_size, config.d_model)
            self.position_embedding = nn.Embedding(config.positions, config.d_model)
            self.blocks = nn.ModuleList(Block(config, layer) for layer in range(config.layers))
            self.final_norm = LayerNorm(config.d_model)
            self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)

    @classmethod
    def from_weights(
        cls,
        config: ModelConfig,
        weights: dict[str, torch.Tensor],
        device: str | torch.device = "cpu",
        source: str = "the weights",
    ) -> GPT:
        """A model holding copies of `weights`, after `check_weights` has accepted them."""
        check_weights(config, weights, source)
        model = cls(config)
        copies = {
            name: w.detach().to(device, torch.float32, copy=True) for name, w in weights.items()
        }
        model.load_state_dict(copies, strict=True, assign=True)
        return model

    def forward(self, tokens: torch.Tensor, masks: StepMasks | None = None) -> torch.Tensor:
        """Logits (B, T, vocab_size) in float32 for tokens (B, T); `masks` drop only in training."""
        if tokens.size(1) > self.config.positions:
            raise ValueError(
                f"{tokens.size(1)} tokens exceed the model's {self.config.positions} positions"
            )
        T = tokens.size(1)  # tokens: (B, T)
        masks = masks if self.training else None
        positions = torch.arange(T, device=tokens.device)  # (T,)
        x = self.token_embedding(tokens) + self.position_embedding(positions)  # (B, T, d_model)
        p = self.config.dropout
        if masks is not None and p > 0:
            x = apply_dropout(x, masks.keep(0, Site.EMBEDDING, tuple(x.shape), p, x.device), p)
        for block in self.blocks:
            x = block(x, masks)
        return self.lm_head(self.final_norm(x)).float()  # (B, T, vocab_size)


def parameter_shapes(config: ModelConfig) -> dict[str, tuple[int, ...]]:
    """Every parameter's name and shape, in the order the model registers them, from the
    configuration alone: building the modules, even on the meta device, costs milliseconds that
    every checked read of a model would pay (a test holds the two equal)."""
    d, ff, vocab = config.d_model, config.d_ff, config.vocab_size
    shapes = {
        "token_embedding.weight": (vocab, d),
        "position_embedding.weight": (config.positions, d),
    }
    for layer in range(config.layers):
        block = f"blocks.{layer}"
        shapes |= {
            f"{block}.attention_norm.weight": (d,),
            f"{block}.attention_norm.bias": (d,),
            f"{block}.attention.qkv.weight": (3 * d, d),
            f"{block}.attention.qkv.bias": (3 * d,),
            f"{block}.attention.out.weight": (d, d),
            f"{block}.attention.out.bias": (d,),
            f"{block}.mlp_norm.weight": (d,),
            f"{block}.mlp_norm.bias": (d,),
            f"{block}.mlp.up.weight": (ff, d),
            f"{block}.mlp.up.bias": (ff,),
            f"{block}.mlp.down.weight": (d, ff),
            f"{block}.mlp.down.bias": (d,),
        }
    return shapes | {
        "final_norm.weight": (d,),
        "final_norm.bias": (d,),
        "lm_head.weight": (vocab, d),
    }


def parameter_count(config: ModelConfig) -> int:
    """How many numbers the model's parameters hold, counted from the configuration alone (no
    parameter is allocated, so it is cheap for a configuration too large to build)."""
    d, ff = config.d_model, config.d_ff
    embeddings = (config.vocab_size + config.positions) * d
    # Two norms (scale and bias), qkv and out projections, the MLP's up and down, with biases.
    block = 2 * 2 * d + (d * 3 * d + 3 * d) + (d * d + d) + (d * ff + ff) + (ff * d + d)
    return embeddings + config.layers * block + 2 * d + d * config.vocab_size


def _initial_std(name: str, config: ModelConfig) -> float | None:
    """The standard deviation a parameter is drawn with, or None for a constant (bias, norm)."""
    if name.endswith(".bias") or name.endswith("norm.weight"):
        return None
    if name.endswith("attention.out.weight") or name.endswith("mlp.down.weight"):
        # Each block adds two branches to the residual stream; scaling them keeps its variance
        # from growing with depth.
        return INIT_STD / math.sqrt(2 * config.layers)
    return INIT_STD


def initial_weights(config: ModelConfig, seed: int) -> dict[str, torch.Tensor]:
    """Float32 initial weights, bit-identical on every machine: the i-th name in sorted order is
    drawn from ChaCha20 stream (seed, INIT, a=i) as row-major standard normals times its std."""
    weights: dict[str, torch.Tensor] = {}
    for index, (name, shape) in enumerate(sorted(parameter_shapes(config).items())):
        std = _initial_std(name, config)
        if std is None:
            fill = 1.0 if name.endswith("norm.weight") else 0.0
            weights[name] = torch.full(shape, fill, dtype=torch.float32)
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

"""A model's configuration: its shape and dropout rates, as config.json records them, checked; the
names and shapes of its parameters, and what training it costs in memory, from the configuration
alone.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Callable
from dataclasses import MISSING, asdict, dataclass, fields
from typing import Any

from zrodlo.storage.refusal import Refusal

ARCHITECTURES = ("gpt", "llama")
# The fields of a gpt model's config.json, in order: what releases up to 0.1.0 wrote.
GPT_FIELDS = (
    "vocab_size", "positions", "d_model", "layers", "heads", "d_ff", "dropout",
    "attention_dropout",
)  # fmt: skip


def option(help: str | None, default: Any = MISSING, metavar: str | None = None) -> Any:
    """A field declared with the help its command-line option shows (None for a field that is no
    option), and for a fixed set of values the metavar that lists them: the command line, the
    Python API and params.yaml follow these declarations."""
    return dataclasses.field(default=default, metadata={"help": help, "metavar": metavar})


def options_of(declaration: type) -> list[dataclasses.Field]:
    """The fields of a declaration (`ModelConfig`, `RunPlan`) that are options, in its order."""
    return [field for field in dataclasses.fields(declaration) if field.metadata.get("help")]


@dataclass(frozen=True, kw_only=True)
class ModelConfig:
    """The shape of a model and its dropout rates; stored as config.json in a model directory, its
    fields in this order."""

    vocab_size: int = option(None)  # the tokenizer's, not an option
    positions: int = option("The most tokens the model reads in one window.")
    d_model: int = option("Width of the residual stream.")
    layers: int = option("Transformer blocks.")
    heads: int = option("Attention heads per block; must divide --d-model.")
    d_ff: int = option("Width of each block's MLP.")
    dropout: float = option("Dropout on embeddings and residual branches, in [0, 1).")
    attention_dropout: float = option(
        "Dropout on attention probabilities, in [0, 1); above 0 it leaves the fused kernel.", 0.0
    )
    # The architecture, and the settings only llama has (config.json of a gpt model holds none).
    architecture: str = option(
        "gpt: GPT-2's decoder (learned positions, LayerNorm, GELU). llama: RMSNorm, rotary "
        "positions, a SwiGLU MLP, grouped-query attention, no biases.",
        "gpt",
        metavar="[gpt|llama]",
    )
    kv_heads: int | None = option(
        "llama: key and value heads, dividing --heads (grouped-query attention); --heads by "
        "default.",
        None,
    )
    rope_theta: float | None = option(
        "llama: the base of the rotary position angles; 10000 by default.", None
    )
    tie_embeddings: bool = option(
        "llama: the LM head reads the token embedding's weights instead of its own.", False
    )

    def __post_init__(self) -> None:
        if self.architecture == "llama":  # the defaults llama fills in, as config.json records
            if self.kv_heads is None:
                object.__setattr__(self, "kv_heads", self.heads)
            if self.rope_theta is None:
                object.__setattr__(self, "rope_theta", 10000.0)

    @property
    def head_width(self) -> int:
        return self.d_model // self.heads

    def validate(self, name: Callable[[str], str] | None = None) -> None:
        """Refuse a configuration no model can be built from, naming each field as `name` does
        (the command-line flag by default)."""
        _check(self, name or (lambda field: "--" + field.replace("_", "-")))

    def to_json(self) -> dict[str, Any]:
        """config.json: a gpt model's holds the fields releases up to 0.1.0 wrote, and no more."""
        values = asdict(self)
        return values if self.architecture == "llama" else {k: values[k] for k in GPT_FIELDS}

    @classmethod
    def from_json(cls, data: Any, path: str) -> ModelConfig:
        """Read a parsed config.json; anything missing, mistyped or out of range is refused."""

        def refuse(problem: str) -> Refusal:
            return Refusal(f"{path} does not load as a model configuration: {problem}")

        if not isinstance(data, dict):
            raise refuse(f"it holds {_json_kind(data)}, not an object of named values")
        architecture = data.get("architecture", "gpt")
        if architecture not in ARCHITECTURES:
            raise refuse(f"architecture is {architecture!r}; it is gpt or llama")
        llama = architecture == "llama"
        values: dict[str, Any] = {} if llama else {"architecture": architecture}
        for field in fields(cls):
            if not llama and field.name not in GPT_FIELDS:
                continue
            if field.name not in data:
                raise refuse(f"it has no {field.name}")
            value = data[field.name]
            kind = field.type.removesuffix(" | None")
            if kind == "int" and not _is_int(value):
                raise refuse(f"{field.name} is {value!r}, not a whole number")
            if kind == "float" and not (_is_int(value) or isinstance(value, float)):
                raise refuse(f"{field.name} is {value!r}, not a number")
            if kind == "bool" and not isinstance(value, bool):
                raise refuse(f"{field.name} is {value!r}, not true or false")
            values[field.name] = float(value) if kind == "float" else value
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
    _check_architecture(config, name)
    for field in ("dropout", "attention_dropout"):
        value = getattr(config, field)
        # A NaN fails the comparison and is refused with the rest.
        if (_is_int(value) or isinstance(value, float)) and 0 <= value < 1:
            continue
        raise Refusal(f"{name(field)} is {value}; it must lie from 0 up to but not including 1")
    needed, memory = training_state_bytes(config), machine_memory()
    if needed > memory:
        raise Refusal(
            f"a model of {parameter_count(config):,} parameters needs {needed / 2**30:,.1f} GiB "
            f"for its float32 weights, gradients and AdamW moments, more than the "
            f"{memory / 2**30:,.1f} GiB of memory this machine has"
        )


def _check_architecture(config: ModelConfig, name: Callable[[str], str]) -> None:
    if config.architecture not in ARCHITECTURES:
        raise Refusal(f"{name('architecture')} is {config.architecture}; it is gpt or llama")
    if config.architecture == "gpt":
        given = [f for f in ("kv_heads", "rope_theta") if getattr(config, f) is not None]
        if config.tie_embeddings:
            given.append("tie_embeddings")
        if given:
            raise Refusal(
                f"{name(given[0])} is for {name('architecture')} llama; a gpt model has none"
            )
        return
    kv_heads, theta = config.kv_heads, config.rope_theta
    if not _is_int(kv_heads) or kv_heads < 1 or config.heads % kv_heads != 0:
        raise Refusal(
            f"{name('kv_heads')} {kv_heads} does not divide {name('heads')} {config.heads}; each "
            "key and value head serves an equal share of the query heads"
        )
    if config.head_width % 2 != 0:
        raise Refusal(
            f"{name('d_model')} {config.d_model} over {name('heads')} {config.heads} gives heads "
            f"{config.head_width} wide; rotary positions turn pairs, so a head's width is even"
        )
    if not isinstance(theta, int | float) or not (math.isfinite(theta) and theta > 0):
        raise Refusal(f"{name('rope_theta')} is {theta}; it must be a positive finite number")


def training_state_bytes(config: ModelConfig) -> int:
    """Bytes of the four float32 numbers training holds a parameter: the weight, its gradient and
    AdamW's two moments."""
    return parameter_count(config) * 4 * 4


def step_activation_bytes(config: ModelConfig, windows: int, context: int, precision: str) -> int:
    """A lower bound on the bytes one forward pass of `windows` windows at `context` keeps for its
    backward pass: what it needs at the least, so a pass this bound does not fit cannot run.

    Each of the context-1 positions of a window keeps, in every block, the normed input of its two
    branches, the query, key and value, the attention's output (6 d_model numbers) and the MLP's
    hidden layer before and after GELU (2 d_ff; llama's gate, up and their product, 3), and the attention probabilities of every head
    (heads x positions) when they are masked by dropout; then the last norm's output and two copies
    of the logits, the logits and their log-softmax. Under bf16 no number takes under 2 bytes.
    """
    positions = context - 1
    per_block = 6 * config.d_model + (3 if config.architecture == "llama" else 2) * config.d_ff
    if config.attention_dropout > 0:
        per_block += config.heads * positions
    per_position = config.layers * per_block + config.d_model + 2 * config.vocab_size
    return windows * positions * per_position * (4 if precision == "f32" else 2)


def parameter_shapes(config: ModelConfig) -> dict[str, tuple[int, ...]]:
    """Every parameter's name and shape, in the order the model registers them, from the
    configuration alone: building the modules, even on the meta device, costs milliseconds that
    every checked read of a model would pay (a test holds the two equal)."""
    if config.architecture == "llama":
        return _llama_shapes(config)
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


def _llama_shapes(config: ModelConfig) -> dict[str, tuple[int, ...]]:
    """llama's parameters: no biases, no position table, queries with their keys and values in one
    projection, the MLP's gate and up projections in one, and no LM head of its own when tied."""
    d, ff, vocab = config.d_model, config.d_ff, config.vocab_size
    kv_width = (config.kv_heads or config.heads) * config.head_width
    shapes = {"token_embedding.weight": (vocab, d)}
    for layer in range(config.layers):
        block = f"blocks.{layer}"
        shapes |= {
            f"{block}.attention_norm.weight": (d,),
            f"{block}.attention.qkv.weight": (d + 2 * kv_width, d),
            f"{block}.attention.out.weight": (d, d),
            f"{block}.mlp_norm.weight": (d,),
            f"{block}.mlp.gate_up.weight": (2 * ff, d),
            f"{block}.mlp.down.weight": (d, ff),
        }
    shapes["final_norm.weight"] = (d,)
    return shapes if config.tie_embeddings else shapes | {"lm_head.weight": (vocab, d)}


def parameter_count(config: ModelConfig) -> int:
    """How many numbers the model's parameters hold, counted from the configuration alone (no
    parameter is allocated, so it is cheap for a configuration too large to build)."""
    d, ff, vocab = config.d_model, config.d_ff, config.vocab_size
    if config.architecture == "llama":
        kv_width = (config.kv_heads or config.heads) * config.head_width
        # Two norm scales, the qkv and out projections, the MLP's gate, up and down.
        block = 2 * d + d * (d + 2 * kv_width) + d * d + 3 * d * ff
        head = 0 if config.tie_embeddings else vocab * d
        return vocab * d + config.layers * block + d + head
    embeddings = (vocab + config.positions) * d
    # Two norms (scale and bias), qkv and out projections, the MLP's up and down, with biases.
    block = 2 * 2 * d + (d * 3 * d + 3 * d) + (d * d + d) + (d * ff + ff) + (ff * d + d)
    return embeddings + config.layers * block + 2 * d + d * vocab


def machine_memory() -> int:
    """Bytes of physical memory this machine has (a GPU's own is `zrodlo.model.device`'s)."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")

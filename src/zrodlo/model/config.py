"""A model's configuration: its shape and dropout rates, as config.json records them, checked; the
names and shapes of its parameters, and what training it costs in memory, from the configuration
alone.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from dataclasses import MISSING, asdict, dataclass, fields
from typing import Any

from zrodlo.storage.refusal import Refusal


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
    needed, memory = training_state_bytes(config), machine_memory()
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


def machine_memory() -> int:
    """Bytes of physical memory this machine has (a GPU's own is `zrodlo.model.device`'s)."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")

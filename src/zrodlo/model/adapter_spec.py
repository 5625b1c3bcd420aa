"""What low-rank adapters (LoRA) a fine-tune trains, before any tensor: the targets a model
offers, each named as transformers' models name the projections (q, k, v, o; gate, up, down) and
lying in a slice of the rows of one of the decoder's linears (q, k and v in the fused query, key and
value projection, gate and up in a gated branch's fused projection), and the rank, alpha and
targets of a run, checked. Nothing here needs torch, so a run's plan reads it without loading it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from zrodlo.model.config import ModelConfig
from zrodlo.storage.refusal import Refusal, shown

BASE_FORMATS = ("f32", "bf16")  # as `zrodlo.model.held_base` holds a frozen base
DEFAULT_TARGETS = ("q", "v")  # the LoRA paper's choice, and peft's for llama


@dataclass(frozen=True)
class Place:
    """Where a target lies: the linear (its name after "blocks.<i>.") and its rows."""

    linear: str
    start: int
    stop: int


def places(config: ModelConfig) -> dict[str, Place]:
    """Every target a model of `config` offers, by name, in the order its linears register."""
    queries = config.heads * config.head_width
    keys = config.parts.attention.kv_heads * config.head_width
    found = {
        "q": Place("attention.qkv", 0, queries),
        "k": Place("attention.qkv", queries, queries + keys),
        "v": Place("attention.qkv", queries + keys, queries + 2 * keys),
        "o": Place("attention.out", 0, config.d_model),
    }
    if config.parts.feed_forward.gated:
        found |= {
            "gate": Place("mlp.gate_up", 0, config.d_ff),
            "up": Place("mlp.gate_up", config.d_ff, 2 * config.d_ff),
        }
    else:
        found["up"] = Place("mlp.up", 0, config.d_ff)
    return found | {"down": Place("mlp.down", 0, config.d_model)}


@dataclass(frozen=True)
class AdapterSpec:
    """The adapters of a fine-tune: their rank, alpha and targets (`places` names), and the
    number format the frozen base is held in (`zrodlo.model.held_base`: f32 or bf16)."""

    rank: int
    alpha: float
    targets: tuple[str, ...]
    base: str = "f32"

    @property
    def scale(self) -> float:
        return self.alpha / self.rank

    def check(self, config: ModelConfig) -> None:
        offered = places(config)
        if isinstance(self.rank, bool) or not isinstance(self.rank, int) or self.rank < 1:
            raise Refusal(f"--lora-rank is {self.rank}; it must be a whole number of 1 or more")
        if not (isinstance(self.alpha, (int, float)) and math.isfinite(self.alpha)):
            raise Refusal(f"--lora-alpha is {self.alpha}; it must be a finite number")
        unknown = [name for name in self.targets if name not in offered]
        if unknown or not self.targets or len(set(self.targets)) != len(self.targets):
            raise Refusal(
                f"--lora-targets is {','.join(self.targets)}; it names each of "
                f"{', '.join(offered)} once at most, one or more of them"
            )
        check_base(self.base)

    def shapes(self, config: ModelConfig) -> dict[str, tuple[int, int]]:
        """Each adapter tensor's name and shape: blocks.<i>.<linear>.lora_<target>.A (r, in) and
        .B (rows, r), in layer and target order."""
        offered, widths = places(config), input_widths(config)
        shapes = {}
        for layer in range(config.layers):
            for target in (name for name in offered if name in self.targets):
                place = offered[target]
                stem = f"blocks.{layer}.{place.linear}.lora_{target}"
                shapes[f"{stem}.A"] = (self.rank, widths[place.linear])
                shapes[f"{stem}.B"] = (place.stop - place.start, self.rank)
        return shapes


def check_base(base: object) -> None:
    """Refuse a number format for a frozen base that is not one of `BASE_FORMATS`."""
    if base not in BASE_FORMATS:
        raise Refusal(f"--lora-base is {base!r}; it takes f32 or bf16")


def check_adapter_flags(
    rank: int | None, alpha: float | None, targets: str | None, base: str | None
) -> None:
    """Refuse the adapters' flags given without --lora-rank, and values they cannot take (the
    rank, a whole number, is checked with the run's other counts)."""
    for flag, value in (
        ("--lora-alpha", alpha),
        ("--lora-targets", targets),
        ("--lora-base", base),
    ):
        if value is not None and rank is None:
            raise Refusal(f"{flag} needs --lora-rank, the rank of the adapters it describes")
    if alpha is not None and (isinstance(alpha, bool) or not (math.isfinite(alpha) and alpha > 0)):
        raise Refusal(f"--lora-alpha is {shown(alpha)}; it must be a positive finite number")
    if targets is not None and not isinstance(targets, str):
        raise Refusal(f"--lora-targets is {targets!r}; it names projections: q,v")
    if base is not None:
        check_base(base)


def input_widths(config: ModelConfig) -> dict[str, int]:
    queries = config.heads * config.head_width
    return {
        "attention.qkv": config.d_model, "attention.out": queries, "mlp.gate_up": config.d_model,
        "mlp.up": config.d_model, "mlp.down": config.d_ff,
    }  # fmt: skip

"""SmolLM3's decoder (`--architecture smollm3`): llama's, with rotary positions left out of every
`no_rope_interval`-th layer (the 4th, 8th, ...: those attend by content alone, "NoPE"), the others
turned as llama's.

Every other setting is llama's (`zrodlo.model.families.llama`). In transformers it is a
SmolLM3ForCausalLM, its parameters named as a LlamaForCausalLM's; its config.json states the
layers that take rotary positions as `no_rope_layers`, one number a layer (1: rotary, 0: none),
which Zrodlo reads as the interval that gives that list and refuses where none does. Its sliding
window, which the released model leaves off, is refused where config.json turns it on.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from zrodlo.model.declared import option
from zrodlo.model.families.base import is_whole, whole_window
from zrodlo.model.families.llama import Llama, LlamaSettings
from zrodlo.model.parts import LayerAttention
from zrodlo.storage.refusal import Refusal

if TYPE_CHECKING:
    from zrodlo.model.config import ModelConfig

NO_ROPE_INTERVAL = 4  # SmolLM3-3B's, and transformers' default
_FIXED = {
    "hidden_act": ("silu", "silu"),
    "partial_rotary_factor": (1.0, 1.0),
    "attention_bias": (False, False),
    "mlp_bias": (False, False),
    "use_sliding_window": (False, False),
}


@dataclass(frozen=True, kw_only=True)
class SmolLM3Settings(LlamaSettings):
    """llama's settings, and the layers without rotary positions."""

    no_rope_interval: int | None = option(
        "smollm3: every this many layers, one attends without rotary positions (the 4th, 8th, "
        "...); 4 by default.",
        None,
    )


def rotary_layers(layers: int, interval: int) -> list[int]:
    """transformers' no_rope_layers of `layers` layers: 1 for a layer with rotary positions, 0 for
    every `interval`-th."""
    return [int((layer + 1) % interval != 0) for layer in range(layers)]


class SmolLM3(Llama):
    name = "smollm3"
    summary = "Llama's decoder without rotary positions in every 4th layer (SmolLM3)."
    Settings = SmolLM3Settings
    model_type = "smollm3"
    transformers_class = "SmolLM3ForCausalLM"
    transformers_fields: ClassVar[dict[str, str]] = {
        **Llama.transformers_fields, "no_rope_interval": "no_rope_layers",
    }  # fmt: skip
    fixed_settings: ClassVar[dict[str, tuple[Any, Any]]] = _FIXED
    transformers_defaults: ClassVar[dict[str, Any]] = {
        "rms_norm_eps": 1e-6, "tie_word_embeddings": True, "num_key_value_heads": 4,
        "rope_theta": 2_000_000.0,
    }  # fmt: skip
    written_settings: ClassVar[dict[str, Any]] = {
        "attention_bias": False, "mlp_bias": False, "use_sliding_window": False,
    }  # fmt: skip

    def settings(self, shape: dict[str, Any], given: dict[str, Any]) -> SmolLM3Settings:
        return super().settings(shape, {"no_rope_interval": NO_ROPE_INTERVAL, **given})

    def check(self, config: ModelConfig, name: Any) -> None:
        super().check(config, name)
        interval = config.settings.no_rope_interval
        if not (is_whole(interval) and interval >= 1):
            raise Refusal(
                f"{name('no_rope_interval')} is {interval}; it must be a whole number of one or "
                "more"
            )

    def layer_attention(self, config: ModelConfig, layer: int) -> LayerAttention:
        """llama's, but every no_rope_interval-th layer takes no rotary positions."""
        if (layer + 1) % config.settings.no_rope_interval == 0:
            return LayerAttention(rotary=None)
        return super().layer_attention(config, layer)

    def transformers_config(self, config: ModelConfig, bos: int, eos: int) -> dict[str, Any]:
        interval = config.settings.no_rope_interval
        return {
            **super().transformers_config(config, bos, eos),
            "no_rope_layers": rotary_layers(config.layers, interval),
            "no_rope_layer_interval": interval,
        }

    def from_transformers(self, stated: dict[str, Any], file: Path) -> dict[str, Any]:
        whole_window(stated, file)
        read = super().from_transformers(stated, file)
        return read | {"no_rope_interval": _interval(stated, read["layers"], file)}


def _interval(stated: dict[str, Any], layers: Any, file: Path) -> int | None:
    """The interval whose layers without rotary positions are config.json's no_rope_layers (as
    transformers fills it from no_rope_layer_interval where it is left out)."""
    interval = stated.get("no_rope_layer_interval", NO_ROPE_INTERVAL)
    if not is_whole(layers) or layers < 1:
        return interval  # the layers are refused with the rest of the configuration
    listed = stated.get("no_rope_layers")
    if listed is None:
        if is_whole(interval) and interval >= 1:
            return interval
        listed = interval  # refused below, naming it
    given = [int(v) if v in (0, 1) else v for v in listed] if isinstance(listed, list) else listed
    stated_first = [interval] if is_whole(interval) and interval >= 1 else []
    for every in (*stated_first, *range(1, layers + 2)):  # past the last layer: rotary in all
        if given == rotary_layers(layers, every):
            return every
    raise Refusal(
        f"{file} sets no_rope_layers to {listed!r}; Zrodlo leaves rotary positions out of every "
        f"n-th of the {layers} layers only ([1, 1, 1, 0, ...]: every 4th), so the model cannot "
        "be imported exactly"
    )

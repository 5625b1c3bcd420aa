"""The llama decoder (`--architecture llama`): what today's small models use.

Pre-RMSNorm blocks (epsilon 1e-5) of causal self-attention with rotary position embeddings and
grouped-query attention (`kv_heads` key and value heads shared by the query heads), a SwiGLU MLP
(down(silu(gate x) * up x)), no biases, a final RMSNorm and an LM head, its own or the token
embedding's. Rotary positions turn the two halves of each head's width against each other, the
layout transformers' Llama uses, so its weights export as they are: a LlamaForCausalLM whose
fused projections are split (queries, keys and values; gate and up), none permuted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from zrodlo.model.declared import option
from zrodlo.model.families.base import Family, fixed, is_whole, tied
from zrodlo.model.parts import Attention, FeedForward, Norm, Parts
from zrodlo.storage.refusal import Refusal

if TYPE_CHECKING:
    from zrodlo.model.config import ModelConfig

RMS_EPS = 1e-5
ROPE_THETA = 10000.0

# Zrodlo's parameter name (after "blocks.<i>.") -> transformers' (after "model.layers.<i>.").
_BLOCK_NAMES = {
    "attention_norm.weight": "input_layernorm.weight",
    "attention.out.weight": "self_attn.o_proj.weight",
    "mlp_norm.weight": "post_attention_layernorm.weight",
    "mlp.down.weight": "mlp.down_proj.weight",
}
_MODEL_NAMES = {
    "token_embedding.weight": "model.embed_tokens.weight",
    "final_norm.weight": "model.norm.weight",
    "lm_head.weight": "lm_head.weight",
}
# Settings that must have the value Zrodlo computes with: each one's default in transformers
# (what the model computes when config.json leaves it out) and Zrodlo's value.
_FIXED = {
    "hidden_act": ("silu", "silu"),
    "rms_norm_eps": (1e-6, RMS_EPS),
    "rope_scaling": (None, None),
    "partial_rotary_factor": (1.0, 1.0),
    "attention_bias": (False, False),
    "mlp_bias": (False, False),
    "pretraining_tp": (1, 1),
}


@dataclass(frozen=True, kw_only=True)
class LlamaSettings:
    """What only llama has, in the order config.json records it."""

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


class Llama(Family):
    name = "llama"
    summary = "RMSNorm, rotary positions, a SwiGLU MLP, grouped-query attention, no biases."
    Settings = LlamaSettings
    model_type = "llama"
    transformers_class = "LlamaForCausalLM"
    transformers_fields: ClassVar[dict[str, str]] = {
        "positions": "max_position_embeddings", "d_model": "hidden_size",
        "layers": "num_hidden_layers", "heads": "num_attention_heads", "d_ff": "intermediate_size",
        "kv_heads": "num_key_value_heads", "tie_embeddings": "tie_word_embeddings",
    }  # fmt: skip

    def settings(self, shape: dict[str, Any], given: dict[str, Any]) -> LlamaSettings:
        """The defaults as config.json records them: a key and value head a query head, and the
        rotary base 10000."""
        return LlamaSettings(**{"kv_heads": shape["heads"], "rope_theta": ROPE_THETA, **given})

    def check(self, config: ModelConfig, name: Any) -> None:
        kv_heads, theta = config.settings.kv_heads, config.settings.rope_theta
        if not is_whole(kv_heads) or kv_heads < 1 or config.heads % kv_heads != 0:
            raise Refusal(
                f"{name('kv_heads')} {kv_heads} does not divide {name('heads')} {config.heads}; "
                "each key and value head serves an equal share of the query heads"
            )
        if config.head_width % 2 != 0:
            raise Refusal(
                f"{name('d_model')} {config.d_model} over {name('heads')} {config.heads} gives "
                f"heads {config.head_width} wide; rotary positions turn pairs, so a head's width "
                "is even"
            )
        if not isinstance(theta, int | float) or not (math.isfinite(theta) and theta > 0):
            raise Refusal(f"{name('rope_theta')} is {theta}; it must be a positive finite number")

    def parts(self, config: ModelConfig) -> Parts:
        settings = config.settings
        return Parts(
            norm=Norm("rms", RMS_EPS),
            attention=Attention(
                kv_heads=settings.kv_heads,
                qkv_bias=False,
                out_bias=False,
                rotary_theta=float(settings.rope_theta),
            ),
            feed_forward=FeedForward(gated=True, activation="silu", bias=False),
            learned_positions=False,
            tied_head=settings.tie_embeddings,
        )

    def transformers_config(self, config: ModelConfig, bos: int, eos: int) -> dict[str, Any]:
        settings = config.settings
        return {
            "architectures": [self.transformers_class],
            "model_type": self.model_type,
            "vocab_size": config.vocab_size,
            "max_position_embeddings": config.positions,
            "hidden_size": config.d_model,
            "intermediate_size": config.d_ff,
            "num_hidden_layers": config.layers,
            "num_attention_heads": config.heads,
            "num_key_value_heads": settings.kv_heads,
            "head_dim": config.head_width,
            "hidden_act": "silu",
            "rms_norm_eps": RMS_EPS,
            "rope_theta": settings.rope_theta,
            "rope_scaling": None,
            "attention_bias": False,
            "attention_dropout": config.attention_dropout,
            "mlp_bias": False,
            "tie_word_embeddings": settings.tie_embeddings,
            "bos_token_id": bos,
            "eos_token_id": eos,
            "pad_token_id": eos,
            "dtype": "float32",
        }

    def from_transformers(self, stated: dict[str, Any], file: Path) -> dict[str, Any]:
        fixed(stated, _FIXED, file)
        heads, d_model = stated["num_attention_heads"], stated["hidden_size"]
        head_dim = stated.get("head_dim")  # transformers' default: hidden_size over the heads
        if head_dim is not None and not (
            is_whole(head_dim) and is_whole(heads) and head_dim * heads == d_model
        ):
            raise Refusal(
                f"{file} sets head_dim {head_dim} with num_attention_heads {heads}; Zrodlo's heads "
                f"share hidden_size {d_model} equally"
            )
        return {
            "vocab_size": stated["vocab_size"], "positions": stated["max_position_embeddings"],
            "d_model": d_model, "layers": stated["num_hidden_layers"], "heads": heads,
            "d_ff": stated["intermediate_size"], "dropout": 0.0,
            "attention_dropout": stated.get("attention_dropout", 0.0), "architecture": self.name,
            "kv_heads": stated.get("num_key_value_heads", heads),
            "rope_theta": _rope_theta(stated, file), "tie_embeddings": tied(stated, file, False),
        }  # fmt: skip

    outer_names = _MODEL_NAMES
    block_prefix = "model.layers.{}."

    def block_names(
        self, config: ModelConfig, name: str, shape: tuple[int, ...]
    ) -> tuple[list[tuple[str, int]], bool]:
        """The queries, keys and values of the fused projection, and the gate and up projections,
        each under its own name; none is transposed."""
        if name == "attention.qkv.weight":
            kv_width = config.settings.kv_heads * config.head_width
            rows = {"q_proj": config.d_model, "k_proj": kv_width, "v_proj": kv_width}
            return [(f"self_attn.{part}.weight", n) for part, n in rows.items()], False
        if name == "mlp.gate_up.weight":
            return [(f"mlp.{part}.weight", config.d_ff) for part in ("gate_proj", "up_proj")], False
        return [(_BLOCK_NAMES[name], shape[0])], False


def _rope_theta(stated: dict, file: Path) -> float:
    """The rotary base: transformers 5 states it in rope_parameters, earlier versions as
    rope_theta (transformers reads the second where the first has none); either way unscaled
    and over the whole head."""
    theta = stated.get("rope_theta", ROPE_THETA)
    parameters = stated.get("rope_parameters")
    if parameters is not None:
        kind = (
            parameters.get("rope_type", parameters.get("type"))
            if isinstance(parameters, dict)
            else None
        )
        if kind != "default" or set(parameters) - {"rope_type", "type", "rope_theta"}:
            raise Refusal(
                f"{file} sets rope_parameters to {parameters!r}; Zrodlo computes unscaled rotary "
                "positions over the whole head only, so the model cannot be imported exactly"
            )
        theta = parameters.get("rope_theta", theta)
    numeric = isinstance(theta, int | float) and not isinstance(theta, bool)
    return float(theta) if numeric else theta  # anything else is refused with the configuration

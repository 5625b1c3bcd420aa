"""The llama decoder (`--architecture llama`): what today's small models use.

Pre-RMSNorm blocks (epsilon 1e-5 unless `norm_eps` says) of causal self-attention with rotary
position embeddings (scaled as Llama 3's where its four settings say) and grouped-query attention
(`kv_heads` key and value heads shared by the query heads; heads `head_dim` wide where it is set,
else d_model over the heads), a SwiGLU MLP (down(silu(gate x) * up x)), no biases, a final RMSNorm
and an LM head, its own or the token embedding's. Rotary positions turn the two halves of each
head's width against each other, the layout transformers' Llama uses, so its weights export as
they are: a LlamaForCausalLM whose fused projections are split (queries, keys and values; gate
and up), none permuted.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from zrodlo.model.declared import option
from zrodlo.model.families.base import Family, fixed, is_number, is_whole, tied
from zrodlo.model.families.recipe import check_recipe, exportable, value_embedding_layers
from zrodlo.model.families.rotary import (
    ROPE_THETA,
    check_rotary,
    rotary_from_transformers,
    rotary_of,
    rotary_to_transformers,
)
from zrodlo.model.parts import Attention, FeedForward, LayerAttention, Norm, Parts
from zrodlo.storage.refusal import Refusal

if TYPE_CHECKING:
    from zrodlo.model.config import ModelConfig

RMS_EPS = 1e-5  # where norm_eps is unset

# Zrodlo's parameter name (after "blocks.<i>.") -> transformers' (after "model.layers.<i>.").
_BLOCK_NAMES = {
    "attention_norm.weight": "input_layernorm.weight",
    "attention.out.weight": "self_attn.o_proj.weight",
    "mlp_norm.weight": "post_attention_layernorm.weight",
    "mlp.down.weight": "mlp.down_proj.weight",
    "attention.q_norm.weight": "self_attn.q_norm.weight",
    "attention.k_norm.weight": "self_attn.k_norm.weight",
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
        "The LM head reads the token embedding's weights instead of its own.", False
    )
    norm_eps: float | None = option("llama: the RMSNorm epsilon; 1e-5 by default.", None)
    head_dim: int | None = option(
        "llama: the width of each attention head, set apart from --d-model over --heads.", None
    )
    # Llama 3's scaling of the rotary frequencies, read from the models that have it: all four
    # or none (`zrodlo.model.families.rotary`).
    rope_scaling_factor: float | None = option(None, None)
    rope_low_frequency_factor: float | None = option(None, None)
    rope_high_frequency_factor: float | None = option(None, None)
    rope_original_positions: int | None = option(None, None)
    # Today's recipe for small models, each off where None (docs/models.md).
    mlp: str | None = option(
        "llama: relu2 for a feed-forward of down(relu(up x)^2) without a gate (ReLU squared); "
        "SwiGLU by default.",
        None,
        metavar="[relu2]",
    )
    norm: str | None = option(
        "llama: unscaled for RMSNorms without a learned scale (QK-norm's too); scaled by default.",
        None,
        metavar="[unscaled]",
    )
    projection_init: str | None = option(
        "llama: zero to start each block's output projections at zero; drawn by default.",
        None,
        metavar="[zero]",
    )
    head_std: float | None = option(
        "llama: the standard deviation an untied head is drawn with; 0.02 by default.", None
    )
    logit_cap: float | None = option(
        "Logits are capped to (-cap, cap) by cap * tanh(logits / cap); none by default.", None
    )
    x0_mix: float | None = option(
        "llama: each block reads r x + m x0, x0 the embeddings' output, r and m learned per layer "
        "from 1 and this value (0.1: nanochat's); none by default.",
        None,
    )
    value_embeddings: int | None = option(
        "llama: value embeddings on every Nth layer, counting back from the last (2: nanochat's, "
        "every other one); none by default.",
        None,
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
        "norm_eps": "rms_norm_eps", "head_dim": "head_dim", "rope_theta": "rope_theta",
        "rope_scaling_factor": "factor", "rope_low_frequency_factor": "low_freq_factor",
        "rope_high_frequency_factor": "high_freq_factor",
        "rope_original_positions": "original_max_position_embeddings",
    }  # fmt: skip
    # What a family built as llama sets apart: biases on the queries, keys and values, QK-norm,
    # and transformers' defaults of what its config.json may leave out (its configuration class's
    # own: those `fixed_settings` holds apart, the others taken as if config.json stated them).
    qkv_bias: ClassVar[bool] = False
    qk_norm: ClassVar[bool] = False
    fixed_settings: ClassVar[dict[str, tuple[Any, Any]]] = _FIXED
    transformers_defaults: ClassVar[dict[str, Any]] = {
        "rms_norm_eps": 1e-6, "tie_word_embeddings": False,
    }  # fmt: skip
    written_settings: ClassVar[dict[str, Any]] = {"attention_bias": False, "mlp_bias": False}

    def settings(self, shape: dict[str, Any], given: dict[str, Any]) -> LlamaSettings:
        """The defaults as config.json records them: a key and value head a query head, and the
        rotary base 10000; the others unset."""
        return self.Settings(**{"kv_heads": shape["heads"], "rope_theta": ROPE_THETA, **given})

    def stated_head_width(self, config: ModelConfig) -> int | None:
        return config.settings.head_dim

    def check(self, config: ModelConfig, name: Any) -> None:
        settings = config.settings
        kv_heads, head_dim, eps = settings.kv_heads, settings.head_dim, settings.norm_eps
        if not is_whole(kv_heads) or kv_heads < 1 or config.heads % kv_heads != 0:
            raise Refusal(
                f"{name('kv_heads')} {kv_heads} does not divide {name('heads')} {config.heads}; "
                "each key and value head serves an equal share of the query heads"
            )
        if head_dim is not None and not (
            is_whole(head_dim) and head_dim >= 2 and head_dim % 2 == 0
        ):
            raise Refusal(
                f"{name('head_dim')} is {head_dim}; rotary positions turn pairs, so a head's "
                "width is an even whole number of two or more"
            )
        if config.head_width % 2 != 0:
            raise Refusal(
                f"{name('d_model')} {config.d_model} over {name('heads')} {config.heads} gives "
                f"heads {config.head_width} wide; rotary positions turn pairs, so a head's width "
                "is even"
            )
        if eps is not None and not (is_number(eps) and 0 < eps < 1):
            raise Refusal(f"{name('norm_eps')} is {eps}; it must lie above 0 and below 1")
        check_rotary(config, name)
        check_recipe(config, name)

    def layer_attention(self, config: ModelConfig, layer: int) -> LayerAttention:
        """What the attention of `layer` sets apart: in llama, every layer's rotary positions are
        the settings' and no window bounds what a query sees."""
        return LayerAttention(rotary_of(config.settings))

    def parts(self, config: ModelConfig) -> Parts:
        settings = config.settings
        eps = RMS_EPS if settings.norm_eps is None else settings.norm_eps
        rms = Norm("rms" if settings.norm is None else "rms_unscaled", eps)
        gated = settings.mlp is None
        return Parts(
            norm=rms,
            attention=Attention(
                kv_heads=settings.kv_heads,
                head_width=config.head_width,
                qkv_bias=self.qkv_bias,
                out_bias=False,
                layers=tuple(self.layer_attention(config, i) for i in range(config.layers)),
                qk_norm=rms if self.qk_norm else None,
            ),
            feed_forward=FeedForward(gated, "silu" if gated else "relu2", bias=False),
            learned_positions=False,
            tied_head=settings.tie_embeddings,
            zero_projections=settings.projection_init == "zero",
            head_std=settings.head_std,
            logit_cap=settings.logit_cap,
            x0_mix=settings.x0_mix,
            value_embedding_layers=value_embedding_layers(config),
        )

    def transformers_config(self, config: ModelConfig, bos: int, eos: int) -> dict[str, Any]:
        settings, parts = config.settings, config.parts
        exportable(config, self.transformers_class)
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
            "rms_norm_eps": parts.norm.eps,
            **rotary_to_transformers(settings),
            **self.written_settings,
            "attention_dropout": config.attention_dropout,
            "tie_word_embeddings": settings.tie_embeddings,
            "bos_token_id": bos,
            "eos_token_id": eos,
            "pad_token_id": eos,
            "dtype": "float32",
        }

    def from_transformers(self, stated: dict[str, Any], file: Path) -> dict[str, Any]:
        fixed(stated, self.fixed_settings, file)
        stated = {**self.transformers_defaults, **stated}
        heads, d_model = stated["num_attention_heads"], stated["hidden_size"]
        head_dim = stated.get("head_dim")  # where no default states it: hidden_size over heads
        if is_whole(heads) and is_whole(d_model) and heads > 0 and head_dim == d_model // heads:
            head_dim = None  # not set apart: config.json says what it would be anyway
        eps = stated["rms_norm_eps"]
        return {
            "vocab_size": stated["vocab_size"], "positions": stated["max_position_embeddings"],
            "d_model": d_model, "layers": stated["num_hidden_layers"], "heads": heads,
            "d_ff": stated["intermediate_size"], "dropout": 0.0,
            "attention_dropout": stated.get("attention_dropout", 0.0), "architecture": self.name,
            "kv_heads": stated.get("num_key_value_heads", heads),
            "tie_embeddings": tied(stated, file, False),
            "norm_eps": None if eps == RMS_EPS else eps, "head_dim": head_dim,
            **rotary_from_transformers(stated, file),
        }  # fmt: skip

    outer_names = _MODEL_NAMES
    # A block's parameters but the fused ones, by their names after "blocks.<i>.".
    own_block_names: ClassVar[dict[str, str]] = _BLOCK_NAMES
    block_prefix = "model.layers.{}."
    base_prefix = "model."

    def block_names(
        self, config: ModelConfig, name: str, shape: tuple[int, ...]
    ) -> tuple[list[tuple[str, int]], bool]:
        """The queries, keys and values of the fused projection (weight and bias), and the gate
        and up projections, each under its own name; none is transposed."""
        kind = name.rsplit(".", 1)[-1]  # weight or bias
        if name.startswith("attention.qkv."):
            kv_width = config.settings.kv_heads * config.head_width
            rows = {"q_proj": config.heads * config.head_width, "k_proj": kv_width,
                    "v_proj": kv_width}  # fmt: skip
            return [(f"self_attn.{part}.{kind}", n) for part, n in rows.items()], False
        if name == "mlp.gate_up.weight":
            return [(f"mlp.{part}.weight", config.d_ff) for part in ("gate_proj", "up_proj")], False
        return [(self.own_block_names[name], shape[0])], False

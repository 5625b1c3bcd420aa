"""GPT-2's decoder (`--architecture gpt`, the family of a config.json that names none).

Token and learned position embeddings, pre-LayerNorm blocks of causal multi-head self-attention
and a GELU MLP (exact, or by the tanh approximation GPT-2 was trained with: `--activation
gelu_new`), biases throughout, a final LayerNorm (epsilon 1e-5) and an LM head of its own, or
with `--tie-embeddings` the token embedding (as GPT-2 was trained).

In transformers it is a GPT2LMHeadModel with Zrodlo's sizes. GPT-2 keeps its projections in Conv1D
layers, whose weight is (in, out): the transpose of an nn.Linear's. A GPT-2 imported keeps its head
tied to the token embedding where transformers ties it (its default), and fine-tunes so.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from zrodlo.model.declared import option
from zrodlo.model.families.base import Family, fixed, is_whole, tied
from zrodlo.model.parts import Attention, FeedForward, LayerAttention, Norm, Parts
from zrodlo.storage.refusal import Refusal, listed

if TYPE_CHECKING:
    from zrodlo.model.config import ModelConfig

NORM_EPS = 1e-5
# The MLP's activations, by the names transformers' config.json gives them.
ACTIVATIONS = ("gelu", "gelu_new", "relu2")

# Zrodlo's parameter name (after "blocks.<i>.") -> GPT-2's (after "transformer.h.<i>."), and
# whether the weight is a Conv1D's, stored transposed.
_BLOCK_NAMES = {
    "attention_norm.weight": ("ln_1.weight", False),
    "attention_norm.bias": ("ln_1.bias", False),
    "attention.qkv.weight": ("attn.c_attn.weight", True),
    "attention.qkv.bias": ("attn.c_attn.bias", False),
    "attention.out.weight": ("attn.c_proj.weight", True),
    "attention.out.bias": ("attn.c_proj.bias", False),
    "mlp_norm.weight": ("ln_2.weight", False),
    "mlp_norm.bias": ("ln_2.bias", False),
    "mlp.up.weight": ("mlp.c_fc.weight", True),
    "mlp.up.bias": ("mlp.c_fc.bias", False),
    "mlp.down.weight": ("mlp.c_proj.weight", True),
    "mlp.down.bias": ("mlp.c_proj.bias", False),
}
_MODEL_NAMES = {
    "token_embedding.weight": "transformer.wte.weight",
    "position_embedding.weight": "transformer.wpe.weight",
    "final_norm.weight": "transformer.ln_f.weight",
    "final_norm.bias": "transformer.ln_f.bias",
    "lm_head.weight": "lm_head.weight",
}
# Settings that must have the value Zrodlo computes with: each one's default in transformers
# (what the model computes when config.json leaves it out) and Zrodlo's value.
_FIXED = {
    "layer_norm_epsilon": (1e-5, NORM_EPS),
    "scale_attn_weights": (True, True),
    "scale_attn_by_inverse_layer_idx": (False, False),
    "add_cross_attention": (False, False),
}


@dataclass(frozen=True, kw_only=True)
class GPTSettings:
    """What only GPT-2's decoder has."""

    activation: str | None = option(
        "gpt: the MLP's activation: GELU, exact (gelu) or by its tanh approximation as GPT-2 "
        "(gelu_new), or ReLU squared (relu2); gelu by default.",
        None,
        metavar="[" + "|".join(ACTIVATIONS) + "]",
    )
    tie_embeddings: bool = option(
        "The LM head reads the token embedding's weights instead of its own.", False
    )


class GPT(Family):
    name = "gpt"
    summary = "GPT-2's decoder (learned positions, LayerNorm, GELU)."
    Settings = GPTSettings
    model_type = "gpt2"
    transformers_class = "GPT2LMHeadModel"
    transformers_fields: ClassVar[dict[str, str]] = {
        "positions": "n_positions", "d_model": "n_embd", "layers": "n_layer", "heads": "n_head",
        "d_ff": "n_inner", "dropout": "resid_pdrop", "attention_dropout": "attn_pdrop",
        "activation": "activation_function", "tie_embeddings": "tie_word_embeddings",
    }  # fmt: skip

    def settings(self, shape: dict[str, Any], given: dict[str, Any]) -> GPTSettings:
        """The defaults as config.json records them: the exact GELU, the head of its own."""
        return GPTSettings(**{"activation": "gelu", **given})

    def check(self, config: ModelConfig, name: Any) -> None:
        activation = config.settings.activation
        if activation not in ACTIVATIONS:
            raise Refusal(f"{name('activation')} is {activation!r}; it is {listed(ACTIVATIONS)}")

    def parts(self, config: ModelConfig) -> Parts:
        return Parts(
            norm=Norm("layer", NORM_EPS),
            attention=Attention(
                kv_heads=config.heads,
                head_width=config.head_width,
                qkv_bias=True,
                out_bias=True,
                layers=(LayerAttention(rotary=None),) * config.layers,
            ),
            feed_forward=FeedForward(gated=False, activation=config.settings.activation, bias=True),
            learned_positions=True,
            tied_head=config.settings.tie_embeddings,
        )

    def transformers_config(self, config: ModelConfig, bos: int, eos: int) -> dict[str, Any]:
        return {
            "architectures": [self.transformers_class],
            "model_type": self.model_type,
            "vocab_size": config.vocab_size,
            "n_positions": config.positions,
            "n_embd": config.d_model,
            "n_layer": config.layers,
            "n_head": config.heads,
            "n_inner": config.d_ff,
            "activation_function": config.settings.activation,
            "layer_norm_epsilon": NORM_EPS,
            "embd_pdrop": config.dropout,
            "resid_pdrop": config.dropout,
            "attn_pdrop": config.attention_dropout,
            "scale_attn_weights": True,
            "scale_attn_by_inverse_layer_idx": False,
            "reorder_and_upcast_attn": False,
            "tie_word_embeddings": config.settings.tie_embeddings,
            "bos_token_id": bos,
            "eos_token_id": eos,
            "pad_token_id": eos,
            "dtype": "float32",
        }

    def from_transformers(self, stated: dict[str, Any], file: Path) -> dict[str, Any]:
        fixed(stated, _FIXED, file)
        activation = stated.get("activation_function", "gelu_new")  # transformers' default
        if activation not in ACTIVATIONS:
            raise Refusal(
                f"{file} sets activation_function to {activation!r}; Zrodlo computes GPT-2 with "
                f"{listed(map(repr, ACTIVATIONS))} only, so the model cannot be imported exactly"
            )
        embedding, residual = stated.get("embd_pdrop", 0.1), stated.get("resid_pdrop", 0.1)
        if embedding != residual:
            raise Refusal(
                f"{file} sets embd_pdrop {embedding} and resid_pdrop {residual} (0.1 where it sets "
                "none); Zrodlo's GPT drops both at one rate"
            )
        d_model = stated["n_embd"]
        return {
            "vocab_size": stated["vocab_size"], "positions": stated["n_positions"],
            "d_model": d_model, "layers": stated["n_layer"], "heads": stated["n_head"],
            # A width that is no whole number is refused with the configuration, as n_embd.
            "d_ff": stated.get("n_inner") or (4 * d_model if is_whole(d_model) else None),
            "dropout": residual,
            "attention_dropout": stated.get("attn_pdrop", 0.1), "architecture": self.name,
            "activation": activation, "tie_embeddings": tied(stated, file, True),
        }  # fmt: skip

    outer_names = _MODEL_NAMES
    block_prefix = "transformer.h.{}."
    base_prefix = "transformer."
    # The attention's causal mask and its fill value, which older checkpoints saved as buffers.
    ignored_buffers = r"transformer\.h\.\d+\.attn\.(bias|masked_bias)"

    def block_names(
        self, config: ModelConfig, name: str, shape: tuple[int, ...]
    ) -> tuple[list[tuple[str, int]], bool]:
        target, transposed = _BLOCK_NAMES[name]
        return [(target, shape[-1] if transposed else shape[0])], transposed

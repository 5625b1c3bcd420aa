"""Gemma 3's text decoder (`--architecture gemma3`, Gemma 3 270M and 1B): llama's grouped-query
attention and gated MLP, with Gemma's own arithmetic.

- RMSNorm scaled by (1 + w), computed in float32, its weights held centred on zero, four a block:
  before and after attention, before and after the MLP (each branch normed again before it joins
  the residual stream), and QK-norm of the same kind on each head's query and key;
- the token embedding multiplied by the square root of the width; a tied head by default, its
  logits capped by `logit_cap` * tanh(logits / logit_cap) where it is set;
- GeGLU: down(gelu_tanh(gate x) * up x), torch's tanh approximation of GELU;
- attention scores scaled by 1/sqrt(`query_scalar`) (transformers' query_pre_attn_scalar);
- local layers attending within a sliding window (a query sees itself and the `sliding_window` - 1
  keys before it), every `global_every`-th layer global over the whole context; rotary positions
  of base `local_rope_theta` in the local layers and `rope_theta` in the global ones.

In transformers it is a Gemma3ForCausalLM (model_type gemma3_text). Its config.json states the
layers' kinds as `layer_types` (or `sliding_window_pattern`) and the rotary bases as
`rope_parameters` by layer type (transformers 5) or `rope_theta` and `rope_local_base_freq`; both
are read. What Zrodlo does not compute is refused naming its field: bidirectional attention, soft
caps on the attention's scores, scaled rotary positions, kinds of layers that no interval gives.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from zrodlo.model.declared import option
from zrodlo.model.families.base import fixed, is_number, is_whole, tied
from zrodlo.model.families.llama import Llama, LlamaSettings
from zrodlo.model.families.recipe import refuse_recipe
from zrodlo.model.families.rotary import SCALING
from zrodlo.model.parts import Attention, FeedForward, LayerAttention, Norm, Parts, Rotary
from zrodlo.storage.refusal import Refusal

if TYPE_CHECKING:
    from zrodlo.model.config import ModelConfig

# Gemma 3's own values where config.json or model init leaves them out.
GLOBAL_THETA, LOCAL_THETA, WINDOW, GLOBAL_EVERY, NORM_EPS = 1_000_000.0, 10_000.0, 512, 6, 1e-6
_FIXED = {
    "hidden_activation": ("gelu_pytorch_tanh", "gelu_pytorch_tanh"),
    "attention_bias": (False, False),
    "attn_logit_softcapping": (None, None),
    "use_bidirectional_attention": (False, False),
}
_BLOCK_NAMES = {
    "attention_norm.weight": "input_layernorm.weight",
    "attention.q_norm.weight": "self_attn.q_norm.weight",
    "attention.k_norm.weight": "self_attn.k_norm.weight",
    "attention.out.weight": "self_attn.o_proj.weight",
    "attention_post_norm.weight": "post_attention_layernorm.weight",
    "mlp_norm.weight": "pre_feedforward_layernorm.weight",
    "mlp.down.weight": "mlp.down_proj.weight",
    "mlp_post_norm.weight": "post_feedforward_layernorm.weight",
}
_ROTARY_KEYS = {"rope_type", "rope_theta"}


@dataclass(frozen=True, kw_only=True)
class Gemma3Settings(LlamaSettings):
    """llama's settings (rotary scaling and the recipe's aside), Gemma's local layers and scale."""

    local_rope_theta: float | None = option(
        "gemma3: the base of the rotary angles of the local layers; 10000 by default.", None
    )
    sliding_window: int | None = option(
        "gemma3: the keys a query of a local layer sees, its own and those before it; 512 by "
        "default.",
        None,
    )
    global_every: int | None = option(
        "gemma3: every this many layers, one attends over the whole context; 6 by default.", None
    )
    query_scalar: int | None = option(
        "gemma3: attention scores are divided by its square root; the head width by default.",
        None,
    )


def layer_types(layers: int, every: int) -> list[str]:
    """transformers' layer_types: every `every`-th layer full_attention, the others sliding."""
    return [
        "full_attention" if (layer + 1) % every == 0 else "sliding_attention"
        for layer in range(layers)
    ]


class Gemma3(Llama):
    name = "gemma3"
    summary = "Gemma 3's decoder: (1 + w) RMSNorms around each branch, GeGLU, local layers."
    Settings = Gemma3Settings
    model_type = "gemma3_text"
    transformers_class = "Gemma3ForCausalLM"
    transformers_fields: ClassVar[dict[str, str]] = {
        **Llama.transformers_fields, "local_rope_theta": "rope_local_base_freq",
        "sliding_window": "sliding_window", "global_every": "layer_types",
        "query_scalar": "query_pre_attn_scalar", "logit_cap": "final_logit_softcapping",
    }  # fmt: skip
    own_block_names: ClassVar[dict[str, str]] = _BLOCK_NAMES

    def settings(self, shape: dict[str, Any], given: dict[str, Any]) -> Gemma3Settings:
        defaults = {"rope_theta": GLOBAL_THETA, "local_rope_theta": LOCAL_THETA,
                    "sliding_window": WINDOW, "global_every": GLOBAL_EVERY, "norm_eps": NORM_EPS,
                    "tie_embeddings": True}  # fmt: skip
        return super().settings(shape, {**defaults, **given})

    def check(self, config: ModelConfig, name: Any) -> None:
        super().check(config, name)
        refuse_recipe(config, name, self.name)
        settings = config.settings
        for field in SCALING:
            if getattr(settings, field) is not None:
                raise Refusal(
                    f"{name(field)} is set; a gemma3 model's rotary positions are unscaled"
                )
        theta = settings.local_rope_theta
        if not (is_number(theta) and 0 < theta < float("inf")):
            raise Refusal(
                f"{name('local_rope_theta')} is {theta}; it must be a positive finite number"
            )
        for field in ("sliding_window", "global_every", "query_scalar"):
            value = getattr(settings, field)
            unset = field == "query_scalar" and value is None  # the head width
            if not (unset or (is_whole(value) and value >= 1)):
                raise Refusal(f"{name(field)} is {value}; it must be a whole number of one or more")

    def layer_attention(self, config: ModelConfig, layer: int) -> LayerAttention:
        settings = config.settings
        if (layer + 1) % settings.global_every == 0:
            return LayerAttention(Rotary(float(settings.rope_theta)))
        return LayerAttention(Rotary(float(settings.local_rope_theta)), settings.sliding_window)

    def parts(self, config: ModelConfig) -> Parts:
        settings = config.settings
        norm = Norm("rms_plus_one", settings.norm_eps)
        scalar = config.head_width if settings.query_scalar is None else settings.query_scalar
        return Parts(
            norm=norm,
            attention=Attention(
                kv_heads=settings.kv_heads,
                head_width=config.head_width,
                qkv_bias=False,
                out_bias=False,
                layers=tuple(self.layer_attention(config, i) for i in range(config.layers)),
                qk_norm=norm,
                scale=float(scalar) ** -0.5,
            ),
            feed_forward=FeedForward(gated=True, activation="gelu_pytorch_tanh", bias=False),
            learned_positions=False,
            tied_head=settings.tie_embeddings,
            sandwich_norms=True,
            embedding_scale=config.d_model**0.5,
            logit_cap=settings.logit_cap,
        )

    def transformers_config(self, config: ModelConfig, bos: int, eos: int) -> dict[str, Any]:
        settings = config.settings
        rotary = {
            "full_attention": {"rope_type": "default", "rope_theta": settings.rope_theta},
            "sliding_attention": {"rope_type": "default", "rope_theta": settings.local_rope_theta},
        }
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
            "hidden_activation": "gelu_pytorch_tanh",
            "rms_norm_eps": settings.norm_eps,
            "rope_parameters": rotary,
            "attention_bias": False,
            "attention_dropout": config.attention_dropout,
            "query_pre_attn_scalar": settings.query_scalar or config.head_width,
            "sliding_window": settings.sliding_window,
            "layer_types": layer_types(config.layers, settings.global_every),
            "final_logit_softcapping": settings.logit_cap,
            "attn_logit_softcapping": None,
            "use_bidirectional_attention": False,
            "tie_word_embeddings": settings.tie_embeddings,
            "bos_token_id": bos,
            "eos_token_id": eos,
            "pad_token_id": eos,
            "dtype": "float32",
        }

    def from_transformers(self, stated: dict[str, Any], file: Path) -> dict[str, Any]:
        fixed(stated, _FIXED, file)
        heads, d_model = stated["num_attention_heads"], stated["hidden_size"]
        head_dim = stated.get("head_dim", 256)  # Gemma3TextConfig's
        if is_whole(heads) and is_whole(d_model) and heads > 0 and head_dim == d_model // heads:
            head_dim = None
        layers = stated["num_hidden_layers"]
        global_theta, local_theta = _rotary(stated, file)
        return {
            "vocab_size": stated["vocab_size"], "positions": stated["max_position_embeddings"],
            "d_model": d_model, "layers": layers, "heads": heads,
            "d_ff": stated["intermediate_size"], "dropout": 0.0,
            "attention_dropout": stated.get("attention_dropout", 0.0), "architecture": self.name,
            "kv_heads": stated.get("num_key_value_heads", 4), "head_dim": head_dim,
            "tie_embeddings": tied(stated, file, True),
            "norm_eps": stated.get("rms_norm_eps", NORM_EPS),
            "rope_theta": global_theta, "local_rope_theta": local_theta,
            "sliding_window": stated.get("sliding_window", 4096),
            "global_every": _global_every(stated, layers, file),
            "query_scalar": stated.get("query_pre_attn_scalar", 256),
            "logit_cap": stated.get("final_logit_softcapping"),
        }  # fmt: skip


def _rotary(stated: dict[str, Any], file: Path) -> tuple[Any, Any]:
    """The rotary bases of the global and the local layers, read as transformers reads them:
    rope_parameters by layer type, each base where it leaves one out from rope_theta and
    rope_local_base_freq (1,000,000 and 10,000 where those are left out too); the older
    rope_scaling, which would scale the global layers' angles, refused."""
    given = stated.get("rope_parameters")
    scaling = stated.get("rope_scaling")
    if scaling is not None:
        raise Refusal(
            f"{file} sets rope_scaling to {scaling!r}; Zrodlo computes a gemma3 model's rotary "
            "positions unscaled only, so the model cannot be imported exactly"
        )
    if given is None:
        given = {}
    kinds = {"full_attention": ("rope_theta", GLOBAL_THETA),
             "sliding_attention": ("rope_local_base_freq", LOCAL_THETA)}  # fmt: skip
    if (
        not isinstance(given, dict)
        or set(given) - set(kinds)
        or not all(
            isinstance(given.get(kind, {}), dict)
            and given.get(kind, {}).get("rope_type", "default") == "default"
            and not set(given.get(kind, {})) - _ROTARY_KEYS
            for kind in kinds
        )
    ):
        raise Refusal(
            f"{file} sets rope_parameters to {given!r}; Zrodlo computes a gemma3 model's rotary "
            "positions unscaled (rope_type default), a base for full_attention and one for "
            "sliding_attention, so the model cannot be imported exactly"
        )
    bases = []
    for kind, (field, default) in kinds.items():
        base = given.get(kind, {}).get("rope_theta", stated.get(field, default))
        bases.append(float(base) if is_number(base) else base)  # else refused with the rest
    return bases[0], bases[1]


def _global_every(stated: dict[str, Any], layers: Any, file: Path) -> Any:
    """The interval of the global layers that gives config.json's layer_types (transformers fills
    it from sliding_window_pattern, 6, where it is left out)."""
    pattern = stated.get("sliding_window_pattern", GLOBAL_EVERY)
    listed = stated.get("layer_types")
    if listed is None or not is_whole(layers) or layers < 1:
        return pattern  # refused with the rest where it is no whole number
    stated_first = [pattern] if is_whole(pattern) and pattern >= 1 else []
    for every in (*stated_first, *range(1, layers + 2)):  # past the last: none global
        if listed == layer_types(layers, every):
            return every
    raise Refusal(
        f"{file} sets layer_types to {listed!r}; Zrodlo makes every n-th of the {layers} layers "
        "full_attention and the others sliding_attention only, so the model cannot be imported "
        "exactly"
    )

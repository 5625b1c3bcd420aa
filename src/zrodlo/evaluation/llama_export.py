"""A llama model in transformers' terms: the `LlamaForCausalLM` configuration that states it
exactly, and its weights under transformers' names, the fused projections split (queries, keys
and values; gate and up). Rotary positions turn the halves of each head as transformers' Llama
does, so no weight is permuted.
"""

from __future__ import annotations

from zrodlo.data.tokenizer import Tokenizer
from zrodlo.model.config import ModelConfig, parameter_shapes
from zrodlo.model.llama import RMS_EPS

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


def llama_config(config: ModelConfig, tokenizer: Tokenizer) -> dict:
    """The LlamaForCausalLM configuration that states `config` exactly."""
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": config.vocab_size,
        "max_position_embeddings": config.positions,
        "hidden_size": config.d_model,
        "intermediate_size": config.d_ff,
        "num_hidden_layers": config.layers,
        "num_attention_heads": config.heads,
        "num_key_value_heads": config.kv_heads,
        "head_dim": config.head_width,
        "hidden_act": "silu",
        "rms_norm_eps": RMS_EPS,
        "rope_theta": config.rope_theta,
        "rope_scaling": None,
        "attention_bias": False,
        "attention_dropout": config.attention_dropout,
        "mlp_bias": False,
        "tie_word_embeddings": config.tie_embeddings,
        "bos_token_id": tokenizer.bos,
        "eos_token_id": tokenizer.eos,
        "pad_token_id": tokenizer.eos,
        "dtype": "float32",
    }


def llama_names(config: ModelConfig) -> dict[str, tuple[list[tuple[str, int]], bool]]:
    """Each Zrodlo parameter's transformers names with their rows (the queries, keys and values of
    the fused projection; the gate and up projections); none is transposed."""
    kv_width = config.kv_heads * config.head_width
    names = {}
    for name, shape in parameter_shapes(config).items():
        if name in _MODEL_NAMES:
            names[name] = ([(_MODEL_NAMES[name], shape[0])], False)
            continue
        _, layer, rest = name.split(".", 2)  # blocks.<i>.<rest>
        prefix = f"model.layers.{layer}."
        if rest == "attention.qkv.weight":
            rows = {"q_proj": config.d_model, "k_proj": kv_width, "v_proj": kv_width}
            parts = [(f"{prefix}self_attn.{part}.weight", n) for part, n in rows.items()]
        elif rest == "mlp.gate_up.weight":
            parts = [
                (f"{prefix}mlp.{part}.weight", config.d_ff) for part in ("gate_proj", "up_proj")
            ]
        else:
            parts = [(prefix + _BLOCK_NAMES[rest], shape[0])]
        names[name] = (parts, False)
    return names

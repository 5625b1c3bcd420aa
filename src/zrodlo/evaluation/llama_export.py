"""A llama model in transformers' terms: the `LlamaForCausalLM` configuration that states it
exactly, and its weights under transformers' names, the fused projections split (queries, keys
and values; gate and up). Rotary positions turn the halves of each head as transformers' Llama
does, so no weight is permuted.
"""

from __future__ import annotations

import torch

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


def llama_names(config: ModelConfig) -> dict[str, tuple[list[str], bool]]:
    """Each Zrodlo parameter's transformers names (the parts of a fused projection, in its row
    order); none is transposed."""
    names = {}
    for name in parameter_shapes(config):
        if name in _MODEL_NAMES:
            names[name] = ([_MODEL_NAMES[name]], False)
            continue
        _, layer, rest = name.split(".", 2)  # blocks.<i>.<rest>
        prefix = f"model.layers.{layer}."
        if rest == "attention.qkv.weight":
            parts = [f"{prefix}self_attn.{part}.weight" for part in ("q_proj", "k_proj", "v_proj")]
        elif rest == "mlp.gate_up.weight":
            parts = [f"{prefix}mlp.{part}.weight" for part in ("gate_proj", "up_proj")]
        else:
            parts = [prefix + _BLOCK_NAMES[rest]]
        names[name] = (parts, False)
    return names


def llama_weights(config: ModelConfig, weights: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Zrodlo's weights under transformers' Llama names."""
    kv_width = config.kv_heads * config.head_width
    renamed = {}
    for name, tensor in weights.items():
        if name in _MODEL_NAMES:
            renamed[_MODEL_NAMES[name]] = tensor.contiguous()
            continue
        _, layer, rest = name.split(".", 2)  # blocks.<i>.<rest>
        prefix = f"model.layers.{layer}."
        if rest == "attention.qkv.weight":
            q, k, v = tensor.split((config.d_model, kv_width, kv_width))  # rows
            for part, value in (("q_proj", q), ("k_proj", k), ("v_proj", v)):
                renamed[f"{prefix}self_attn.{part}.weight"] = value.contiguous()
        elif rest == "mlp.gate_up.weight":
            gate, up = tensor.chunk(2)  # rows
            renamed[f"{prefix}mlp.gate_proj.weight"] = gate.contiguous()
            renamed[f"{prefix}mlp.up_proj.weight"] = up.contiguous()
        else:
            renamed[prefix + _BLOCK_NAMES[rest]] = tensor.contiguous()
    return renamed

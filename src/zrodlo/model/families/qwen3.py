"""Qwen3's decoder (`--architecture qwen3`, the dense Qwen3 models): llama's, with each attention
head's query and key normalized (an RMSNorm over the head's width, its own scale, QK-norm) before
rotary positions turn them, and no biases.

Every setting is llama's (`zrodlo.model.families.llama`). In transformers it is a
Qwen3ForCausalLM, its parameters named as a LlamaForCausalLM's with `self_attn.q_norm` and
`self_attn.k_norm` beside the projections. Its heads are 128 wide where config.json states no
head_dim (Qwen3-0.6B: 16 heads of 128 over a width of 1,024). Like Qwen2 it can attend within a
sliding window on its upper layers; the released models leave it off, and a config.json that turns
it on is refused, as Zrodlo attends over the whole window.
"""

from __future__ import annotations

from typing import Any, ClassVar

from zrodlo.model.families.qwen2 import Qwen2

# Settings that must have the value Zrodlo computes with: transformers' default, and Zrodlo's.
_FIXED = {
    "hidden_act": ("silu", "silu"),
    "partial_rotary_factor": (1.0, 1.0),
    "use_sliding_window": (False, False),
    "attention_bias": (False, False),
}


class Qwen3(Qwen2):
    name = "qwen3"
    summary = "Llama's decoder with QK-norm: each head's query and key RMS-normed (Qwen3)."
    model_type = "qwen3"
    transformers_class = "Qwen3ForCausalLM"
    qkv_bias = False
    qk_norm = True
    fixed_settings: ClassVar[dict[str, tuple[Any, Any]]] = _FIXED
    transformers_defaults: ClassVar[dict[str, Any]] = {
        "rms_norm_eps": 1e-6, "tie_word_embeddings": False, "num_key_value_heads": 32,
        "head_dim": 128,
    }  # fmt: skip
    written_settings: ClassVar[dict[str, Any]] = {
        "use_sliding_window": False, "attention_bias": False,
    }  # fmt: skip

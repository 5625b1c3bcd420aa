"""Qwen2's decoder (`--architecture qwen2`, Qwen2 and Qwen2.5): llama's, with biases on the
query, key and value projections.

Every setting is llama's (`zrodlo.model.families.llama`). In transformers it is a
Qwen2ForCausalLM, its parameters named as a LlamaForCausalLM's, the projections' biases beside
their weights. Qwen2 can attend within a sliding window on its upper layers; the released models
leave it off, and a config.json that turns it on is refused, as Zrodlo attends over the whole
window.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from zrodlo.model.families.base import fixed, whole_window
from zrodlo.model.families.llama import Llama

# Settings that must have the value Zrodlo computes with: transformers' default, and Zrodlo's.
_FIXED = {
    "hidden_act": ("silu", "silu"),
    "partial_rotary_factor": (1.0, 1.0),
    "use_sliding_window": (False, False),
}


class Qwen2(Llama):
    name = "qwen2"
    summary = "Llama's decoder with biases on the queries, keys and values (Qwen2, Qwen2.5)."
    model_type = "qwen2"
    transformers_class = "Qwen2ForCausalLM"
    qkv_bias = True
    fixed_settings: ClassVar[dict[str, tuple[Any, Any]]] = _FIXED
    transformers_defaults: ClassVar[dict[str, Any]] = {
        "rms_norm_eps": 1e-6, "tie_word_embeddings": False, "num_key_value_heads": 32,
    }  # fmt: skip
    written_settings: ClassVar[dict[str, Any]] = {"use_sliding_window": False}

    def from_transformers(self, stated: dict[str, Any], file: Path) -> dict[str, Any]:
        fixed(stated, self.fixed_settings, file)
        whole_window(stated, file)
        return super().from_transformers(stated, file)

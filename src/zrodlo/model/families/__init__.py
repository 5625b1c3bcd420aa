"""Decoder families, one module each on the base in `base.py`, and their registry: the
configuration, the network, export and import, the params of the pipeline and `--help` read the
families from here and name none of them.

    gpt    GPT-2's decoder (gpt.py): the family of a config.json that names none
    llama  RMSNorm, rotary positions, SwiGLU, grouped-query attention (llama.py)
    qwen2  llama's, with biases on the queries, keys and values (qwen2.py)
    qwen3  llama's, with each head's query and key RMS-normed (QK-norm; qwen3.py)
    smollm3  llama's, without rotary positions in every 4th layer (smollm3.py)
    gemma3 Gemma 3's: (1 + w) RMSNorms around each branch, GeGLU, local layers (gemma3.py)

A new family is a module with a class on `Family` and its line in `FAMILIES`.
"""

from __future__ import annotations

from zrodlo.model.families.base import Family, settings_fields
from zrodlo.model.families.gemma3 import Gemma3
from zrodlo.model.families.gpt import GPT
from zrodlo.model.families.llama import Llama
from zrodlo.model.families.qwen2 import Qwen2
from zrodlo.model.families.qwen3 import Qwen3
from zrodlo.model.families.smollm3 import SmolLM3
from zrodlo.storage.refusal import listed as sentence_list

FAMILIES: dict[str, Family] = {
    family.name: family for family in (GPT(), Llama(), Qwen2(), Qwen3(), SmolLM3(), Gemma3())
}
# The family of a config.json that names none: the one releases up to 0.1.0 wrote.
DEFAULT = "gpt"


def listed(names: list[str] | None = None, last: str = "or") -> str:
    """The families' names (or `names`) as a sentence lists them: "gpt, llama, qwen2, qwen3, smollm3 or gemma3"."""
    return sentence_list(list(FAMILIES) if names is None else names, last)


def families_with(setting: str) -> list[str]:
    """The names of the families that have `setting`."""
    return [
        name
        for name, family in FAMILIES.items()
        if setting in {field.name for field in settings_fields(family)}
    ]


def by_model_type(model_type: object) -> Family | None:
    """The family transformers names `model_type`, or None."""
    return next((f for f in FAMILIES.values() if f.model_type == model_type), None)

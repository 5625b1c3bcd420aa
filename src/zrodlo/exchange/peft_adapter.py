"""Adapters as a PEFT LoRA adapter directory: `adapter_config.json` and
`adapter_model.safetensors`, which `peft.PeftModel.from_pretrained` loads onto the base as
`model export` writes it.

Each adapter goes to the transformers module that holds its rows (`Family.transformers_names`). A
module that holds one target's rows (llama's q_proj, v_proj, gate_proj, ...) takes its A and B as
they are. A module that holds several (GPT-2's fused c_attn: q, k and v) takes one adapter of rank
k r: A is the targets' As one under another and B places each target's B in its rows and its
block of columns, zero elsewhere, so B A is each target's B A in its rows; its alpha is k alpha,
keeping the scale alpha / r (`rank_pattern`, `alpha_pattern`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

from zrodlo.model.adapter_spec import AdapterSpec, places
from zrodlo.model.config import ModelConfig
from zrodlo.model.parts import parameter_shapes
from zrodlo.storage.digest import write_json
from zrodlo.storage.outputs import check_new_directory, new_directory
from zrodlo.storage.refusal import Refusal
from zrodlo.training.checkpoint import read_model

ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"
WEIGHT = ".weight"


def export_adapter(checkpoint: Path, output: Path) -> Path:
    """Write the adapters of a run of adapters' `checkpoint` as the PEFT adapter directory
    `output`, for the base that `model export` writes of the model they were trained on."""
    check_new_directory(output)
    loaded = read_model(checkpoint)
    if loaded.adapters is None:
        raise Refusal(
            f"{checkpoint} holds no adapters; --adapter exports the adapters of a run that "
            "trained them (model train --lora-rank), and model export alone writes this model"
        )
    # The adapters are for the base `model export` writes: what it refuses, they are refused for.
    config, tokenizer = loaded.config, loaded.tokenizer
    config.family.transformers_config(config, tokenizer.bos, tokenizer.eos)
    settings, tensors = peft_adapter(loaded.config, loaded.adapters.spec, loaded.adapters.tensors)
    with new_directory(output) as partial:
        write_json(partial / ADAPTER_CONFIG, settings)
        save_file(tensors, partial / ADAPTER_WEIGHTS, metadata={"format": "pt"})
    return output


def peft_adapter(
    config: ModelConfig, spec: AdapterSpec, adapters: dict[str, torch.Tensor]
) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """adapter_config.json's content and adapter_model.safetensors' tensors for `adapters`."""
    names = config.family.transformers_names(config)
    shapes = parameter_shapes(config)
    chosen = {name: place for name, place in places(config).items() if name in spec.targets}
    tensors: dict[str, torch.Tensor] = {}
    modules: set[str] = set()
    ranks: dict[str, int] = {}
    for layer in range(config.layers):
        prefix = f"blocks.{layer}."
        for linear in dict.fromkeys(place.linear for place in chosen.values()):
            parts, transposed = names[f"{prefix}{linear}{WEIGHT}"]
            if (
                transposed
            ):  # one module (GPT-2's Conv1D), its rows counted as transformers holds them
                ((part, _),) = parts
                parts = [(part, shapes[f"{prefix}{linear}{WEIGHT}"][0])]
            first = 0
            for part, rows in parts:  # (transformers name, rows) in row order
                held = [
                    (target, place)
                    for target, place in chosen.items()
                    if place.linear == linear
                    and first <= place.start
                    and place.stop <= first + rows
                ]
                if held:
                    module = part.removesuffix(WEIGHT)
                    a, b = _fused(held, f"{prefix}{linear}", adapters, first, rows, spec.rank)
                    tensors[f"base_model.model.{module}.lora_A.weight"] = a
                    tensors[f"base_model.model.{module}.lora_B.weight"] = b
                    suffix = _suffix(module, layer, config)
                    modules.add(suffix)
                    ranks[suffix] = len(held) * spec.rank
                first += rows
    fused = {suffix: rank for suffix, rank in ranks.items() if rank != spec.rank}
    settings = {
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "r": spec.rank,
        "lora_alpha": spec.alpha,
        "lora_dropout": 0.0,
        "bias": "none",
        "target_modules": sorted(modules),
        "rank_pattern": fused,
        "alpha_pattern": {s: spec.alpha * rank / spec.rank for s, rank in fused.items()},
        "fan_in_fan_out": config.family.transformers_names(config)[
            f"blocks.0.{next(iter(chosen.values())).linear}{WEIGHT}"
        ][1],
        "base_model_name_or_path": None,
    }
    return settings, tensors


def _fused(
    held: list, stem: str, adapters: dict[str, torch.Tensor], first: int, rows: int, rank: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """One module's A (k r, in) and B (rows, k r) for the k targets `held` in its rows."""
    a = torch.cat([adapters[f"{stem}.lora_{target}.A"] for target, _ in held])
    b = torch.zeros(rows, len(held) * rank)
    for column, (target, place) in enumerate(held):
        rows_of = slice(place.start - first, place.stop - first)
        b[rows_of, column * rank : (column + 1) * rank] = adapters[f"{stem}.lora_{target}.B"]
    return a.contiguous(), b.contiguous()


def _suffix(module: str, layer: int, config: ModelConfig) -> str:
    """The module's name after its layer's prefix (`self_attn.q_proj`, `attn.c_attn`): PEFT finds
    a module by the end of its name, the same in every layer."""
    return module.removeprefix(config.family.block_prefix.format(layer))

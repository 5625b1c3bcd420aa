"""Export to Hugging Face transformers: a model directory or checkpoint written as the directory of
its family's causal LM (a GPT2LMHeadModel, a LlamaForCausalLM, ...) that
`AutoModelForCausalLM.from_pretrained` and `AutoTokenizer.from_pretrained` load offline, computing
the same logits and encoding text to the same ids.

The configuration and the names of the weights are the family's (`zrodlo.model.families`). The
tokenizer is the `tokenizers` library's tokenizer each kind gives (`Tokenizer.library`): a
character tokenizer a word-level vocabulary over single characters, ids as Zrodlo's (a character
it never saw is UNK); a fitted byte-level BPE the BPE that encodes for Zrodlo, its ids Zrodlo's; an
imported one its own file with its own ids. EOS pads. Special tokens are never read out of text:
"<bos>" typed in a prompt is its characters, as in Zrodlo; except for a tokenizer with a chat
template, which is written beside it and whose renderings name special tokens in text, as
`apply_chat_template` reads them (Zrodlo refuses a chat message holding one). Like Zrodlo's
windows, a text fed to the model starts with BOS; the tokenizer adds none.
"""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import save_file

from zrodlo.data.tokenizer import Tokenizer
from zrodlo.data.tokenizer.chat_template import TEMPLATE_FILE
from zrodlo.exchange.peft_adapter import export_adapter
from zrodlo.model.adapters import merged
from zrodlo.model.config import ModelConfig
from zrodlo.model.families.base import Names
from zrodlo.model.parts import parameter_shapes
from zrodlo.storage.digest import write_json
from zrodlo.storage.outputs import new_directory
from zrodlo.training.checkpoint import read_model

WEIGHTS_FILE = "model.safetensors"


def transformers_weights(names: Names, weights: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Zrodlo's weights under transformers' names: transposed where it holds them so, and a fused
    projection split into its parts by rows."""
    renamed = {}
    for name, (parts, transposed) in names.items():
        tensor = weights[name].t() if transposed else weights[name]
        for (part, _), rows in zip(parts, tensor.split([n for _, n in parts]), strict=True):
            renamed[part] = rows.contiguous()
    return renamed


def unit_scales(
    config: ModelConfig, weights: dict[str, torch.Tensor]
) -> tuple[ModelConfig, dict[str, torch.Tensor]]:
    """What transformers is given of a model whose RMSNorms are unscaled (llama's `norm`): the
    same model with scaled norms, each scale 1, which computes the same, as x * 1 is x."""
    if config.parts.norm.kind != "rms_unscaled":
        return config, weights
    scaled = config.changed(norm=None)
    shapes = parameter_shapes(scaled)
    ones = {name: torch.ones(shape) for name, shape in shapes.items() if name not in weights}
    return scaled, {**weights, **ones}


def write_tokenizer(tokenizer: Tokenizer, directory: Path, positions: int) -> None:
    """tokenizer.json, the `tokenizers` library's tokenizer that encodes as Zrodlo does, and
    tokenizer_config.json naming its special tokens; the chat template, where the tokenizer has
    one, in chat_template.jinja as transformers writes it."""
    library = tokenizer.library
    library.save(str(directory / "tokenizer.json"))
    special = {"bos_token": tokenizer.bos, "eos_token": tokenizer.eos, "pad_token": tokenizer.eos}
    if tokenizer.unk is not None:
        special = {"unk_token": tokenizer.unk, **special}
    write_json(
        directory / "tokenizer_config.json",
        {
            "tokenizer_class": "PreTrainedTokenizerFast",
            **{role: library.id_to_token(token) for role, token in special.items()},
            "split_special_tokens": tokenizer.template is None,
            "model_max_length": positions,
            "clean_up_tokenization_spaces": False,
        },
    )
    if tokenizer.template is not None:
        (directory / TEMPLATE_FILE).write_text(tokenizer.template.text, encoding="utf-8")


def export(model: Path, output: Path, adapter: bool = False) -> Path:
    """Write the model directory or checkpoint `model` as a transformers directory `output`; a
    checkpoint of adapters as the model they make, merged into its base's weights, or with
    `adapter` as a PEFT adapter directory for its base's export (`zrodlo.exchange.peft_adapter`)."""
    if adapter:
        return export_adapter(model, output)
    loaded = read_model(model)
    config, tokenizer = loaded.config, loaded.tokenizer
    family = config.family
    own = loaded.weights
    if (adapters := loaded.adapters) is not None:
        own = merged(own, config, adapters.spec, adapters.tensors)
    config, own = unit_scales(config, own)
    # Refuses, before anything is written, what no transformers class computes.
    stated = family.transformers_config(config, tokenizer.bos, tokenizer.eos)
    weights = transformers_weights(family.transformers_names(config), own)
    with new_directory(output) as partial:
        write_json(partial / "config.json", stated)
        save_file(weights, partial / WEIGHTS_FILE, metadata={"format": "pt"})
        write_tokenizer(tokenizer, partial, config.positions)
    return output

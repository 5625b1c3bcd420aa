"""Export to Hugging Face transformers: a model directory or checkpoint written as a GPT-2 (or,
for a llama model, a Llama: `zrodlo.evaluation.llama_export`) directory that `AutoModelForCausalLM.from_pretrained` and `AutoTokenizer.from_pretrained` load
offline, computing the same logits and encoding text to the same ids.

Zrodlo's model is GPT-2's architecture with its own sizes: learned positions, pre-LayerNorm blocks,
exact (erf) GELU, LayerNorm epsilon 1e-5, and an LM head of its own (untied). GPT-2 keeps its
projections in Conv1D layers, whose weight is (in, out): the transpose of an nn.Linear's. A
character tokenizer becomes a `tokenizers` word-level vocabulary over single characters, ids as
Zrodlo's: UNK 0, BOS 1, EOS 2 (also padding), then the fitted characters; a character it never saw
is UNK. A byte-level BPE is written as the `tokenizers` BPE that encodes for Zrodlo, its ids
Zrodlo's (BOS 0, EOS 1 and padding, the bytes, the merges); an imported one as its own file
with its own ids. Special tokens are never read out of
text: "<bos>" typed in a prompt is its characters, as in Zrodlo. Like Zrodlo's windows, a text fed
to the model starts with BOS; the tokenizer adds none.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

from zrodlo.data.tokenizer import BOS, EOS, UNK, CharTokenizer, Tokenizer
from zrodlo.evaluation.llama_export import llama_config, llama_names
from zrodlo.model.config import ModelConfig, parameter_shapes
from zrodlo.model.gpt import NORM_EPS
from zrodlo.storage.digest import write_json
from zrodlo.storage.outputs import new_directory
from zrodlo.training.checkpoint import read_model

SPECIAL_TOKENS = {UNK: "<unk>", BOS: "<bos>", EOS: "<eos>"}
WEIGHTS_FILE = "model.safetensors"

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


def gpt2_config(config: ModelConfig, tokenizer: Tokenizer) -> dict:
    """The GPT-2 configuration that states `config` exactly, with the tokenizer's BOS and EOS."""
    return {
        "architectures": ["GPT2LMHeadModel"],
        "model_type": "gpt2",
        "vocab_size": config.vocab_size,
        "n_positions": config.positions,
        "n_embd": config.d_model,
        "n_layer": config.layers,
        "n_head": config.heads,
        "n_inner": config.d_ff,
        "activation_function": "gelu",  # torch's exact GELU, as the model computes it
        "layer_norm_epsilon": NORM_EPS,
        "embd_pdrop": config.dropout,
        "resid_pdrop": config.dropout,
        "attn_pdrop": config.attention_dropout,
        "scale_attn_weights": True,
        "scale_attn_by_inverse_layer_idx": False,
        "reorder_and_upcast_attn": False,
        "tie_word_embeddings": False,
        "bos_token_id": tokenizer.bos,
        "eos_token_id": tokenizer.eos,
        "pad_token_id": tokenizer.eos,
        "dtype": "float32",
    }


# Each Zrodlo parameter's transformers names with the rows each holds (the parts of a fused
# projection, in row order), and whether transformers holds it transposed.
Names = dict[str, tuple[list[tuple[str, int]], bool]]


def gpt2_names(config: ModelConfig) -> Names:
    """Each Zrodlo parameter's GPT-2 name; a Conv1D's weight GPT-2 holds transposed, (in, out)."""
    names = {}
    for name, shape in parameter_shapes(config).items():
        if name in _MODEL_NAMES:
            names[name] = ([(_MODEL_NAMES[name], shape[0])], False)
            continue
        _, layer, rest = name.split(".", 2)  # blocks.<i>.<rest>
        target, transposed = _BLOCK_NAMES[rest]
        rows = shape[-1] if transposed else shape[0]
        names[name] = ([(f"transformer.h.{layer}.{target}", rows)], transposed)
    return names


def transformers_weights(names: Names, weights: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Zrodlo's weights under transformers' names: transposed where it holds them so, and a fused
    projection split into its parts by rows."""
    renamed = {}
    for name, (parts, transposed) in names.items():
        tensor = weights[name].t() if transposed else weights[name]
        for (part, _), rows in zip(parts, tensor.split([n for _, n in parts]), strict=True):
            renamed[part] = rows.contiguous()
    return renamed


def write_tokenizer(tokenizer: Tokenizer, directory: Path, positions: int) -> None:
    """tokenizer.json, built with the `tokenizers` library, and tokenizer_config.json."""
    special = {"bos_token": tokenizer.bos, "eos_token": tokenizer.eos, "pad_token": tokenizer.eos}
    if isinstance(tokenizer, CharTokenizer):
        _character_tokenizer(tokenizer).save(str(directory / "tokenizer.json"))
        name = SPECIAL_TOKENS.__getitem__
        special = {"unk_token": UNK, **special}
    else:  # a BPE: the library's tokenizer that encodes for Zrodlo, its specials by their names
        tokenizer.library.save(str(directory / "tokenizer.json"))
        name = tokenizer.library.id_to_token
    write_json(
        directory / "tokenizer_config.json",
        {
            "tokenizer_class": "PreTrainedTokenizerFast",
            **{role: name(token) for role, token in special.items()},
            "split_special_tokens": True,
            "model_max_length": positions,
            "clean_up_tokenization_spaces": False,
        },
    )


def _character_tokenizer(tokenizer: CharTokenizer) -> Any:
    """The `tokenizers` word-level tokenizer of a character tokenizer's ids."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers

    vocabulary = {text: token for token, text in SPECIAL_TOKENS.items()}
    vocabulary.update({character: token for token, character in _characters(tokenizer)})
    built = Tokenizer(models.WordLevel(vocabulary, unk_token=SPECIAL_TOKENS[UNK]))
    # One piece per code point, line breaks included; a piece not in the vocabulary is UNK.
    built.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    built.decoder = decoders.Fuse()
    built.add_special_tokens(list(SPECIAL_TOKENS.values()))
    return built


def _characters(tokenizer: CharTokenizer) -> list[tuple[int, str]]:
    ids = tokenizer.encode("".join(tokenizer.characters)).tolist()
    return list(zip(ids, tokenizer.characters, strict=True))


def export(model: Path, output: Path) -> Path:
    """Write the model directory or checkpoint `model` as a transformers directory `output`: a
    GPT2LMHeadModel, or a LlamaForCausalLM for a llama model."""
    loaded = read_model(model)
    config = loaded.config
    if config.architecture == "llama":
        stated, weights = (
            llama_config(config, loaded.tokenizer),
            transformers_weights(llama_names(config), loaded.weights),
        )
    else:
        stated, weights = (
            gpt2_config(config, loaded.tokenizer),
            transformers_weights(gpt2_names(config), loaded.weights),
        )
    with new_directory(output) as partial:
        write_json(partial / "config.json", stated)
        save_file(weights, partial / WEIGHTS_FILE, metadata={"format": "pt"})
        write_tokenizer(loaded.tokenizer, partial, loaded.config.positions)
    return output

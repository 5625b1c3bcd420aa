"""Import from Hugging Face transformers (`zrodlo model import`): a GPT-2 or Llama causal LM
directory (config.json, model.safetensors, tokenizer.json) read into a Zrodlo model directory with
its digests, so that `model train` continues from it (fine-tuning).

config.json is read as transformers reads it, a field it leaves out taking transformers' default.
Only what Zrodlo computes exactly is taken; any other setting is refused naming its field (GPT-2's
tanh-approximated GELU, an RMSNorm epsilon other than 1e-5, scaled rotary positions, biases on a
Llama, ...). A GPT-2 whose head is tied to its token embedding gets a head of its own holding the
same numbers (Zrodlo's GPT has an untied head); the weights are read as float32, exactly. The
tokenizer goes through `zrodlo tokenizer import`, BOS and EOS named by the directory's
tokenizer_config.json.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file

from zrodlo.data.bpe_file import imported
from zrodlo.evaluation.export import gpt2_names
from zrodlo.evaluation.llama_export import llama_names
from zrodlo.model.config import ModelConfig
from zrodlo.model.directory import write_model
from zrodlo.model.gpt import NORM_EPS
from zrodlo.model.llama import RMS_EPS
from zrodlo.model.weights import check_weights
from zrodlo.storage import jsonfile
from zrodlo.storage.inputs import read_input
from zrodlo.storage.outputs import check_new_directory, new_directory
from zrodlo.storage.refusal import Refusal

WEIGHTS = "model.safetensors"

# Settings that must have the value Zrodlo computes with: each one's default in transformers
# (what the model computes when config.json leaves it out) and Zrodlo's value.
_GPT2_FIXED = {
    "activation_function": ("gelu_new", "gelu"),
    "layer_norm_epsilon": (1e-5, NORM_EPS),
    "scale_attn_weights": (True, True),
    "scale_attn_by_inverse_layer_idx": (False, False),
    "add_cross_attention": (False, False),
}
_LLAMA_FIXED = {
    "hidden_act": ("silu", "silu"),
    "rms_norm_eps": (1e-6, RMS_EPS),
    "rope_scaling": (None, None),
    "partial_rotary_factor": (1.0, 1.0),
    "attention_bias": (False, False),
    "mlp_bias": (False, False),
    "pretraining_tp": (1, 1),
}
# How config.json names each field of Zrodlo's configuration, for the refusals.
_GPT2_NAMES = {
    "positions": "n_positions", "d_model": "n_embd", "layers": "n_layer", "heads": "n_head",
    "d_ff": "n_inner", "dropout": "resid_pdrop", "attention_dropout": "attn_pdrop",
}  # fmt: skip
_LLAMA_NAMES = {
    "positions": "max_position_embeddings", "d_model": "hidden_size",
    "layers": "num_hidden_layers", "heads": "num_attention_heads", "d_ff": "intermediate_size",
    "kv_heads": "num_key_value_heads", "tie_embeddings": "tie_word_embeddings",
}  # fmt: skip


def _fixed(stated: dict, fixed: dict, file: Path) -> None:
    for field, (default, value) in fixed.items():
        if field not in stated and default != value:
            raise Refusal(
                f"{file} does not set {field}, which transformers then takes as {default!r}; "
                f"Zrodlo computes with {value!r} only, so the model cannot be imported exactly"
            )
        if field in stated and stated[field] != value:
            raise Refusal(
                f"{file} sets {field} to {stated[field]!r}; Zrodlo computes with {value!r} only, "
                "so the model cannot be imported exactly"
            )


def _gpt2_config(stated: dict, vocab_size: int, file: Path) -> ModelConfig:
    _fixed(stated, _GPT2_FIXED, file)
    tied(stated, file)  # read again for the weights; refused here, naming config.json
    embedding, residual = stated.get("embd_pdrop", 0.1), stated.get("resid_pdrop", 0.1)
    if embedding != residual:
        raise Refusal(
            f"{file} sets embd_pdrop {embedding} and resid_pdrop {residual} (0.1 where it sets "
            "none); Zrodlo's GPT drops both at one rate"
        )
    d_model = stated["n_embd"]
    return ModelConfig(
        vocab_size=vocab_size, positions=stated["n_positions"], d_model=d_model,
        layers=stated["n_layer"], heads=stated["n_head"], d_ff=stated.get("n_inner") or 4 * d_model,
        dropout=stated.get("resid_pdrop", 0.1), attention_dropout=stated.get("attn_pdrop", 0.1),
    )  # fmt: skip


def _rope_theta(stated: dict, file: Path) -> float:
    """The rotary base: transformers 5 states it in rope_parameters, earlier versions as
    rope_theta (transformers reads the second where the first has none); either way unscaled
    and over the whole head."""
    theta = stated.get("rope_theta", 10000.0)
    parameters = stated.get("rope_parameters")
    if parameters is not None:
        kind = (
            parameters.get("rope_type", parameters.get("type"))
            if isinstance(parameters, dict)
            else None
        )
        if kind != "default" or set(parameters) - {"rope_type", "type", "rope_theta"}:
            raise Refusal(
                f"{file} sets rope_parameters to {parameters!r}; Zrodlo computes unscaled rotary "
                "positions over the whole head only, so the model cannot be imported exactly"
            )
        theta = parameters.get("rope_theta", theta)
    numeric = isinstance(theta, int | float) and not isinstance(theta, bool)
    return float(theta) if numeric else theta  # anything else is refused with the configuration


def _llama_config(stated: dict, vocab_size: int, file: Path) -> ModelConfig:
    _fixed(stated, _LLAMA_FIXED, file)
    heads, d_model = stated["num_attention_heads"], stated["hidden_size"]
    head_dim = stated.get("head_dim")  # transformers' default: hidden_size over the heads
    if head_dim is not None and not (
        _is_whole(head_dim) and _is_whole(heads) and head_dim * heads == d_model
    ):
        raise Refusal(
            f"{file} sets head_dim {head_dim} with num_attention_heads {heads}; Zrodlo's heads "
            f"share hidden_size {d_model} equally"
        )
    return ModelConfig(
        vocab_size=vocab_size, positions=stated["max_position_embeddings"], d_model=d_model,
        layers=stated["num_hidden_layers"], heads=heads, d_ff=stated["intermediate_size"],
        dropout=0.0, attention_dropout=stated.get("attention_dropout", 0.0),
        architecture="llama", kv_heads=stated.get("num_key_value_heads", heads),
        rope_theta=_rope_theta(stated, file),
        tie_embeddings=tied(stated, file),
    )  # fmt: skip


def tied(stated: dict, file: Path) -> bool:
    """Whether transformers ties the model's head to its token embedding: tie_word_embeddings,
    true by default for GPT-2 and false for Llama."""
    tie = stated.get("tie_word_embeddings", stated.get("model_type") == "gpt2")
    if not isinstance(tie, bool):
        raise Refusal(f"{file} sets tie_word_embeddings to {tie!r}; it is true or false")
    return tie


def _is_whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def read_config(source: Path) -> tuple[ModelConfig, dict]:
    """The Zrodlo configuration of a transformers directory's config.json, and the file parsed."""
    file = source / "config.json"
    if not file.is_file():
        raise Refusal(f"{source} holds no config.json; --from takes a transformers model directory")
    try:
        stated = jsonfile.loads(read_input(file))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise Refusal(f"{file} does not load as a transformers configuration: {error}") from None
    kind = stated.get("model_type") if isinstance(stated, dict) else None
    reader = {"gpt2": _gpt2_config, "llama": _llama_config}.get(kind)
    if reader is None:
        raise Refusal(
            f"{file} states model_type {kind!r}; Zrodlo imports gpt2 and llama causal LMs only"
        )
    try:
        config = reader(stated, stated["vocab_size"], file)
    except KeyError as error:
        raise Refusal(
            f"{file} does not state {error.args[0]}, which a {kind} model needs"
        ) from None
    names = _GPT2_NAMES if kind == "gpt2" else _LLAMA_NAMES
    try:
        config.validate(lambda field: names.get(field, field))
    except Refusal as refusal:
        raise Refusal(f"{file} states a model Zrodlo cannot build: {refusal.sentence}") from None
    return config, stated


def zrodlo_weights(
    config: ModelConfig, stated: dict, theirs: dict[str, torch.Tensor], file: Path
) -> dict[str, torch.Tensor]:
    """transformers' tensors under Zrodlo's names, as float32; refused naming a missing one."""
    names = gpt2_names(config) if config.architecture == "gpt" else llama_names(config)
    theirs = dict(theirs)
    if config.architecture == "gpt" and tied(stated, file):
        # transformers ties GPT-2's head to the token embedding unless told not to, whatever
        # the file holds under lm_head.weight; Zrodlo's GPT gets a head holding the same numbers.
        theirs["lm_head.weight"] = theirs.get("transformer.wte.weight")
    ours: dict[str, torch.Tensor] = {}
    for name, (parts, transposed) in names.items():
        missing = [part for part, _ in parts if theirs.get(part) is None]
        if missing:
            raise Refusal(
                f"{file} has no tensor {missing[0]}, which a {stated['model_type']} needs"
            )
        tensors = [theirs[part].to(torch.float32) for part, _ in parts]
        joined = torch.cat([t.t() if transposed else t for t in tensors])
        ours[name] = joined.contiguous().clone()
    check_weights(config, ours, str(file))
    return ours


def import_model(source: Path, output: Path) -> ModelConfig:
    """Write the transformers directory `source` as the new Zrodlo model directory `output`."""
    check_new_directory(output)
    config, stated = read_config(source)
    file = source / WEIGHTS
    if not file.is_file():
        sharded = (source / f"{WEIGHTS}.index.json").is_file()
        reason = "its weights are sharded; save it as one file" if sharded else "a model needs it"
        raise Refusal(f"{source} holds no {WEIGHTS}; {reason}")
    try:
        theirs = load_file(file)
    except (SafetensorError, OSError) as error:
        raise Refusal(f"{file} does not load as safetensors: {error}") from None
    weights = zrodlo_weights(config, stated, theirs, file)
    tokenizer = imported(source / "tokenizer.json")
    if tokenizer.vocab_size > config.vocab_size:
        raise Refusal(
            f"{source / 'tokenizer.json'} has {tokenizer.vocab_size} tokens, more than the "
            f"vocab_size {config.vocab_size} of {source / 'config.json'}"
        )
    with new_directory(output) as partial:
        write_model(partial, config, tokenizer, weights)
    return config

"""Import from Hugging Face transformers (`zrodlo model import`): a causal LM directory of a family
Zrodlo has (config.json, model.safetensors or its shards, tokenizer.json), as the hub ships it,
read into a Zrodlo model directory with its digests, so that `model train` continues from it
(fine-tuning). Every file read is the directory's own (`source_files`).

config.json is read by the family its model_type names (`zrodlo.model.families`), as transformers
reads it, a field it leaves out taking transformers' default; only what Zrodlo computes exactly
is taken, and any other setting is refused naming its field. The weights are read as float32,
exactly, once their files' headers agree with config.json (`transformers_weights`). The tokenizer
goes through `zrodlo tokenizer import`, BOS and EOS named by the directory's tokenizer_config.json.
"""

from __future__ import annotations

import json
from pathlib import Path

from zrodlo.data.tokenizer.chat_template import TEMPLATE_FILE
from zrodlo.data.tokenizer.imported import imported
from zrodlo.exchange.source_files import held_weights, own_file
from zrodlo.exchange.transformers_weights import read_weights
from zrodlo.model.config import ModelConfig
from zrodlo.model.directory import write_model
from zrodlo.model.families import FAMILIES, by_model_type, listed
from zrodlo.storage import jsonfile
from zrodlo.storage.inputs import read_input
from zrodlo.storage.outputs import check_new_directory, new_directory
from zrodlo.storage.refusal import Refusal


def read_config(source: Path) -> tuple[ModelConfig, dict]:
    """The Zrodlo configuration of a transformers directory's config.json, and the file parsed."""
    file = own_file(source, "config.json")
    if not file.is_file():
        raise Refusal(f"{source} holds no config.json; --from takes a transformers model directory")
    try:
        stated = jsonfile.loads(read_input(file))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise Refusal(f"{file} does not load as a transformers configuration: {error}") from None
    kind = stated.get("model_type") if isinstance(stated, dict) else None
    family = by_model_type(kind)
    if family is None:
        types = listed([family.model_type for family in FAMILIES.values()], "and")
        raise Refusal(f"{file} states model_type {kind!r}; Zrodlo imports {types} causal LMs only")
    try:
        values = family.from_transformers(stated, file)
    except KeyError as error:
        raise Refusal(
            f"{file} does not state {error.args[0]}, which a {kind} model needs"
        ) from None
    names = family.transformers_fields
    try:
        config = ModelConfig.of(lambda field: names.get(field, field), **values)
        config.validate(lambda field: names.get(field, field))
    except Refusal as refusal:
        raise Refusal(f"{file} states a model Zrodlo cannot build: {refusal.sentence}") from None
    return config, stated


def import_model(source: Path, output: Path) -> ModelConfig:
    """Write the transformers directory `source` as the new Zrodlo model directory `output`."""
    check_new_directory(output)
    config, stated = read_config(source)
    weights = read_weights(config, stated, held_weights(source), source / "config.json")
    own_file(source, "tokenizer_config.json")  # read beside tokenizer.json, for BOS and EOS
    own_file(source, TEMPLATE_FILE)  # and the chat template, where the directory has one
    tokenizer = imported(own_file(source, "tokenizer.json"))
    if tokenizer.vocab_size > config.vocab_size:
        raise Refusal(
            f"{source / 'tokenizer.json'} has {tokenizer.vocab_size} tokens, more than the "
            f"vocab_size {config.vocab_size} of {source / 'config.json'}"
        )
    with new_directory(output) as partial:
        write_model(partial, config, tokenizer, weights)
    return config

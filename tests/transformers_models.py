"""Small transformers models saved as a user's directory, for the tests of `model import`: random
weights from transformers' own initialisation (seeded), beside a tokenizer of the family's layout."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from library_tokenizers import gpt2_file, llama3_file
from safetensors.torch import load_file


def saved(root: Path, kind: str, shard_size: str | None = None, **settings: object) -> Path:
    """A transformers model of `kind` ("gpt2" or "llama": two layers, 32 wide) saved with a
    tokenizer in root/hf-<kind>, its weights in shards of `shard_size` (one file where None);
    `settings` change its configuration."""
    import transformers

    torch.manual_seed(0)  # transformers' own initialisation: the fixture's weights only
    directory = root / f"hf-{kind}"
    directory.mkdir()
    shape = {"vocab_size": 360, "tie_word_embeddings": kind == "gpt2", **settings}
    if kind == "gpt2":
        gpt2_file(directory / "tokenizer.json")
        config = transformers.GPT2Config(
            n_positions=32, n_embd=32, n_layer=2, n_head=4, activation_function="gelu", **shape
        )
        model = transformers.GPT2LMHeadModel(config)
    else:
        llama3_file(directory / "tokenizer.json")
        config = transformers.LlamaConfig(
            max_position_embeddings=32, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, rms_norm_eps=1e-5, **shape,
        )  # fmt: skip
        model = transformers.LlamaForCausalLM(config)
    if shard_size is None:
        model.save_pretrained(directory)
    else:
        model.save_pretrained(directory, max_shard_size=shard_size)
    return directory


def loaded(path: Path) -> dict[str, torch.Tensor]:
    """The tensors of a safetensors file, copied: `load_file` gives views of the file mapped, which
    change when it is written over."""
    return {name: tensor.clone() for name, tensor in load_file(path).items()}


# A template of Llama 3's layout, written here (its end of turn the tokenizer's <|end_of_text|>).
HEADERS = (
    "{{ bos_token }}{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + "
    "'<|end_header_id|>\\n\\n' + message['content'] | trim + '<|end_of_text|>' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}"
    "{% endif %}"
)


def save_tiny_llama(directory: Path, chat: bool = False, positions: int = 32) -> None:
    """A transformers Llama of two layers, 32 wide, and a Llama 3 style tokenizer, as a user
    saves one (`save_pretrained`, tokenizer.json beside); with `chat`, a tokenizer_config.json
    naming BOS and EOS and holding the chat template HEADERS."""
    import transformers

    directory.mkdir(parents=True)
    llama3_file(directory / "tokenizer.json")
    torch.manual_seed(0)  # transformers' own initialisation: the fixture's weights only
    config = transformers.LlamaConfig(
        vocab_size=360, max_position_embeddings=positions, hidden_size=32, intermediate_size=48,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, rms_norm_eps=1e-5,
        rope_theta=500.0, tie_word_embeddings=False,
    )  # fmt: skip
    transformers.LlamaForCausalLM(config).save_pretrained(directory)
    if chat:
        config = {"bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>",
                  "chat_template": HEADERS}  # fmt: skip
        (directory / "tokenizer_config.json").write_text(json.dumps(config))

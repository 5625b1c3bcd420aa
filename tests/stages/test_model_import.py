"""`zrodlo model import` by the real command: transformers' own GPT-2 (its head tied) and Llama
(grouped-query attention) directories, saved by transformers with a GPT-2-family tokenizer, read
into model directories that compute transformers' logits, train on, and export back to the same
logits; a configuration Zrodlo cannot compute exactly refused naming the field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from conftest import TRAINING_DOCUMENTS
from library_tokenizers import gpt2_file, llama3_file

from zrodlo.model.network import build_decoder
from zrodlo.training.checkpoint import read_model

# In `make test`, not `make check`: transformers models, a training run.
pytestmark = pytest.mark.slow

transformers = pytest.importorskip("transformers")

IDS = torch.tensor([[0, 5, 17, 80, 200, 33, 2, 9, 150, 64]])  # (1, 10)


def saved(root: Path, kind: str) -> Path:
    """A fresh transformers model of `kind` saved with its tokenizer, as a user's directory."""
    torch.manual_seed(0)  # transformers' own initialisation: the fixture's weights only
    directory = root / f"hf-{kind}"
    directory.mkdir()
    if kind == "gpt2":
        gpt2_file(directory / "tokenizer.json")
        config = transformers.GPT2Config(
            vocab_size=360, n_positions=32, n_embd=32, n_layer=2, n_head=4,
            activation_function="gelu", tie_word_embeddings=True,
        )  # fmt: skip
        model = transformers.GPT2LMHeadModel(config)
    else:
        llama3_file(directory / "tokenizer.json")
        config = transformers.LlamaConfig(
            vocab_size=360, max_position_embeddings=32, hidden_size=32, intermediate_size=48,
            num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, rms_norm_eps=1e-5,
            rope_theta=500.0, tie_word_embeddings=False,
        )  # fmt: skip
        model = transformers.LlamaForCausalLM(config)
    model.save_pretrained(directory)
    return directory


def logits_of(directory: Path) -> torch.Tensor:
    model = transformers.AutoModelForCausalLM.from_pretrained(directory, local_files_only=True)
    with torch.no_grad():
        return model.eval()(IDS).logits  # (1, 10, vocab)


@pytest.mark.parametrize("kind", ["gpt2", "llama"])
def test_an_imported_model_computes_trains_and_exports_as_transformers(
    kind, tmp_path, run_zrodlo, write_documents, train_args
):
    source = saved(tmp_path, kind)
    returncode, stdout, stderr = run_zrodlo(
        "model", "import", "--from", source, "--output", "model", cwd=tmp_path
    )
    assert (returncode, stderr) == (0, ""), stderr
    architecture = "gpt" if kind == "gpt2" else "llama"
    assert stdout.startswith(f"wrote model: a {architecture} model of ")
    expected = logits_of(source)
    loaded = read_model(tmp_path / "model")
    with torch.no_grad():
        ours = build_decoder(loaded.config, loaded.weights).eval()(IDS)
    torch.testing.assert_close(ours, expected, rtol=0, atol=1e-5)
    returncode, _, stderr = run_zrodlo(
        "model", "export", "--model", "model", "--output", "exported", cwd=tmp_path
    )
    assert (returncode, stderr) == (0, ""), stderr
    torch.testing.assert_close(logits_of(tmp_path / "exported"), expected, rtol=0, atol=1e-5)
    # Fine-tuning: a corpus prepared with the imported tokenizer, trained on from the import.
    write_documents(tmp_path / "train.jsonl", {k: v * 3 for k, v in TRAINING_DOCUMENTS.items()})
    commands = [
        ("corpus", "prepare", "--documents", "train.jsonl", "--tokenizer", "model", "--output",
         "corpus"),
        tuple(train_args(tmp_path / "model", tmp_path / "corpus", tmp_path / "run", 2,
                         {"--context": 9})),
    ]  # fmt: skip
    for args in commands:
        returncode, _, stderr = run_zrodlo(*args, cwd=tmp_path)
        assert (returncode, stderr) == (0, ""), (args, stderr)


def test_a_setting_zrodlo_cannot_compute_is_refused_naming_it(tmp_path, assert_refused):
    source = saved(tmp_path, "gpt2")
    config = json.loads((source / "config.json").read_text())
    (source / "config.json").write_text(json.dumps({**config, "activation_function": "gelu_new"}))
    assert_refused(
        "model", "import", "--from", source, "--output", tmp_path / "model",
        sentence=f"{source / 'config.json'} sets activation_function to 'gelu_new'; Zrodlo "
        "computes with 'gelu' only, so the model cannot be imported exactly",
    )  # fmt: skip
    (source / "config.json").write_text(json.dumps({**config, "model_type": "bert"}))
    assert_refused(
        "model", "import", "--from", source, "--output", tmp_path / "model",
        sentence=f"{source / 'config.json'} states model_type 'bert'; Zrodlo imports gpt2 and "
        "llama causal LMs only",
    )  # fmt: skip

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

from zrodlo.model.decoder import build_decoder
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
    elif kind == "gemma3":
        llama3_file(directory / "tokenizer.json")
        config = transformers.Gemma3TextConfig(
            vocab_size=360, max_position_embeddings=32, hidden_size=32, intermediate_size=48,
            num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
            sliding_window=4, layer_types=["sliding_attention", "full_attention"],
        )  # fmt: skip
        model = transformers.Gemma3ForCausalLM(config)
    elif kind in ("qwen2", "qwen3", "smollm3"):
        llama3_file(directory / "tokenizer.json")
        shape = {"vocab_size": 360, "max_position_embeddings": 32, "hidden_size": 32,
                 "intermediate_size": 48, "num_hidden_layers": 2, "num_attention_heads": 4,
                 "num_key_value_heads": 2}  # fmt: skip
        model_class = {"qwen2": transformers.Qwen2ForCausalLM,
                       "qwen3": transformers.Qwen3ForCausalLM,
                       "smollm3": transformers.SmolLM3ForCausalLM}[kind]  # fmt: skip
        special = {"pad_token_id": None} if kind == "smollm3" else {}
        model = model_class(model_class.config_class(**shape, **special))
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


def edited(source: Path, drop: tuple[str, ...] = (), **values: object) -> Path:
    """config.json of `source` with the fields `drop` left out and `values` set."""
    config = json.loads((source / "config.json").read_text())
    for field in drop:
        config.pop(field, None)
    (source / "config.json").write_text(json.dumps({**config, **values}))
    return source / "config.json"


def test_a_setting_zrodlo_cannot_compute_is_refused_naming_it(tmp_path, assert_refused):
    source = saved(tmp_path, "gpt2")
    edited(source, activation_function="gelu_fast")
    assert_refused(
        "model", "import", "--from", source, "--output", tmp_path / "model",
        sentence=f"{source / 'config.json'} sets activation_function to 'gelu_fast'; Zrodlo "
        "computes GPT-2 with 'gelu', 'gelu_new' or 'relu2' only, so the model cannot be imported "
        "exactly",
    )  # fmt: skip
    edited(source, activation_function="gelu", model_type="bert")
    assert_refused(
        "model", "import", "--from", source, "--output", tmp_path / "model",
        sentence=f"{source / 'config.json'} states model_type 'bert'; Zrodlo imports gpt2, llama, "
        "qwen2, qwen3, smollm3 and gemma3_text causal LMs only",
    )  # fmt: skip


EXACT = "so the model cannot be imported exactly"
ROTARY = (
    "Zrodlo computes rotary positions over the whole head, unscaled or scaled as Llama 3's "
    "(rope_type llama3)"
)


@pytest.mark.parametrize(
    ("kind", "drop", "values", "refusal"),
    [
        # A field config.json leaves out is transformers' default, which Zrodlo must compute too.
        ("llama", ("hidden_act",), {"mlp_bias": True}, "sets mlp_bias to True; Zrodlo computes "
         f"with False only, {EXACT}"),
        ("llama", (), {"rms_norm_eps": 0}, "states a model Zrodlo cannot build: rms_norm_eps is "
         "0; it must lie above 0 and below 1"),
        # Rotary settings as transformers reads them: the legacy "type", a partial rotation.
        ("llama", (), {"rope_parameters": {"type": "linear", "factor": 2.0, "rope_theta": 1e4}},
         "sets rope_parameters to {'type': 'linear', 'factor': 2.0, 'rope_theta': 10000.0}; "
         f"{ROTARY}, {EXACT}"),
        ("llama", (), {"rope_parameters": {"rope_type": "default", "rope_theta": 1e4,
                                           "partial_rotary_factor": 0.5}},
         "sets rope_parameters to {'rope_type': 'default', 'rope_theta': 10000.0, "
         f"'partial_rotary_factor': 0.5}}; {ROTARY}, {EXACT}"),
        ("llama", (), {"rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor":
                                        4.0, "high_freq_factor": 1.0}},
         "states a model Zrodlo cannot build: low_freq_factor 4.0 is not below high_freq_factor "
         "1.0; the frequencies between are blended"),
        ("llama", (), {"head_dim": None, "hidden_size": 30},
         "states a model Zrodlo cannot build: num_attention_heads 4 does not divide hidden_size "
         "30; each head takes an equal share of the model width"),
        ("llama", (), {"head_dim": 7},
         "states a model Zrodlo cannot build: head_dim is 7; rotary positions turn pairs, so a "
         "head's width is an even whole number of two or more"),
        ("llama", ("head_dim",), {"num_attention_heads": 0},
         "states a model Zrodlo cannot build: num_attention_heads is 0; it must be a whole "
         "number of one or more"),
        ("llama", (), {"num_key_value_heads": 3},
         "states a model Zrodlo cannot build: num_key_value_heads 3 does not divide "
         "num_attention_heads 4; each key and value head serves an equal share of the query "
         "heads"),
        ("llama", (), {"tie_word_embeddings": "yes"},
         "sets tie_word_embeddings to 'yes'; it is true or false"),
        ("gpt2", (), {"model_type": ["gpt2"]},
         "states model_type ['gpt2']; Zrodlo imports gpt2, llama, qwen2, qwen3, smollm3 and "
         "gemma3_text causal LMs only"),
        # A width that is no number is refused as one, not multiplied into GPT-2's inner width.
        ("gpt2", (), {"n_embd": {"width": 32}},
         "states a model Zrodlo cannot build: n_embd is {'width': 32}; it must be a whole number "
         "of one or more"),
        # Qwen2's sliding window, which its released models leave off.
        ("qwen2", (), {"use_sliding_window": True}, "sets use_sliding_window to True; Zrodlo "
         f"computes with False only, {EXACT}"),
        ("qwen2", (), {"layer_types": ["full_attention", "sliding_attention"]},
         "sets layer_types to ['full_attention', 'sliding_attention']; Zrodlo attends over the "
         f"whole window in every layer (full_attention) only, {EXACT}"),
        # transformers' Qwen2 takes 32 key and value heads where config.json states none.
        ("qwen2", ("num_key_value_heads",), {},
         "states a model Zrodlo cannot build: num_key_value_heads 32 does not divide "
         "num_attention_heads 4; each key and value head serves an equal share of the query "
         "heads"),
        ("qwen3", (), {"attention_bias": True}, "sets attention_bias to True; Zrodlo computes "
         f"with False only, {EXACT}"),
        ("qwen3", (), {"layer_types": ["sliding_attention", "full_attention"]},
         "sets layer_types to ['sliding_attention', 'full_attention']; Zrodlo attends over the "
         f"whole window in every layer (full_attention) only, {EXACT}"),
        ("smollm3", (), {"no_rope_layers": [0, 1]},
         "sets no_rope_layers to [0, 1]; Zrodlo leaves rotary positions out of every n-th of the "
         f"2 layers only ([1, 1, 1, 0, ...]: every 4th), {EXACT}"),
        ("smollm3", (), {"use_sliding_window": True}, "sets use_sliding_window to True; Zrodlo "
         f"computes with False only, {EXACT}"),
        # Gemma 3's settings that Zrodlo does not compute.
        ("gemma3", (), {"use_bidirectional_attention": True}, "sets use_bidirectional_attention "
         f"to True; Zrodlo computes with False only, {EXACT}"),
        ("gemma3", (), {"attn_logit_softcapping": 50.0}, "sets attn_logit_softcapping to 50.0; "
         f"Zrodlo computes with None only, {EXACT}"),
        ("gemma3", (), {"rope_scaling": {"rope_type": "linear", "factor": 8.0}},
         "sets rope_scaling to {'rope_type': 'linear', 'factor': 8.0}; Zrodlo computes a gemma3 "
         f"model's rotary positions unscaled only, {EXACT}"),
        ("gemma3", (), {"rope_parameters": {"full_attention": {"rope_type": "linear", "factor":
                                                                8.0, "rope_theta": 1e6}}},
         "sets rope_parameters to {'full_attention': {'rope_type': 'linear', 'factor': 8.0, "
         "'rope_theta': 1000000.0}}; Zrodlo computes a gemma3 model's rotary positions unscaled "
         "(rope_type default), a base for full_attention and one for sliding_attention, "
         f"{EXACT}"),
        ("gemma3", (), {"layer_types": ["full_attention", "sliding_attention"]},
         "sets layer_types to ['full_attention', 'sliding_attention']; Zrodlo makes every n-th "
         "of the 2 layers full_attention and the others sliding_attention only, "
         f"{EXACT}"),
        ("gemma3", (), {"hidden_activation": "gelu"}, "sets hidden_activation to 'gelu'; Zrodlo "
         f"computes with 'gelu_pytorch_tanh' only, {EXACT}"),
        ("gemma3", (), {"sliding_window": 0}, "states a model Zrodlo cannot build: "
         "sliding_window is 0; it must be a whole number of one or more"),
        ("gpt2", (), {"embd_pdrop": 0.0},
         "sets embd_pdrop 0.0 and resid_pdrop 0.1 (0.1 where it sets none); Zrodlo's GPT drops "
         "both at one rate"),
    ],
)  # fmt: skip
def test_config_json_is_read_as_transformers_reads_it(
    tmp_path, assert_refused_in_process, kind, drop, values, refusal
):
    """Every field is read with transformers' own default where config.json leaves it out, and a
    refusal names config.json's fields, not model init's flags."""
    source = saved(tmp_path, kind)
    file = edited(source, drop, **values)
    assert_refused_in_process(
        "model", "import", "--from", source, "--output", tmp_path / "model",
        sentence=f"{file} {refusal}",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("kind", "drop", "theirs"),
    [
        # Qwen3's heads are 128 wide where config.json states no head_dim.
        ("qwen3", ("head_dim",), {"head_dim": 128}),
        # SmolLM3's rotary base is 2,000,000 and its key and value heads 4 where unstated.
        ("smollm3", ("rope_parameters", "num_key_value_heads"), {"num_key_value_heads": 4}),
    ],
)
def test_a_field_left_out_takes_the_familys_own_default(tmp_path, run_zrodlo, kind, drop, theirs):
    source = saved(tmp_path, kind)
    edited(source, drop)
    stated = transformers.AutoConfig.from_pretrained(source, local_files_only=True)
    assert {field: getattr(stated, field) for field in theirs} == theirs
    if kind == "smollm3":
        assert stated.rope_parameters["rope_theta"] == 2_000_000.0
    # The weights of transformers' model of the edited config.json, saved as the user's.
    torch.manual_seed(0)
    transformers.AutoModelForCausalLM.from_config(stated).save_pretrained(source)
    edited(source, drop)  # saved again with every field: left out once more
    returncode, _, stderr = run_zrodlo(
        "model", "import", "--from", source, "--output", "model", cwd=tmp_path
    )
    assert (returncode, stderr) == (0, ""), stderr
    loaded = read_model(tmp_path / "model")
    with torch.no_grad():
        ours = build_decoder(loaded.config, loaded.weights).eval()(IDS)
    torch.testing.assert_close(ours, logits_of(source), rtol=0, atol=1e-5)


def test_a_gpt2_head_is_what_tie_word_embeddings_says(tmp_path, run_zrodlo, assert_refused):
    """Tied (GPT-2's default), the head is the token embedding: a file that holds it again under
    lm_head.weight imports, and one whose lm_head.weight differs is refused, as transformers would
    drop it without a word; untied, the file's own head, and it stays so in fine-tuning."""
    from safetensors.torch import load_file, save_file

    source = saved(tmp_path, "gpt2")
    # Copied: load_file's tensors view the file mapped, which save_file writes over.
    weights = {name: t.clone() for name, t in load_file(source / "model.safetensors").items()}
    embedding = weights["transformer.wte.weight"]
    head = torch.randn_like(embedding)
    for stored, tie in ((embedding.clone(), True), (head, False)):
        save_file({**weights, "lm_head.weight": stored}, source / "model.safetensors")
        edited(source, tie_word_embeddings=tie)
        output = tmp_path / f"model-{tie}"
        returncode, _, stderr = run_zrodlo(
            "model", "import", "--from", source, "--output", output, cwd=tmp_path
        )
        assert (returncode, stderr) == (0, ""), stderr
        imported = read_model(output)
        assert imported.config.settings.tie_embeddings is tie
        assert ("lm_head.weight" in imported.weights) is not tie
        if not tie:
            assert torch.equal(imported.weights["lm_head.weight"], head)
    edited(source, tie_word_embeddings=True)  # the file holds `head`, unlike the embedding
    assert_refused(
        "model", "import", "--from", source, "--output", tmp_path / "refused",
        sentence=f"{source / 'model.safetensors'} holds lm_head.weight, which differs from the "
        f"token embedding that {source / 'config.json'} ties the head to (tie_word_embeddings); "
        "transformers reads the embedding in its place, so the model cannot be imported exactly",
    )  # fmt: skip

"""Today's recipe as model settings through the real commands: a llama with a ReLU-squared
feed-forward, unscaled RMSNorms, zero output projections, a small head, capped logits, the x0
mix and value embeddings, and Qwen3's QK-norm unscaled; each drawn and computed as it says, trained with Muon, and exported where
a transformers class computes it (with transformers' loss equal to Zrodlo's), refused naming the
setting where none does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from conftest import TINY_MODEL, zrodlo_succeeds
from safetensors.torch import load_file

from oracles import transformers_loss
from zrodlo.model.decoder import build_decoder, build_model
from zrodlo.model.directory import read_model_directory

# In `make test`, not `make check`: training runs and transformers.
pytestmark = pytest.mark.slow

transformers = pytest.importorskip("transformers")

RECIPE = (
    "--mlp",
    "relu2",
    "--norm",
    "unscaled",
    "--projection-init",
    "zero",
    "--head-std",
    "0.001",
)
LLAMA = ("--architecture", "llama")
MUON = {"--optimizer": "muon", "--learning-rate": 0.02, "--checkpoint-every": 2}
# The model whose export transformers computes (the other settings shape only its draw), and
# GPT-2's decoder with ReLU squared.
EXPORTED = {
    "qwen3 unscaled": ("--architecture", "qwen3", "--kv-heads", "1", "--norm", "unscaled",
                       "--projection-init", "zero", "--head-std", "0.001"),
    "gpt relu2": ("--activation", "relu2"),
}  # fmt: skip


def initialised(root: Path, training_data, *flags: str) -> Path:
    root.mkdir()
    zrodlo_succeeds(
        "model", "init", "--tokenizer", training_data.tokenizer, "--output", "model",
        *TINY_MODEL, "--dropout", "0", "--seed", "7", *flags, cwd=root,
    )  # fmt: skip
    return root / "model"


def test_the_recipe_model_is_drawn_as_its_settings_say_and_trains_with_muon(
    training_data, train_args, tmp_path
):
    model = initialised(tmp_path / "recipe", training_data, "--architecture", "llama", *RECIPE)
    config = json.loads((model / "config.json").read_text())
    assert {key: config[key] for key in ("mlp", "norm", "projection_init", "head_std")} == {
        "mlp": "relu2", "norm": "unscaled", "projection_init": "zero", "head_std": 0.001,
    }  # fmt: skip
    weights = load_file(model / "model.safetensors")
    assert not [name for name in weights if "norm" in name]  # no scale to learn
    assert {name.split(".", 2)[2] for name in weights if name.startswith("blocks.0.")} == {
        "attention.qkv.weight", "attention.out.weight", "mlp.up.weight", "mlp.down.weight",
    }  # fmt: skip
    assert not weights["blocks.0.attention.out.weight"].any()
    assert not weights["blocks.0.mlp.down.weight"].any()
    assert weights["lm_head.weight"].std().item() == pytest.approx(0.001, rel=0.1)
    output = tmp_path / "run"
    zrodlo_succeeds(*train_args(model, training_data.corpus, output, 4, MUON), cwd=tmp_path)
    trained = load_file(output / "step-4" / "model.safetensors")
    assert trained["blocks.0.mlp.down.weight"].any()  # Muon moves a matrix that starts at zero


@pytest.mark.parametrize("case", list(EXPORTED))
def test_transformers_computes_the_exported_recipe_as_zrodlo(
    case, training_data, train_args, tmp_path
):
    model = initialised(tmp_path / "model-root", training_data, *EXPORTED[case])
    output = tmp_path / "run"
    zrodlo_succeeds(*train_args(model, training_data.corpus, output, 2, MUON), cwd=tmp_path)
    zrodlo_succeeds(
        "model", "export", "--model", output / "step-2", "--output", tmp_path / "exported",
        cwd=tmp_path,
    )  # fmt: skip
    scores = tmp_path / "scores.json"
    zrodlo_succeeds(
        "model", "evaluate", "--model", output / "step-2", "--corpus", training_data.held_out,
        "--context", 9, "--output", scores, cwd=tmp_path,
    )  # fmt: skip
    expected = json.loads(scores.read_text())["corpora"]["held-out"]["loss"]
    exported = transformers.AutoModelForCausalLM.from_pretrained(
        tmp_path / "exported", local_files_only=True
    )
    with torch.no_grad():
        assert transformers_loss(exported, training_data.held_out, 9) == pytest.approx(
            expected, abs=1e-5
        )


def test_a_capped_llama_computes_cap_tanh_of_the_logits_it_would_give_uncapped(
    training_data, tmp_path
):
    # A cap below the largest logit a fresh tiny model gives, so that it binds.
    capped = initialised(tmp_path / "capped", training_data, *LLAMA, "--logit-cap", "0.05")
    uncapped = initialised(tmp_path / "uncapped", training_data, *LLAMA)
    assert json.loads((capped / "config.json").read_text())["logit_cap"] == 0.05
    assert (capped / "model.safetensors").read_bytes() == (
        uncapped / "model.safetensors"
    ).read_bytes()  # the cap changes what the weights compute, not their draw
    tokens = torch.arange(8).reshape(1, 8) % 5  # (batch 1, 8 positions)
    with torch.no_grad():
        logits, plain = (
            build_model(read_model_directory(model)).eval()(tokens) for model in (capped, uncapped)
        )  # (1, 8, vocabulary) each
    assert plain.abs().max() > 0.05  # the cap binds: the test would see a missing one
    assert logits.abs().max() < 0.05
    torch.testing.assert_close(logits, 0.05 * torch.tanh(plain / 0.05), rtol=0, atol=1e-7)


def test_an_x0_mixed_llama_feeds_each_block_its_two_scalars_mix_and_learns_them(
    training_data, train_args, tmp_path
):
    model = initialised(tmp_path / "mixed", training_data, *LLAMA, "--x0-mix", "0.1")
    weights = load_file(model / "model.safetensors")
    layers = json.loads((model / "config.json").read_text())["layers"]
    assert torch.equal(weights["residual_scales"], torch.ones(layers))
    assert torch.equal(weights["x0_scales"], torch.full((layers,), 0.1))
    network = build_model(read_model_directory(model)).eval()
    with torch.no_grad():  # scalars of each sign, so that a swapped or missing one shows
        network.residual_scales.copy_(torch.linspace(0.5, 2.0, layers))
        network.x0_scales.copy_(torch.linspace(-1.0, 0.3, layers))
    seen: dict[str, list[torch.Tensor]] = {"x0": [], "inputs": [], "outputs": []}
    network.token_embedding.register_forward_hook(lambda m, a, out: seen["x0"].append(out))
    for block in network.blocks:
        block.register_forward_pre_hook(lambda m, args: seen["inputs"].append(args[0]))
        block.register_forward_hook(lambda m, a, out: seen["outputs"].append(out))
    with torch.no_grad():
        network(torch.arange(8).reshape(1, 8) % 5)  # (batch 1, 8 positions)
    (x0,) = seen["x0"]  # (1, 8, d_model)
    streams = [x0, *seen["outputs"][:-1]]  # what each block's input mixes x0 into
    for layer, (stream, given) in enumerate(zip(streams, seen["inputs"], strict=True)):
        expected = network.residual_scales[layer] * stream + network.x0_scales[layer] * x0
        torch.testing.assert_close(given, expected, rtol=0, atol=0)
    output = tmp_path / "run"
    zrodlo_succeeds(*train_args(model, training_data.corpus, output, 4, MUON), cwd=tmp_path)
    trained = load_file(output / "step-4" / "model.safetensors")
    for name in ("residual_scales", "x0_scales"):
        assert not torch.equal(trained[name], weights[name])  # learned: AdamW moves them


def test_value_embeddings_add_each_tokens_row_gated_to_their_layers_values_and_are_learned(
    training_data, train_args, tmp_path
):
    flags = ("--layers", "3", "--value-embeddings", "2")
    model = initialised(tmp_path / "embedded", training_data, *LLAMA, *flags)
    weights = load_file(model / "model.safetensors")
    tables = sorted(name for name in weights if name.startswith("value_embeddings."))
    assert tables == ["value_embeddings.0.weight", "value_embeddings.2.weight"]  # 2nd from last
    gates = [f"blocks.{layer}.attention.value_gate.weight" for layer in (0, 2)]
    assert not any(weights[gate].any() for gate in gates)  # 2 sigmoid(0): the rows whole
    loaded = read_model_directory(model)
    embedded = build_model(loaded).eval()
    draws = torch.Generator().manual_seed(0)
    with torch.no_grad():  # gates of each sign, so that a missing or misplaced one shows
        for name in gates:
            embedded.get_parameter(name).normal_(generator=draws)
    state = embedded.state_dict()
    # The same weights without the setting, the values' rows added by hand to its projection.
    rest = {name: w for name, w in state.items() if name not in (*tables, *gates)}
    plain = build_decoder(loaded.config.changed(value_embeddings=None), rest).eval()
    tokens = torch.arange(8).reshape(1, 8) % 5  # (batch 1, 8 positions)

    def adds(layer: int):
        def hook(module, args, qkv):  # qkv (1, 8, q + k + v widths)
            gate_weight = state[f"blocks.{layer}.attention.value_gate.weight"]  # (kv_heads, C)
            rows = state[f"value_embeddings.{layer}.weight"][tokens]  # (1, 8, kv_width)
            width = rows.size(-1) // gate_weight.size(0)  # a head's
            gate = 2 * torch.sigmoid(args[0][..., : gate_weight.size(1)] @ gate_weight.T)
            added = gate.repeat_interleave(width, dim=-1) * rows  # (1, 8, kv_width)
            return torch.cat((qkv[..., : -rows.size(-1)], qkv[..., -rows.size(-1) :] + added), -1)

        return hook

    for layer in (0, 2):
        plain.blocks[layer].attention.qkv.register_forward_hook(adds(layer))
    with torch.no_grad():
        torch.testing.assert_close(embedded(tokens), plain(tokens), rtol=0, atol=1e-6)
        bare = build_decoder(loaded.config.changed(value_embeddings=None), rest).eval()(tokens)
    assert (embedded(tokens).detach() - bare).abs().max() > 1e-3  # the rows change the logits
    output = tmp_path / "run"
    zrodlo_succeeds(*train_args(model, training_data.corpus, output, 4, MUON), cwd=tmp_path)
    trained = load_file(output / "step-4" / "model.safetensors")
    for name in (*tables, *gates):
        assert not torch.equal(trained[name], weights[name])  # learned: AdamW and Muon move them


# The settings no transformers class computes, each refused export with a sentence naming it.
UNEXPORTABLE = {
    "capped": (("--logit-cap", "15"), "the model caps its logits (logit_cap), and "
               "LlamaForCausalLM computes them uncapped; it cannot be exported"),
    "relu2": (RECIPE, "the model's feed-forward is relu2 without a gate (mlp), and "
              "LlamaForCausalLM gates its feed-forward; no transformers class computes it, so it "
              "cannot be exported"),
    "x0 mix": (("--x0-mix", "0.1"), "the model mixes the embeddings' output into every block's "
               "input (x0_mix), and LlamaForCausalLM does not; it cannot be exported"),
    "value embeddings": (("--value-embeddings", "2"), "the model adds value embeddings to its "
                         "attention's values (value_embeddings), and LlamaForCausalLM does not; "
                         "it cannot be exported"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(UNEXPORTABLE))
def test_a_llama_no_transformers_class_computes_is_refused_export_naming_the_setting(
    case, training_data, assert_refused, tmp_path
):
    flags, sentence = UNEXPORTABLE[case]
    model = initialised(tmp_path / "model-root", training_data, *LLAMA, *flags)
    assert_refused(
        "model", "export", "--model", model, "--output", "exported", sentence=sentence
    )  # fmt: skip


@pytest.mark.parametrize(
    ("flags", "sentence"),
    [
        (("--architecture", "llama", "--mlp", "swiglu"),
         "--mlp is 'swiglu'; it takes relu2, or none for the default"),
        (("--architecture", "llama", "--head-std", "0.001", "--tie-embeddings"),
         "--head-std draws a head of its own, and --tie-embeddings makes the head read the token "
         "embedding"),
        (("--architecture", "llama", "--head-std", "-1"),
         "--head-std is -1.0; it must be a positive finite number"),
        (("--architecture", "gemma3", "--norm", "unscaled"),
         "--norm is set; a gemma3 model's norms and feed-forward are its own"),
        (("--mlp", "relu2"),
         "--mlp is for --architecture llama, qwen2, qwen3, smollm3 or gemma3; a gpt model has "
         "none"),
        (("--architecture", "qwen3", "--logit-cap", "0"),
         "--logit-cap is 0.0; it must be a positive finite number"),
        (("--logit-cap", "15"),
         "--logit-cap is for --architecture llama, qwen2, qwen3, smollm3 or gemma3; a gpt model "
         "has none"),
        (("--architecture", "llama", "--x0-mix", "inf"), "--x0-mix is inf; it must be a finite number"),
        (("--architecture", "gemma3", "--x0-mix", "0.1"),
         "--x0-mix is set; a gemma3 model's blocks read the residual stream alone"),
        (("--x0-mix", "0.1"),
         "--x0-mix is for --architecture llama, qwen2, qwen3, smollm3 or gemma3; a gpt model has "
         "none"),
        (("--architecture", "qwen3", "--value-embeddings", "0"),
         "--value-embeddings is 0; it must be a whole number of 1 or more"),
        (("--architecture", "gemma3", "--value-embeddings", "2"),
         "--value-embeddings is set; a gemma3 model's attention values are its projection's "
         "alone"),
    ],
)  # fmt: skip
def test_a_recipe_setting_that_cannot_make_a_model_is_refused(
    flags, sentence, training_data, assert_refused
):
    assert_refused(
        "model", "init", "--tokenizer", training_data.tokenizer, "--output", "model",
        *TINY_MODEL, "--dropout", "0", *flags, "--seed", "1", sentence=sentence,
    )  # fmt: skip

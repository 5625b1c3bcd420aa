"""GPT-2's decoder (the gpt family): shapes, causality, dropout through step masks, initial weights,
config."""

import hashlib
import json
import math
import re
from dataclasses import replace

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from zrodlo.draws.chacha import Purpose, Stream
from zrodlo.draws.floats import normal
from zrodlo.model.config import ModelConfig
from zrodlo.model.decoder import Decoder, build_decoder
from zrodlo.model.dropout import StepMasks
from zrodlo.model.parts import parameter_count, parameter_shapes, step_activation_bytes
from zrodlo.model.weights import check_weights, initial_weights
from zrodlo.storage.refusal import Refusal
from zrodlo.training.optimizer import decays

SMALL = ModelConfig(
    vocab_size=16,
    positions=8,
    d_model=16,
    layers=2,
    heads=2,
    d_ff=32,
    dropout=0.0,
    attention_dropout=0.0,
)
DROPPING = replace(SMALL, dropout=0.2, attention_dropout=0.3)
# sha256 of the float32 little-endian bytes of initial_weights(SMALL, 7), concatenated in sorted name
# order. It changes only if the draw scheme changes, which a resumed run must notice.
SMALL_SEED_7_SHA256 = "66d961601a20ec7a0299d6e7e1725bb0fdcffba04dbb8604b01ca1f02f94432a"


def model(config: ModelConfig, seed: int = 7, train: bool = True) -> Decoder:
    return build_decoder(config, initial_weights(config, seed)).train(train)


def tokens(batch: int, time: int, vocab: int = 16, offset: int = 0) -> torch.Tensor:
    # A fixed, varied pattern: no torch RNG in the tests either.
    index = torch.arange(batch * time).reshape(batch, time)
    return (index * 7 + offset + index // 3) % vocab


def digest(weights: dict[str, torch.Tensor]) -> str:
    sha = hashlib.sha256()
    for name in sorted(weights):
        sha.update(weights[name].numpy().astype("<f4").tobytes())
    return sha.hexdigest()


class AllKeep:
    """Step masks that keep every element, to compare the explicit attention with the fused one."""

    def keep(self, layer, site, shape, p, device):
        return torch.ones(shape, dtype=torch.bool, device=device)


# Initial weights


def test_initial_weights_name_every_parameter_as_float32():
    weights = initial_weights(SMALL, 7)
    assert {n: tuple(w.shape) for n, w in weights.items()} == parameter_shapes(SMALL)
    assert all(w.dtype == torch.float32 and w.is_contiguous() for w in weights.values())
    assert set(build_decoder(SMALL, weights).state_dict()) == set(weights)


def test_parameter_names_are_stable():
    names = set(parameter_shapes(SMALL))
    assert {"token_embedding.weight", "position_embedding.weight", "lm_head.weight"} <= names
    assert {"final_norm.weight", "final_norm.bias"} <= names
    block = {n.removeprefix("blocks.1.") for n in names if n.startswith("blocks.1.")}
    assert block == {
        f"{module}.{kind}"
        for module in (
            "attention_norm",
            "attention.qkv",
            "attention.out",
            "mlp_norm",
            "mlp.up",
            "mlp.down",
        )
        for kind in ("weight", "bias")
    }
    assert len(names) == 3 + 2 + 12 * SMALL.layers


def test_initial_weights_are_deterministic_and_follow_the_seed():
    first, again, other = (
        initial_weights(SMALL, 7),
        initial_weights(SMALL, 7),
        initial_weights(SMALL, 8),
    )
    assert all(torch.equal(first[n], again[n]) for n in first)
    assert digest(first) == digest(again)
    assert not torch.equal(first["lm_head.weight"], other["lm_head.weight"])
    # Untied and drawn from separate streams, even where shapes match.
    assert not torch.equal(first["lm_head.weight"], first["token_embedding.weight"])


def test_initial_weights_are_the_documented_chacha_draws():
    weights = initial_weights(SMALL, 7)
    for index, name in enumerate(sorted(weights)):
        if weights[name].dim() < 2:
            continue
        draws = normal(Stream(7, Purpose.INIT, a=index), 0, weights[name].numel())
        std = (
            0.02 / math.sqrt(4)
            if name.endswith(("attention.out.weight", "mlp.down.weight"))
            else 0.02
        )
        expected = torch.from_numpy(draws).reshape(weights[name].shape) * torch.tensor(
            std, dtype=torch.float32
        )
        assert torch.equal(weights[name], expected), name


def test_initial_weights_pin_their_sha256():
    weights = initial_weights(SMALL, 7)
    assert digest(weights) == SMALL_SEED_7_SHA256
    # The first draws, exactly, so a changed draw scheme shows where it differs.
    first = [float.hex(x) for x in weights["token_embedding.weight"][0, :3].tolist()]
    assert first == ["0x1.31cfcc0000000p-8", "-0x1.5966560000000p-7", "-0x1.1439280000000p-6"]


def test_initial_weights_have_the_stated_scales():
    config = replace(SMALL, vocab_size=64, d_model=64, d_ff=256, heads=4, layers=8, positions=32)
    weights = initial_weights(config, 3)
    for name, w in weights.items():
        if name.endswith(".bias"):
            assert torch.equal(w, torch.zeros_like(w)), name
        elif name.endswith("norm.weight"):
            assert torch.equal(w, torch.ones_like(w)), name
        else:
            residual = name.endswith(("attention.out.weight", "mlp.down.weight"))
            std = 0.02 / math.sqrt(2 * 8) if residual else 0.02
            assert abs(w.std().item() / std - 1) < 0.1, (name, w.std().item())
            assert abs(w.mean().item()) < std / 5, name


def test_from_weights_copies_so_training_leaves_the_source_alone():
    weights = initial_weights(SMALL, 7)
    gpt = build_decoder(SMALL, weights)
    with torch.no_grad():
        gpt.lm_head.weight.add_(1.0)
    assert torch.equal(weights["lm_head.weight"], initial_weights(SMALL, 7)["lm_head.weight"])
    assert all(p.requires_grad for p in gpt.parameters())


def test_parameter_count_and_matrices():
    d, v, p, f, layers = 16, 16, 8, 32, 2
    per_block = 2 * 2 * d + (d * 3 * d + 3 * d) + (d * d + d) + (d * f + f) + (f * d + d)
    assert parameter_count(SMALL) == v * d + p * d + layers * per_block + 2 * d + d * v
    gpt = model(SMALL)
    decaying = {n for n, t in gpt.named_parameters() if decays(t, "matrices")}
    assert decaying == {
        n for n in parameter_shapes(SMALL) if n.endswith("weight") and "norm" not in n
    }


# Weights that do not fit


@pytest.mark.parametrize(
    ("damage", "sentence"),
    [
        (
            lambda w: w.pop("blocks.1.mlp.up.bias"),
            "run/model.safetensors has no tensor blocks.1.mlp.up.bias, which its model configuration needs",
        ),
        (
            lambda w: w.update(extra=torch.zeros(2)),
            "run/model.safetensors holds tensor extra, which its model configuration has no place for",
        ),
        (
            lambda w: w.update({"lm_head.weight": torch.zeros(16, 8)}),
            "run/model.safetensors holds lm_head.weight with shape [16, 8], "
            "but its model configuration needs [16, 16]",
        ),
        (
            lambda w: w.update({"final_norm.bias": torch.zeros(16, dtype=torch.float64)}),
            "run/model.safetensors holds final_norm.bias as torch.float64; model weights are float32",
        ),
        (
            lambda w: w["final_norm.bias"].fill_(float("nan")),
            "run/model.safetensors holds final_norm.bias with values that are not finite numbers",
        ),
        (
            lambda w: w["lm_head.weight"].view(-1)[37].fill_(float("-inf")),
            "run/model.safetensors holds lm_head.weight with values that are not finite numbers",
        ),
        (
            lambda w: w["blocks.0.mlp.up.weight"].view(-1)[5].fill_(float("nan")),
            "run/model.safetensors holds blocks.0.mlp.up.weight with values that are not finite "
            "numbers",
        ),
    ],
)
def test_weights_that_do_not_fit_are_refused(damage, sentence):
    weights = initial_weights(SMALL, 7)
    damage(weights)
    with pytest.raises(Refusal) as refusal:
        check_weights(SMALL, weights, "run/model.safetensors")
    assert refusal.value.sentence == sentence
    with pytest.raises(Refusal):
        build_decoder(SMALL, weights)


# Configuration


@pytest.mark.parametrize(
    ("changes", "sentence"),
    [
        ({"layers": 0}, "--layers is 0; it must be a whole number of one or more"),
        ({"vocab_size": -3}, "--vocab-size is -3; it must be a whole number of one or more"),
        ({"positions": 0}, "--positions is 0; it must be a whole number of one or more"),
        ({"d_model": 0}, "--d-model is 0; it must be a whole number of one or more"),
        ({"heads": 0}, "--heads is 0; it must be a whole number of one or more"),
        ({"d_ff": 2.5}, "--d-ff is 2.5; it must be a whole number of one or more"),
        ({"layers": True}, "--layers is True; it must be a whole number of one or more"),
        (
            {"heads": 3, "d_model": 64},
            "--heads 3 does not divide --d-model 64; each head takes an equal share of the model width",
        ),
        ({"dropout": 1.0}, "--dropout is 1.0; it must lie from 0 up to but not including 1"),
        ({"dropout": -0.1}, "--dropout is -0.1; it must lie from 0 up to but not including 1"),
        (
            {"attention_dropout": float("nan")},
            "--attention-dropout is nan; it must lie from 0 up to but not including 1",
        ),
        (
            {"attention_dropout": 1},
            "--attention-dropout is 1; it must lie from 0 up to but not including 1",
        ),
    ],
)
def test_config_refusals_name_the_flag_and_the_value(changes, sentence):
    with pytest.raises(Refusal) as refusal:
        replace(SMALL, **changes).validate()
    assert refusal.value.sentence == sentence


def test_valid_configs_pass():
    SMALL.validate()
    DROPPING.validate()
    replace(SMALL, dropout=0, attention_dropout=0.999, heads=16).validate()


def test_config_round_trips_through_json():
    text = json.dumps(DROPPING.to_json())
    assert ModelConfig.from_json(json.loads(text), "m/config.json") == DROPPING
    assert json.loads(text) == {
        "vocab_size": 16,
        "positions": 8,
        "d_model": 16,
        "layers": 2,
        "heads": 2,
        "d_ff": 32,
        "dropout": 0.2,
        "attention_dropout": 0.3,
    }
    loaded = ModelConfig.from_json({**SMALL.to_json(), "dropout": 0}, "m/config.json")
    assert loaded.dropout == 0.0 and isinstance(loaded.dropout, float)


PREFIX = "m/config.json does not load as a model configuration: "


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ([1, 2], "it holds a list, not an object of named values"),
        ("x", "it holds a string, not an object of named values"),
        ({k: v for k, v in SMALL.to_json().items() if k != "d_ff"}, "it has no d_ff"),
        ({**SMALL.to_json(), "layers": "2"}, "layers is '2', not a whole number"),
        ({**SMALL.to_json(), "layers": 2.0}, "layers is 2.0, not a whole number"),
        ({**SMALL.to_json(), "heads": True}, "heads is True, not a whole number"),
        ({**SMALL.to_json(), "dropout": None}, "dropout is None, not a number"),
        ({**SMALL.to_json(), "tied": True}, "it holds tied, which no model configuration has"),
        ({**SMALL.to_json(), "layers": 0}, "layers is 0; it must be a whole number of one or more"),
        (
            {**SMALL.to_json(), "heads": 3},
            "heads 3 does not divide d_model 16; each head takes an equal share of the model width",
        ),
        (
            {**SMALL.to_json(), "attention_dropout": 1.5},
            "attention_dropout is 1.5; it must lie from 0 up to but not including 1",
        ),
    ],
)
def test_a_config_json_that_does_not_load_is_refused(data, problem):
    with pytest.raises(Refusal) as refusal:
        ModelConfig.from_json(data, "m/config.json")
    assert refusal.value.sentence == PREFIX + problem


@settings(max_examples=25, deadline=None)
@given(
    vocab_size=st.integers(4, 40),
    positions=st.integers(1, 20),
    heads=st.integers(1, 4),
    head_width=st.integers(1, 6),
    layers=st.integers(1, 3),
    d_ff=st.integers(1, 30),
)
def test_parameter_count_and_shapes_are_those_of_the_parameters_the_model_builds(
    vocab_size, positions, heads, head_width, layers, d_ff
):
    config = replace(
        SMALL,
        vocab_size=vocab_size,
        positions=positions,
        d_model=heads * head_width,
        heads=heads,
        layers=layers,
        d_ff=d_ff,
    )
    model = Decoder(config)
    built = sum(p.numel() for p in model.parameters())
    assert parameter_count(config) == built
    registered = [(name, tuple(p.shape)) for name, p in model.named_parameters()]
    assert list(parameter_shapes(config).items()) == registered  # names, shapes and order


@pytest.mark.parametrize(
    "field, value", [("layers", 10_000_000), ("d_model", 2**40), ("vocab_size", 10**30)]
)
def test_a_configuration_too_large_for_this_machine_is_refused_before_anything_is_built(
    field, value
):
    config = replace(SMALL, heads=1, **{field: value})
    with pytest.raises(Refusal) as refused:
        config.validate()
    assert re.fullmatch(
        r"a model of [\d,]+ parameters needs [\d,.]+ GiB for its float32 weights, more than the "
        r"[\d,.]+ GiB of memory this machine has",
        refused.value.sentence,
    )


# The activations a step keeps


def saved_bytes(gpt: Decoder, inputs: torch.Tensor, targets: torch.Tensor, masks) -> int:
    """Bytes of every storage autograd keeps for the backward pass of one forward pass and its
    loss, each storage counted once and the weights not at all (they are the training state), plus
    the logits, which exist beside their log-softmax."""
    weights = {p.untyped_storage().data_ptr() for p in gpt.parameters()}
    storages: dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in weights:
            storages[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        logits = gpt(inputs, masks)  # (B, T, vocab)
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten())
    loss.backward()
    return sum(storages.values()) + logits.numel() * logits.element_size()


@pytest.mark.parametrize("config", [SMALL, DROPPING, replace(SMALL, layers=3, d_ff=48)])
def test_step_activation_bytes_is_a_lower_bound_on_what_a_step_keeps(config):
    windows, context = 3, 8
    inputs = tokens(windows, context - 1)
    targets = tokens(windows, context - 1, offset=1)
    measured = saved_bytes(model(config), inputs, targets, StepMasks(5, 0))
    bound = step_activation_bytes(config, windows, context, "f32")
    assert 0 < bound <= measured
    # Tight enough to mean something: the bound is most of what is kept.
    assert bound > 0.6 * measured

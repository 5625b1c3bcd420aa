"""The llama decoder's own parts: its parameters (no biases, fused projections, a tied head
without a weight of its own), its configuration in config.json and refused where it cannot be
built, and rotary positions that make attention depend on relative positions only."""

import pytest
import torch

from zrodlo.model.attention import KVCache, rotary_angles, rotated
from zrodlo.model.config import COMMON, ModelConfig
from zrodlo.model.decoder import build_decoder
from zrodlo.model.parts import Rotary, parameter_count, parameter_shapes
from zrodlo.model.weights import initial_weights
from zrodlo.storage.refusal import Refusal

LLAMA = ModelConfig.of(
    vocab_size=40, positions=16, d_model=24, layers=2, heads=4, d_ff=40, dropout=0.0,
    architecture="llama", kv_heads=2,
)  # fmt: skip


@pytest.mark.parametrize(
    "config",
    [
        LLAMA,
        LLAMA.changed(tie_embeddings=True, kv_heads=4),
        LLAMA.changed(x0_mix=0.1),
        LLAMA.changed(value_embeddings=2, kv_heads=4),
    ],
)
def test_the_parameters_are_the_modules_and_counted_from_the_configuration(config):
    weights = initial_weights(config, 3)
    built = build_decoder(config, weights)
    shapes = [(n, tuple(p.shape)) for n, p in built.named_parameters()]
    assert shapes == list(parameter_shapes(config).items())  # in the order they register
    assert sum(p.numel() for p in built.parameters()) == parameter_count(config)
    assert not any(name.endswith(".bias") for name in weights)
    assert ("lm_head.weight" in weights) is not config.settings.tie_embeddings
    # Queries, then keys and values of kv_heads heads each 6 wide; the gate with the up projection.
    assert weights["blocks.0.attention.qkv.weight"].shape == (
        24 + 2 * config.settings.kv_heads * 6,
        24,
    )
    assert weights["blocks.0.mlp.gate_up.weight"].shape == (80, 24)


def test_config_json_states_llama_and_a_gpt_config_is_what_releases_wrote():
    stated = LLAMA.to_json()
    assert stated["architecture"] == "llama" and stated["rope_theta"] == 10000.0
    assert ModelConfig.from_json(stated, "config.json") == LLAMA
    gpt = ModelConfig(vocab_size=40, positions=16, d_model=24, layers=2, heads=4, d_ff=40,
                      dropout=0.0)  # fmt: skip
    assert list(gpt.to_json()) == list(COMMON)
    assert ModelConfig.from_json(gpt.to_json(), "config.json") == gpt


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"architecture": "mamba"}, "architecture is 'mamba'; it is gpt, llama, qwen2, qwen3, smollm3 or gemma3"),
        ({"architecture": ["llama"]}, "architecture is ['llama']; it is gpt, llama, qwen2, qwen3, smollm3 or gemma3"),
        ({"kv_heads": 3}, "kv_heads 3 does not divide heads 4; each key and value head serves an "
         "equal share of the query heads"),
        ({"rope_theta": 0}, "rope_theta is 0.0; it must be a positive finite number"),
        ({"tie_embeddings": 1}, "tie_embeddings is 1, not true or false"),
        ({"d_model": 20}, "d_model 20 over heads 4 gives heads 5 wide; rotary positions turn "
         "pairs, so a head's width is even"),
    ],
)  # fmt: skip
def test_a_config_json_that_cannot_be_built_is_refused(change, problem):
    with pytest.raises(Refusal) as refused:
        ModelConfig.from_json({**LLAMA.to_json(), **change}, "config.json")
    assert (
        refused.value.sentence == f"config.json does not load as a model configuration: {problem}"
    )


def test_a_gpt_config_holding_a_llama_setting_is_refused():
    gpt = {name: LLAMA.to_json()[name] for name in COMMON}
    with pytest.raises(Refusal) as refused:
        ModelConfig.from_json({**gpt, "kv_heads": 2}, "config.json")
    assert refused.value.sentence == (
        "config.json does not load as a model configuration: it holds kv_heads, which no model "
        "configuration has"
    )


def test_rotary_scores_depend_on_the_distance_between_positions_only():
    angles = rotary_angles(
        Rotary(10000.0), LLAMA.head_width, 12, torch.device("cpu")
    )  # (12, 6) each
    q = torch.linspace(-1, 1, 6).reshape(1, 1, 1, 6).expand(1, 1, 12, 6)
    k = torch.linspace(2, -1, 6).reshape(1, 1, 1, 6).expand(1, 1, 12, 6)
    scores = rotated(q, *angles)[0, 0] @ rotated(k, *angles)[0, 0].T  # (12, 12)
    for distance in range(4):
        diagonal = torch.diagonal(scores, -distance)
        torch.testing.assert_close(diagonal, diagonal[:1].expand_as(diagonal), rtol=1e-5, atol=1e-5)
    assert not torch.allclose(torch.diagonal(scores, 0)[:1], torch.diagonal(scores, -3)[:1])


def test_value_embeddings_read_one_token_at_a_time_through_a_cache_as_in_the_whole_pass():
    config = LLAMA.changed(value_embeddings=1)  # every layer's values take their rows
    weights = initial_weights(config, 5)
    for layer in range(config.layers):  # gates of each sign: each position's own gate shows
        gate = weights[f"blocks.{layer}.attention.value_gate.weight"]  # (kv_heads, 12)
        weights[f"blocks.{layer}.attention.value_gate.weight"] = torch.linspace(
            -1, 1, gate.numel()
        ).reshape(gate.shape)
    decoder = build_decoder(config, weights).eval()
    tokens = torch.arange(16).reshape(2, 8) * 7 % 40  # (2, 8)
    with torch.no_grad():
        whole = decoder(tokens)  # (2, 8, 40)
        cache = KVCache()
        parts = [decoder(tokens[:, :3], cache=cache)]  # the prompt, then a token at a time
        parts += [decoder(tokens[:, t : t + 1], cache=cache) for t in range(3, 8)]
    torch.testing.assert_close(torch.cat(parts, dim=1), whole, rtol=1e-5, atol=1e-5)

"""Low-rank adapters beside a frozen decoder: fresh ones change nothing, trained ones compute what
their merged weights compute, and only they take gradients."""

from __future__ import annotations

import pytest
import torch

from zrodlo.model.adapter_spec import AdapterSpec, places
from zrodlo.model.adapters import attach, initial_adapters, merged, trained_parameters
from zrodlo.model.config import ModelConfig
from zrodlo.model.decoder import build_decoder
from zrodlo.model.parts import parameter_count, training_state_bytes
from zrodlo.model.weights import initial_weights
from zrodlo.storage.refusal import Refusal

LLAMA = ModelConfig.of(
    vocab_size=40, positions=16, d_model=24, layers=2, heads=4, d_ff=40, dropout=0.0,
    architecture="llama", kv_heads=2,
)  # fmt: skip
GPT = ModelConfig.of(
    vocab_size=40, positions=16, d_model=24, layers=2, heads=4, d_ff=40, dropout=0.0
)
TOKENS = torch.tensor([[1, 5, 9, 3, 7, 2, 8], [4, 4, 0, 39, 12, 6, 1]])


@pytest.mark.parametrize(
    ("config", "targets"),
    [(LLAMA, ("q", "k", "v", "o")), (LLAMA, ("v", "gate", "down")), (GPT, ("k", "up", "o"))],
)
def test_fresh_adapters_compute_the_base_and_trained_ones_their_merged_weights(config, targets):
    spec = AdapterSpec(rank=3, alpha=6.0, targets=targets)
    spec.check(config)
    weights = initial_weights(config, 5)
    with torch.no_grad():
        base = build_decoder(config, weights).eval()(TOKENS)  # (2, 7, vocab)
    adapters = initial_adapters(config, spec, 9)
    adapted = build_decoder(config, weights).eval()
    attach(adapted, config, spec, adapters)
    with torch.no_grad():
        assert torch.equal(adapted(TOKENS), base)  # B is zero: nothing added
    generator = torch.Generator().manual_seed(0)  # a trained B, for the test only
    trained = {
        name: torch.randn(tensor.shape, generator=generator) * 0.1
        if name.endswith(".B")
        else tensor
        for name, tensor in adapters.items()
    }
    adapted = build_decoder(config, weights).eval()
    attach(adapted, config, spec, trained)
    whole = build_decoder(config, merged(weights, config, spec, trained)).eval()
    with torch.no_grad():
        torch.testing.assert_close(adapted(TOKENS), whole(TOKENS), rtol=0, atol=1e-5)


def test_only_the_adapters_take_gradients():
    spec = AdapterSpec(rank=2, alpha=2.0, targets=("q", "v"))
    model = build_decoder(LLAMA, initial_weights(LLAMA, 1))
    attach(model, LLAMA, spec, initial_adapters(LLAMA, spec, 2))
    assert list(trained_parameters(model)) == list(spec.shapes(LLAMA))
    model(TOKENS).sum().backward()
    with_gradients = [name for name, p in model.named_parameters() if p.grad is not None]
    assert with_gradients == list(spec.shapes(LLAMA))


def test_fresh_adapters_are_the_same_draws_for_the_same_seed_and_within_their_bound():
    spec = AdapterSpec(rank=4, alpha=8.0, targets=("q", "down"))
    first, again = initial_adapters(LLAMA, spec, 3), initial_adapters(LLAMA, spec, 3)
    assert first.keys() == again.keys() == spec.shapes(LLAMA).keys()
    for name, tensor in first.items():
        assert torch.equal(tensor, again[name]), name
        if name.endswith(".B"):
            assert not tensor.any()
        else:
            assert tensor.abs().max() <= tensor.shape[1] ** -0.5
    assert not torch.equal(first["blocks.0.attention.qkv.lora_q.A"],
                           initial_adapters(LLAMA, spec, 4)["blocks.0.attention.qkv.lora_q.A"])  # fmt: skip


def test_the_targets_are_the_families_projections_and_others_are_refused():
    assert list(places(LLAMA)) == ["q", "k", "v", "o", "gate", "up", "down"]
    assert list(places(GPT)) == ["q", "k", "v", "o", "up", "down"]
    with pytest.raises(Refusal) as refused:
        AdapterSpec(rank=8, alpha=16.0, targets=("q", "gate")).check(GPT)
    assert refused.value.sentence == (
        "--lora-targets is q,gate; it names each of q, k, v, o, up, down once at most, one or "
        "more of them"
    )


def test_a_run_of_adapters_holds_the_weights_once_and_four_numbers_an_adapter_number():
    """What the memory check before a run counts: GPT-2 small's shape with rank 8 on q, k, v, o
    trains 589,824 numbers (12 blocks, 4 targets, 8 x 768 + 768 x 8 each) beside its weights."""
    gpt2 = ModelConfig.of(vocab_size=50257, positions=1024, d_model=768, layers=12, heads=12,
                          d_ff=3072, dropout=0.0)  # fmt: skip
    shapes = AdapterSpec(rank=8, alpha=16.0, targets=("q", "k", "v", "o")).shapes(gpt2)
    numbers = sum(rows * columns for rows, columns in shapes.values())
    assert numbers == 12 * 4 * (8 * 768 + 768 * 8)
    assert training_state_bytes(gpt2, numbers) == (parameter_count(gpt2) + 4 * numbers) * 4
    assert training_state_bytes(gpt2) == parameter_count(gpt2) * 16

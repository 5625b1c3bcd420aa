"""A frozen base held in bfloat16 computes what the float32 decoder computes holding the base rounded
to bfloat16, in the forward pass and in the adapters' gradients, to the bit, in half the bytes."""

from __future__ import annotations

import pytest
import torch

from zrodlo.model.adapter_spec import AdapterSpec
from zrodlo.model.adapters import attach, initial_adapters, merged
from zrodlo.model.config import ModelConfig
from zrodlo.model.decoder import build_decoder
from zrodlo.model.held_base import rounded
from zrodlo.model.weights import initial_weights
from zrodlo.storage.refusal import Refusal

LLAMA = ModelConfig.of(
    vocab_size=40, positions=16, d_model=24, layers=2, heads=4, d_ff=40, dropout=0.0,
    architecture="llama", kv_heads=2,
)  # fmt: skip
GPT = ModelConfig.of(
    vocab_size=40, positions=16, d_model=24, layers=2, heads=4, d_ff=40, dropout=0.0,
    tie_embeddings=True,
)  # fmt: skip
TOKENS = torch.tensor([[1, 5, 9, 3, 7, 2, 8], [4, 4, 0, 39, 12, 6, 1]])
SPEC = AdapterSpec(rank=3, alpha=6.0, targets=("q", "v", "down"), base="bf16")


def _adapted(config: ModelConfig, weights: dict, held: str) -> torch.nn.Module:
    network = build_decoder(config, weights, held=held)
    generator = torch.Generator().manual_seed(0)  # a trained B, for the test only
    adapters = {
        name: torch.randn(t.shape, generator=generator) * 0.1 if name.endswith(".B") else t
        for name, t in initial_adapters(config, SPEC, 9).items()
    }
    attach(network, config, SPEC, adapters)
    return network


@pytest.mark.parametrize("config", [LLAMA, GPT], ids=["llama", "gpt-tied"])
def test_a_bfloat16_base_computes_the_rounded_base_in_float32(config):
    weights = initial_weights(config, 5)
    held = _adapted(config, weights, "bf16")
    plain = _adapted(config, rounded(weights, "bf16"), "f32")
    frozen = [p for p in held.parameters() if not p.requires_grad]
    assert {p.dtype for p in frozen} == {torch.bfloat16}
    assert config.parts.tied_head == (config is GPT)  # a tied head upcast where it is used
    for network in (held, plain):
        network(TOKENS).logsumexp(-1).sum().backward()
    assert torch.equal(held(TOKENS), plain(TOKENS))
    for (name, mine), (_, theirs) in zip(
        held.named_parameters(), plain.named_parameters(), strict=True
    ):
        if mine.requires_grad:
            assert torch.equal(mine.grad, theirs.grad), name


def test_a_merged_export_adds_the_adapters_to_the_base_as_held():
    weights = initial_weights(LLAMA, 5)
    adapters = {
        name: torch.full(shape, 0.0) for name, shape in SPEC.shapes(LLAMA).items()
    }  # zero adapters: the merged weights are the base as the run held it
    out = merged(weights, LLAMA, SPEC, adapters)
    assert all(torch.equal(out[name], w.to(torch.bfloat16).float()) for name, w in weights.items())
    assert any(not torch.equal(out[name], w) for name, w in weights.items())


def test_an_unknown_base_format_is_refused():
    with pytest.raises(Refusal) as refused:
        AdapterSpec(2, 2.0, ("q",), "f16").check(LLAMA)
    assert refused.value.sentence == "--lora-base is 'f16'; it takes f32 or bf16"

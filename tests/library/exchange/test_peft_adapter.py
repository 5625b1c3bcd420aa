"""Adapters exported as a PEFT adapter directory: peft loads it onto the base `model export`
wrote, and transformers then computes the logits Zrodlo's adapted decoder computes, for a family
whose projections are apart (llama) and one whose query, key and value are one module (GPT-2)."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import save_file

from zrodlo.exchange.peft_adapter import ADAPTER_CONFIG, ADAPTER_WEIGHTS, peft_adapter
from zrodlo.exchange.to_transformers import export
from zrodlo.model.adapter_spec import AdapterSpec
from zrodlo.model.adapters import attach, initial_adapters
from zrodlo.model.decoder import build_decoder
from zrodlo.model.directory import init
from zrodlo.training.checkpoint import read_model

transformers = pytest.importorskip("transformers")
peft = pytest.importorskip("peft")

TOKENS = torch.tensor([[1, 5, 9, 3, 7, 2, 8], [4, 4, 0, 11, 12, 6, 1]])
CASES = {
    "llama": ({"architecture": "llama", "kv_heads": 2}, ("q", "k", "v", "o", "gate", "down")),
    "gpt": ({}, ("q", "v", "o", "up", "down")),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_peft_loads_the_adapters_onto_the_export_with_zrodlos_logits(case, training_data, tmp_path):
    settings, targets = CASES[case]
    init(training_data.tokenizer, tmp_path / "model", seed=3, layers=2, heads=4, d_model=24,
         d_ff=40, positions=16, dropout=0.0, **settings)  # fmt: skip
    model = read_model(tmp_path / "model")
    spec = AdapterSpec(rank=3, alpha=6.0, targets=targets)
    generator = torch.Generator().manual_seed(0)  # a trained B, for the test only
    adapters = {
        name: torch.randn(t.shape, generator=generator) * 0.1 if name.endswith(".B") else t
        for name, t in initial_adapters(model.config, spec, 5).items()
    }
    adapted = build_decoder(model.config, model.weights).eval()
    attach(adapted, model.config, spec, adapters)
    with torch.no_grad():
        ours = adapted(TOKENS)  # (2, 7, vocab)
    export(tmp_path / "model", tmp_path / "base")
    written = tmp_path / "adapter"
    written.mkdir()
    content, tensors = peft_adapter(model.config, spec, adapters)
    (written / ADAPTER_CONFIG).write_text(json.dumps(content))
    save_file(tensors, written / ADAPTER_WEIGHTS)
    base = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "base")
    tuned = peft.PeftModel.from_pretrained(base, written).eval()
    with torch.no_grad():
        theirs = tuned(TOKENS).logits
    torch.testing.assert_close(theirs, ours, rtol=0, atol=1e-5)

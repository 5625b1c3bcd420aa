"""Gemma 3's decoder at its released window of 512 keys: imported from transformers' own
Gemma3ForCausalLM (a tiny width, one local and one global layer) and run over 600 positions, so
that the local layer's window hides keys from the later queries, Zrodlo's logits are
transformers' within 1e-5; and greedy continuation through the key-value cache, which keeps the
local layer's last 511 keys alone, chooses the tokens the whole sequence read at once chooses."""

from __future__ import annotations

import pytest
import torch
from library_tokenizers import llama3_file

from zrodlo.exchange.from_transformers import import_model
from zrodlo.model.attention import KVCache
from zrodlo.model.decoder import build_decoder
from zrodlo.training.checkpoint import read_model

transformers = pytest.importorskip("transformers")

LENGTH = 600


@pytest.fixture(scope="module")
def released_window(tmp_path_factory) -> tuple:
    root = tmp_path_factory.mktemp("gemma3")
    source = root / "source"
    source.mkdir()
    llama3_file(source / "tokenizer.json")
    config = transformers.Gemma3TextConfig(
        vocab_size=360, hidden_size=16, intermediate_size=24, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=1, head_dim=8, query_pre_attn_scalar=8,
        max_position_embeddings=LENGTH, sliding_window=512,
        layer_types=["sliding_attention", "full_attention"], pad_token_id=0, bos_token_id=2,
        eos_token_id=1,
    )  # fmt: skip
    torch.manual_seed(0)  # transformers' own initialisation: the fixture's weights only
    theirs = transformers.Gemma3ForCausalLM(config).eval()
    theirs.save_pretrained(source)
    import_model(source, root / "model")
    loaded = read_model(root / "model")
    ours = build_decoder(loaded.config, loaded.weights).eval()
    tokens = torch.randint(3, 360, (1, LENGTH), generator=torch.Generator().manual_seed(1))
    return theirs, ours, tokens


def test_the_window_hides_the_keys_transformers_hides(released_window):
    theirs, ours, tokens = released_window
    assert ours.config.settings.sliding_window == 512
    with torch.no_grad():
        expected = theirs(tokens).logits  # (1, 600, vocab)
        computed = ours(tokens)
    torch.testing.assert_close(computed, expected, rtol=0, atol=1e-5)


def test_the_cache_keeps_what_a_local_layer_sees(released_window):
    _, ours, tokens = released_window
    cache = KVCache()
    with torch.no_grad():
        whole = ours(tokens)  # (1, 600, vocab)
        steps = [ours(tokens[:, :40], cache=cache)]
        steps += [ours(tokens[:, t : t + 1], cache=cache) for t in range(40, LENGTH)]
    assert cache.keys[0].size(2) == 511 and cache.keys[1].size(2) == LENGTH
    stepped = torch.cat(steps, dim=1)  # (1, 600, vocab)
    torch.testing.assert_close(stepped, whole, rtol=0, atol=1e-5)
    assert torch.equal(stepped.argmax(-1), whole.argmax(-1))

"""Sampling through a key-value cache draws what reading the whole window for every token draws,
also once the text runs past the model's positions and the window moves."""

from __future__ import annotations

import pytest
import torch

from zrodlo.data.tokenizer.char import CharTokenizer
from zrodlo.draws.chacha import Purpose, Stream
from zrodlo.draws.floats import uniform
from zrodlo.evaluation.sample import choose, draw
from zrodlo.model.config import ModelConfig
from zrodlo.model.decoder import build_decoder
from zrodlo.model.weights import initial_weights

TOKENIZER = CharTokenizer.fit(["the quick brown fox jumps over the lazy dog"])
LLAMA = {"architecture": "llama", "kv_heads": 1}


def window_by_window(model, prompt: str, tokens: int, temperature: float, seed: int) -> str:
    """The sampler without a cache: each token reads the last `positions` tokens whole."""
    draws = uniform(Stream(seed, Purpose.SAMPLING), 0, tokens)
    sequence = [TOKENIZER.bos, *TOKENIZER.encode(prompt).tolist()]
    produced = []
    with torch.no_grad():
        for i in range(tokens):
            window = torch.tensor([sequence[-model.config.positions :]])  # (1, T)
            logits = model.eval()(window)[0, -1].numpy()  # (V,)
            token = choose(logits, temperature, None, float(draws[i]))
            if token == TOKENIZER.eos:
                break
            sequence.append(token)
            produced.append(token)
    return TOKENIZER.decode(produced)


@pytest.mark.parametrize("architecture", ["gpt", "llama"])
@pytest.mark.parametrize("temperature", [0.0, 0.8])
def test_a_cached_sample_is_the_window_by_window_sample(architecture, temperature):
    config = ModelConfig.of(
        vocab_size=TOKENIZER.vocab_size, positions=8, d_model=16, layers=2, heads=2, d_ff=32,
        dropout=0.0, **(LLAMA if architecture == "llama" else {}),
    )  # fmt: skip
    model = build_decoder(config, initial_weights(config, 5))
    lengths = []
    for seed in range(5):
        expected = window_by_window(model, "the ", 30, temperature, seed)
        cpu = torch.device("cpu")
        assert draw(model, TOKENIZER, "the ", 30, temperature, None, seed, cpu) == expected
        lengths.append(len(expected))
    assert max(lengths) > 8  # past the model's positions: the window moved


def test_a_continuation_is_what_the_whole_sequence_decodes_to_after_the_prompt(tmp_path):
    """Llama 2's decoder drops the space of a text's first token: a continuation decoded alone
    would lose the space that joins it to the prompt."""
    from library_tokenizers import llama2_file

    from zrodlo.data.tokenizer.imported import imported
    from zrodlo.evaluation.sample import continuation

    tokenizer = imported(llama2_file(tmp_path / "tokenizer.json"))
    start = [tokenizer.bos, *tokenizer.encode("the").tolist()]
    produced = tokenizer.encode("quick").tolist()  # "▁qu", "ick": a word after a space
    assert tokenizer.decode(produced) == "quick"
    assert continuation(tokenizer, start, produced) == " quick"

"""Sampling speed: `zrodlo model sample`'s loop (its library function, `draw`, with the key-value
cache) against transformers' `generate` on the exported model, greedy, 200 tokens, the same
threads, timed side by side (A B A B); and the same loop reading the whole window for every token,
as it did before the cache. For GPT-2's architecture and llama's, at the `small` preset with 256
positions and fresh weights (a speed needs no training). Also the cache's promise: the seconds of
the last 50 tokens over those of the first 50 (medians of the repetitions). Figures go to reports/bench/sampling.json.

    .venv/bin/python benchmarks/sampling.py [--tokens 200] [--repeats 5] [--threads 2]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

import measure
import torch

from zrodlo.data.tokenizer.char import CharTokenizer
from zrodlo.draws.chacha import Purpose, Stream
from zrodlo.draws.floats import uniform
from zrodlo.evaluation.sample import choose, draw
from zrodlo.exchange.to_transformers import export
from zrodlo.model.config import ModelConfig
from zrodlo.model.decoder import build_decoder
from zrodlo.model.directory import write_model
from zrodlo.model.presets import PRESETS
from zrodlo.model.weights import initial_weights

TEXT = "".join(chr(c) for c in range(32, 127)) + "\n"
PROMPT = "The "


class NoEnd:
    """The tokenizer, with an end of document no model draws: every run makes all its tokens."""

    def __init__(self, tokenizer: CharTokenizer) -> None:
        self.tokenizer, self.bos, self.eos = tokenizer, tokenizer.bos, -1

    def encode(self, text: str):
        return self.tokenizer.encode(text)

    def decode(self, ids):
        return self.tokenizer.decode(ids)


def window_by_window(model, tokenizer, tokens: int) -> None:
    """The loop before the cache: every token reads the whole window again."""
    draws = uniform(Stream(1, Purpose.SAMPLING), 0, tokens)
    sequence = [tokenizer.bos, *tokenizer.encode(PROMPT).tolist()]
    with torch.no_grad():
        for i in range(tokens):
            window = torch.tensor([sequence[-model.config.positions :]])  # (1, T)
            sequence.append(choose(model(window)[0, -1].numpy(), 0.0, None, float(draws[i])))


def first_and_last_50(model, tokenizer, tokens: int) -> tuple[float, float]:
    """Seconds of the cached loop's first 50 tokens and of its last 50 (the whole run less a run
    50 tokens shorter)."""

    def seconds(count: int) -> float:
        return measure.timed(
            lambda: draw(model, tokenizer, PROMPT, count, 0.0, None, 1, torch.device("cpu"))
        )

    return seconds(50), seconds(tokens) - seconds(tokens - 50)


def compare(architecture: str, tokens: int, repeats: int, root: Path) -> dict:
    import transformers  # the hf extra

    fitted = CharTokenizer.fit([TEXT])
    llama = {"architecture": "llama"} if architecture == "llama" else {}
    config = ModelConfig.of(
        vocab_size=fitted.vocab_size, positions=256, dropout=0.0, **PRESETS["small"], **llama
    )
    weights = initial_weights(config, 1)
    (root / architecture).mkdir()
    write_model(root / architecture, config, fitted, weights)
    export(root / architecture, root / f"{architecture}-hf")
    ours = build_decoder(config, weights).eval()
    theirs = transformers.AutoModelForCausalLM.from_pretrained(
        root / f"{architecture}-hf", local_files_only=True
    ).eval()
    tokenizer = NoEnd(fitted)
    ids = torch.tensor([[fitted.bos, *fitted.encode(PROMPT).tolist()]])

    def zrodlo() -> float:
        return measure.timed(
            lambda: draw(ours, tokenizer, PROMPT, tokens, 0.0, None, 1, torch.device("cpu"))
        )

    def generate() -> float:
        with torch.no_grad():
            return measure.timed(
                lambda: theirs.generate(
                    ids, attention_mask=torch.ones_like(ids), max_new_tokens=tokens,
                    min_new_tokens=tokens, do_sample=False, pad_token_id=fitted.eos,
                )
            )  # fmt: skip

    def uncached() -> float:
        return measure.timed(lambda: window_by_window(ours, fitted, tokens))

    samples = measure.interleave(
        {"zrodlo": zrodlo, "transformers_generate": generate, "window_by_window": uncached},
        repeats,
    )
    measured = [first_and_last_50(ours, tokenizer, tokens) for _ in range(repeats)]
    first = statistics.median(f for f, _ in measured)
    last = statistics.median(f for _, f in measured)
    return {
        "parameters": sum(p.numel() for p in ours.parameters()),
        "zrodlo": measure.summary(samples["zrodlo"]),
        "transformers_generate": measure.summary(samples["transformers_generate"]),
        "window_by_window": measure.summary(samples["window_by_window"]),
        "zrodlo_tokens_per_second": round(tokens / min(samples["zrodlo"]), 1),
        "transformers_tokens_per_second": round(tokens / min(samples["transformers_generate"]), 1),
        "zrodlo_over_transformers_speedup": measure.ratios(
            samples["transformers_generate"], samples["zrodlo"]
        ),
        "cache_speedup": measure.ratios(samples["window_by_window"], samples["zrodlo"]),
        "last_50_over_first_50_ratio": round(last / first, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as folder:
        result = {
            "benchmark": "greedy sampling with the key-value cache against transformers' generate and the uncached loop",
            "tokens": args.tokens,
            "threads": args.threads,
            "greedy": True,
            "architectures": {
                name: compare(name, args.tokens, args.repeats, Path(folder))
                for name in ("gpt", "llama")
            },
            "machine": measure.machine(),
        }
    measure.write_report(measure.REPORTS / "sampling.json", result)


if __name__ == "__main__":
    main()

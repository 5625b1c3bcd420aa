"""A llama training step: zrodlo's Trainer (ChaCha20 windows and dropout masks, target-weighted
loss, gradient norm, AdamW) against a plain PyTorch loop over `reference_llama.TorchLlama`, which
holds the same initial weights and computes the same function without dropout (checked first).
Timed side by side, one step of each in turn, on train.py's random documents and sizes, with
grouped-query attention (half as many key and value heads as query heads). Figures go to
reports/bench/llama_step.json; the target is 0.95 of the plain loop's throughput or more.

    .venv/bin/python benchmarks/llama_step.py [--repeats 20] [--sizes small medium]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

import measure
import torch
from reference_llama import TorchLlama
from train import CPU, SEED, SIZES, PlainLoop, model_config, plan_for, prepare

from zrodlo.model.directory import Model
from zrodlo.model.weights import initial_weights
from zrodlo.training.score import check_data
from zrodlo.training.step import Trainer


def compare(size_name: str, tokenizer, corpus, repeats: int) -> dict:
    size = SIZES[size_name]
    base = model_config(size, tokenizer.vocab_size)
    config = base.changed(architecture="llama", kv_heads=size["heads"] // 2)
    model = Model(Path(f"llama-{size_name}"), config, tokenizer, initial_weights(config, SEED))
    table = check_data(corpus, model, size["context"])
    trainer = Trainer.start(plan_for(size, 10**6), model, corpus.tokens, table, CPU)
    reference = TorchLlama.from_llama(trainer.model)
    probe = torch.from_numpy(corpus.tokens[: 4 * 64].astype("int64")).reshape(4, 64)  # (4, 64)
    trainer.model.eval()
    reference.eval()
    with torch.no_grad():
        difference = float((trainer.model(probe) - reference(probe)).abs().max())
    trainer.model.train()
    if difference > 1e-4:
        raise SystemExit(f"the reference llama differs from zrodlo's by {difference}")
    plain = PlainLoop(reference, corpus.tokens, size)
    steps = iter(range(10**6))
    variants = {
        "zrodlo_trainer_step": lambda: measure.timed(lambda: trainer.step(next(steps))),
        "plain_pytorch_step": lambda: measure.timed(plain.step),
    }
    measure.interleave(variants, 1)  # warm-up
    samples = measure.interleave(variants, repeats)
    positions = size["batch"] * (size["context"] - 1)
    z, p = samples["zrodlo_trainer_step"], samples["plain_pytorch_step"]
    ratio = measure.ratios(p, z)
    return {
        "size": size_name,
        "config": config.to_json(),
        "largest_logit_difference": difference,
        "step": {name: measure.summary(values) for name, values in samples.items()},
        "tokens_per_second": {
            "zrodlo": round(positions / statistics.median(z)),
            "plain_pytorch": round(positions / statistics.median(p)),
        },
        "throughput_ratio_zrodlo_over_plain": ratio,
        "meets_target": ratio["of_medians"] >= 0.95,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--sizes", nargs="+", default=list(SIZES), choices=list(SIZES))
    parser.add_argument("--characters", type=int, default=2_000_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        tokenizer, corpus = prepare(Path(folder), args.characters)
        sizes = [compare(name, tokenizer, corpus, args.repeats) for name in args.sizes]
    result = {
        "benchmark": "llama training step: zrodlo's trainer against a plain PyTorch loop over the same llama",
        "sizes": sizes,
        "threads": torch.get_num_threads(),
        "machine": measure.machine(),
    }
    measure.write_report(measure.REPORTS / "llama_step.json", result)


if __name__ == "__main__":
    main()

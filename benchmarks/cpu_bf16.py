"""bfloat16 on the CPU: a training step of the pipeline's model (the AdamW recipe's llama:
measure.adamw_params) under autocast to bfloat16 against the same step in float32, a step of each
in turn, on this machine's threads; and a matrix product of the model's width in each, to see what
the processor's bfloat16 units (AVX-512 BF16, AMX) give where it has them. Seed 001 refuses
`--precision bf16` on the CPU; this says what allowing it would buy here. Figures go to
reports/bench/<report>.json: cpu_bf16.json was measured on a processor with AVX2 alone,
cpu_bf16_amx.json on one with AVX-512 BF16 and AMX.

    .venv/bin/python benchmarks/cpu_bf16.py [--repeats 10] [--report cpu_bf16_amx]
"""

from __future__ import annotations

import argparse

import measure
import torch
import torch.nn.functional as F

from zrodlo.model.config import ModelConfig
from zrodlo.model.decoder import build_decoder
from zrodlo.model.presets import PRESETS
from zrodlo.model.weights import initial_weights


def step(model: torch.nn.Module, tokens: torch.Tensor, dtype: torch.dtype) -> float:
    """Seconds of one forward and backward pass over `tokens` (B, T) with autocast to `dtype`."""

    def run() -> None:
        with torch.autocast("cpu", dtype=dtype, enabled=dtype != torch.float32):
            logits = model(tokens[:, :-1])  # (B, T-1, V)
        loss = F.cross_entropy(logits.float().flatten(0, 1), tokens[:, 1:].flatten())
        loss.backward()
        model.zero_grad(set_to_none=True)

    return measure.timed(run)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--report", default="cpu_bf16")
    args = parser.parse_args()
    params = measure.adamw_params()
    init, train = params["init"], params["train"]
    torch.set_num_threads(train["threads"])
    config = ModelConfig.of(
        vocab_size=params["tokenizer"]["vocab_size"], positions=init["positions"],
        dropout=0.0, architecture=init["architecture"], kv_heads=init["kv_heads"],
        **PRESETS[init["preset"]],
    )  # fmt: skip
    model = build_decoder(config, initial_weights(config, 1)).train()
    generator = torch.Generator().manual_seed(0)
    tokens = torch.randint(
        config.vocab_size, (train["micro_batch_size"], train["context"]), generator=generator
    )  # (B, T)
    width = config.d_model * 4
    a, b = torch.randn(2048, width, generator=generator), torch.randn(width, width)
    for dtype in (torch.float32, torch.bfloat16):  # warm both paths
        step(model, tokens, dtype)
    samples = measure.interleave(
        {
            "f32 step": lambda: step(model, tokens, torch.float32),
            "bf16 step": lambda: step(model, tokens, torch.bfloat16),
            "f32 matmul": lambda: measure.timed(lambda: a @ b),
            "bf16 matmul": lambda: measure.timed(
                lambda: a.bfloat16() @ b.bfloat16()  # the casts, as autocast makes them
            ),
        },
        args.repeats,
    )
    report = {
        "benchmark": "a training step and a matrix product in bfloat16 on the CPU against float32",
        "model": {"preset": init["preset"], "architecture": init["architecture"],
                  "windows": train["micro_batch_size"], "context": train["context"]},
        "matmul_shape": [2048, width, width],
        "seconds": {name: measure.summary(values) for name, values in samples.items()},
        "step_ratio_bf16_over_f32": measure.ratios(samples["bf16 step"], samples["f32 step"]),
        "matmul_ratio_bf16_over_f32": measure.ratios(
            samples["bf16 matmul"], samples["f32 matmul"]
        ),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "machine": measure.machine(),
    }  # fmt: skip
    measure.write_report(measure.REPORTS / f"{args.report}.json", report)


if __name__ == "__main__":
    main()

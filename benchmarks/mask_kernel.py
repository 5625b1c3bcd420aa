"""The keep-masks of one training step, drawn three ways: OpenSSL's ChaCha20 on the CPU (what CPU
runs use), torch integer ops one after another (what a Metal GPU uses, and CUDA used before), and
the one compiled kernel CUDA now uses, all on the CPU here, in turn in every repetition; and the
seconds the first compile takes. Every mask is also checked equal across the three. Figures go to
reports/bench/mask_kernel.json.

    .venv/bin/python benchmarks/mask_kernel.py [--repeats 7] [--device cpu]

With --device cuda it measures the two torch paths on the GPU (the OpenSSL one stays on the CPU).
"""

from __future__ import annotations

import argparse
import time

import measure
import torch
from dropout import SIZES, mask_shapes, model_config, rate

from zrodlo.model.dropout import StepMasks

STEP = 3


def draw_all(config, size: dict, device: torch.device, fused: bool | None) -> list[torch.Tensor]:
    """Every keep-mask of one step's forward pass; fused None is the CPU's OpenSSL path."""
    masks = StepMasks(seed=7, step=STEP)
    drawn = []
    for layer, site, shape in mask_shapes(config, size["batch"], size["context"]):
        count = 1
        for extent in shape:
            count *= extent
        stream, p = masks.stream(layer, site), rate(config, site)
        if fused is None:
            drawn.append(masks.keep_mask_tensor(stream, 0, count, p, torch.device("cpu")))
        else:
            drawn.append(masks._keep_mask_on_device(stream, 0, count, p, device, fused))
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return drawn


def measure_size(name: str, device: torch.device, repeats: int) -> dict:
    size = SIZES[name]
    config = model_config(size, dropout=0.1, attention_dropout=0.1)
    started = time.perf_counter()
    fused = draw_all(config, size, device, fused=True)  # compiles
    compile_s = time.perf_counter() - started
    eager = draw_all(config, size, device, fused=False)
    openssl = draw_all(config, size, device, fused=None)
    same = all(
        torch.equal(a.cpu(), b.cpu()) and torch.equal(a.cpu(), c)
        for a, b, c in zip(fused, eager, openssl, strict=True)
    )
    variants = {
        "openssl_cpu": lambda: measure.timed(lambda: draw_all(config, size, device, None)),
        "torch_op_by_op": lambda: measure.timed(lambda: draw_all(config, size, device, False)),
        "fused_kernel": lambda: measure.timed(lambda: draw_all(config, size, device, True)),
    }
    measure.interleave(variants, 1)  # warm-up
    samples = measure.interleave(variants, repeats)
    return {
        "masks_per_step": len(fused),
        "elements_per_step": sum(m.numel() for m in fused),
        "first_call_with_compile_s": round(compile_s, 2),
        "all_equal": same,
        "seconds": {key: measure.summary(v) for key, v in samples.items()},
        "fused_over_op_by_op": measure.ratios(samples["fused_kernel"], samples["torch_op_by_op"]),
        "fused_over_openssl": measure.ratios(samples["fused_kernel"], samples["openssl_cpu"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--sizes", nargs="+", choices=sorted(SIZES), default=["small", "medium"])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--output", default=None)
    args = parser.parse_args()
    device = torch.device(args.device)
    output = args.output or measure.REPORTS / f"mask_kernel_{device.type}.json"
    measure.write_report(
        output,
        {
            "benchmark": "keep-masks of one step: OpenSSL, torch op by op, one compiled kernel",
            "device": str(device),
            "sizes": {name: measure_size(name, device, args.repeats) for name in args.sizes},
            "machine": measure.machine(),
        },
    )


if __name__ == "__main__":
    main()

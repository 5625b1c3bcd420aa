"""Step time of zrodlo's GPT with ChaCha20 dropout masks against the same model with torch's dropout.

One step is forward, cross-entropy, backward and an AdamW update (torch's defaults, the
single-tensor implementation on the CPU, as zrodlo uses). Three variants share one batch and are
timed in turn in every repetition: zrodlo's GPT in training mode with `StepMasks` for a new step each
time, `reference.TorchGPT` holding a copy of the same weights with F.dropout at the same sites, and
(with attention_dropout 0) zrodlo's GPT without masks, for the cost dropout adds. The mask drawing
alone (every keep-mask a zrodlo step draws) is timed in the same rotation, next to torch's Bernoulli
masks of the same shapes. Two sizes, each with attention_dropout 0 (fused attention) and 0.1
(explicit attention with dropped probabilities). Figures go to reports/bench/dropout.json.

    .venv/bin/python benchmarks/dropout.py [--repeats 7] [--sizes small medium] [--threads 1]

--threads sets torch's thread count for every variant alike. It is 1 by default: on a machine whose
cores other processes also use, a step on two OpenMP threads waits at every barrier for a thread
that lost its core, and its time swings several-fold from one step to the next.
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable
from pathlib import Path

import measure
import torch
import torch.nn.functional as F
from reference import TorchGPT, check_same_function

from zrodlo.model.config import ModelConfig
from zrodlo.model.decoder import build_decoder
from zrodlo.model.dropout import Site, StepMasks
from zrodlo.model.weights import initial_weights

VOCAB = 100
SIZES = {
    "small": {"d_model": 128, "layers": 4, "heads": 4, "d_ff": 512, "context": 128, "batch": 32},
    "medium": {"d_model": 256, "layers": 6, "heads": 8, "d_ff": 1024, "context": 256, "batch": 16},
}
SEED = 20240229
CPU = torch.device("cpu")


def model_config(size: dict, dropout: float, attention_dropout: float) -> ModelConfig:
    return ModelConfig(
        vocab_size=VOCAB,
        positions=size["context"],
        d_model=size["d_model"],
        layers=size["layers"],
        heads=size["heads"],
        d_ff=size["d_ff"],
        dropout=dropout,
        attention_dropout=attention_dropout,
    )


def mask_shapes(config: ModelConfig, batch: int, tokens: int) -> list[tuple[int, tuple]]:
    """(layer, site, shape) of every keep-mask one forward pass of zrodlo's GPT draws."""
    hidden = (batch, tokens, config.d_model)
    shapes = [(0, Site.EMBEDDING, hidden)]
    for layer in range(config.layers):
        if config.attention_dropout > 0:
            probs = (batch, config.heads, tokens, tokens)
            shapes.append((layer, Site.ATTENTION_PROBS, probs))
        shapes += [(layer, Site.ATTENTION_OUTPUT, hidden), (layer, Site.MLP_OUTPUT, hidden)]
    return shapes


def rate(config: ModelConfig, site: Site) -> float:
    return config.attention_dropout if site == Site.ATTENTION_PROBS else config.dropout


def train_step(
    forward: Callable[[torch.Tensor], torch.Tensor],
    optimizer: torch.optim.Optimizer,
    inputs: torch.Tensor,
    targets: torch.Tensor,
) -> float:
    """Seconds of forward, loss, backward and AdamW step."""

    def step() -> None:
        logits = forward(inputs)  # (B, T, vocab)
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return measure.timed(step)


def compare(size_name: str, attention_dropout: float, dropout: float, repeats: int) -> dict:
    size = SIZES[size_name]
    config = model_config(size, dropout, attention_dropout)
    batch, tokens = size["batch"], size["context"] - 1  # a window of C tokens is read as C-1
    gpt = build_decoder(config, initial_weights(config, SEED)).train()
    reference = TorchGPT.from_gpt(gpt).train()
    generator = torch.Generator().manual_seed(SEED)
    inputs = torch.randint(0, VOCAB, (batch, tokens), generator=generator)  # (B, T)
    targets = torch.randint(0, VOCAB, (batch, tokens), generator=generator)  # (B, T)
    difference = check_same_function(gpt, reference, inputs)
    zrodlo_adamw = torch.optim.AdamW(gpt.parameters())
    torch_adamw = torch.optim.AdamW(reference.parameters())
    shapes = mask_shapes(config, batch, tokens)
    step_index = iter(range(2**31))  # every zrodlo step draws the masks of a step not drawn before

    def zrodlo_step() -> float:
        masks = StepMasks(SEED, next(step_index))
        return train_step(lambda x: gpt(x, masks), zrodlo_adamw, inputs, targets)

    def torch_step() -> float:
        return train_step(reference, torch_adamw, inputs, targets)

    def undropped_step() -> float:
        return train_step(lambda x: gpt(x, None), zrodlo_adamw, inputs, targets)

    def zrodlo_masks() -> float:
        masks = StepMasks(SEED, next(step_index))
        return measure.timed(
            lambda: [
                masks.keep(layer, site, shape, rate(config, site), CPU)
                for layer, site, shape in shapes
            ]
        )

    def torch_masks() -> float:
        return measure.timed(
            lambda: [
                torch.empty(shape).bernoulli_(1 - rate(config, site)) for _, site, shape in shapes
            ]
        )

    variants = {"zrodlo_chacha20_masks": zrodlo_step, "torch_dropout": torch_step}
    if attention_dropout == 0:
        # Without masks zrodlo's GPT takes the fused attention whatever attention_dropout says,
        # so this baseline is the undropped step of the attention_dropout 0 model only.
        variants["no_dropout"] = undropped_step
    variants["zrodlo_mask_drawing"] = zrodlo_masks
    variants["torch_bernoulli_masks"] = torch_masks
    measure.interleave(variants, 1)  # warm-up: first calls allocate and pick kernels
    samples = measure.interleave(variants, repeats)
    z, t = samples["zrodlo_chacha20_masks"], samples["torch_dropout"]
    ratio = measure.ratios(z, t)
    steps = [
        name for name in ("zrodlo_chacha20_masks", "torch_dropout", "no_dropout") if name in samples
    ]
    cost = {}
    if "no_dropout" in samples:
        none = statistics.median(samples["no_dropout"])
        cost = {
            "zrodlo": round(statistics.median(z) - none, 6),
            "torch": round(statistics.median(t) - none, 6),
        }
    return {
        "size": size_name,
        "attention": "explicit, probabilities dropped" if attention_dropout > 0 else "fused SDPA",
        "config": config.to_json(),
        "batch_size": batch,
        "tokens_per_window": tokens,
        "mask_elements_per_step": sum(int(torch.Size(shape).numel()) for _, _, shape in shapes),
        "reference_max_logit_difference_without_dropout": difference,
        "step": {name: measure.summary(samples[name]) for name in steps},
        "ratio_zrodlo_over_torch": ratio,
        "meets_target": ratio["of_medians"] <= 1.0,
        "dropout_cost_s": cost or "not measured: without masks the fused attention runs",
        "mask_drawing_alone": {
            "zrodlo_chacha20": measure.summary(samples["zrodlo_mask_drawing"]),
            "torch_bernoulli": measure.summary(samples["torch_bernoulli_masks"]),
            "ratio_zrodlo_over_torch": measure.ratios(
                samples["zrodlo_mask_drawing"], samples["torch_bernoulli_masks"]
            ),
            "share_of_zrodlo_step": round(
                statistics.median(samples["zrodlo_mask_drawing"]) / statistics.median(z), 4
            ),
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7, help="timed steps of each variant")
    parser.add_argument("--threads", type=int, default=1, help="torch threads for every variant")
    parser.add_argument("--sizes", nargs="+", choices=sorted(SIZES), default=["small", "medium"])
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--output", type=Path, default=measure.REPORTS / "dropout.json")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    facts = measure.machine()
    results = []
    for size in args.sizes:
        for attention_dropout in (0.0, args.dropout):
            results.append(compare(size, attention_dropout, args.dropout, args.repeats))
            done = results[-1]
            print(
                f"{size} attention_dropout {attention_dropout}: zrodlo/torch step "
                f"{done['ratio_zrodlo_over_torch']['of_medians']}",
                flush=True,
            )
    result = {
        "benchmark": "dropout step time",
        "step": "forward + cross_entropy + backward + torch.optim.AdamW step (defaults) + zero_grad",
        "target": "zrodlo step with ChaCha20 masks / same step with torch dropout <= 1.0",
        "timing": f"variants in turn, {args.repeats} repetitions after 1 warm-up round; medians",
        "configuration": {
            "repeats": args.repeats,
            "threads": args.threads,
            "dropout": args.dropout,
            "sizes": {name: SIZES[name] for name in args.sizes},
            "vocab_size": VOCAB,
            "seed": SEED,
            "device": "cpu",
            "precision": "f32",
        },
        "results": results,
        "machine": facts,
        "load_average_at_end": measure.machine()["load_average_1_5_15"],
    }
    measure.write_report(args.output, result)


if __name__ == "__main__":
    main()

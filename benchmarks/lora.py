"""Low-rank adapters (LoRA) on a model of a real size (GPT-2 small's shape, 124 M parameters, or
the one --model names), random weights saved by transformers and imported by `zrodlo model import`,
rank 8 on the query, key, value and output projections of every block:

- Zrodlo's Trainer training the adapters alone, against the same Trainer fine-tuning every weight
  (a full fine-tune), and against a plain loop on transformers' model with peft's LoRA of the same
  rank, targets and alpha (the adapter directory `model export --adapter` writes, loaded with
  `PeftModel.from_pretrained(..., is_trainable=True)`: the same function), torch's AdamW over the
  adapters; the same batch, context, hyperparameters and threads, the dropout config.json states;
  timed side by side, one step of each in turn, in a process of its own;
- with --base bf16, the frozen base held in bfloat16 on both sides (`--lora-base bf16`; peft's
  usual way, transformers' model loaded in bfloat16 with float32 adapters), against Zrodlo's
  adapters over the float32 base in place of the full fine-tune, which does not fit;
- the peak resident memory of each, a process of its own running --memory-steps steps of one, the
  sides' processes alternating (--rounds times).

Figures go to reports/bench/lora.json (or the report --report names); the target: the adapters'
step at 0.95 of peft's throughput or more.

    .venv/bin/python benchmarks/lora.py [--repeats 10] [--memory-steps 3]
    .venv/bin/python benchmarks/lora.py --model qwen3_1.7b --base bf16 --repeats 3 \
        --memory-steps 2 --rounds 1 --report lora_bf16_base
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import measure
import torch
from hub_models import BATCH, CONTEXT, MODELS, Plain, loaded, saved
from safetensors.torch import save_file
from train import ADAMW, CPU, SEED, generate

from zrodlo.data.corpus import Corpus
from zrodlo.data.preparation import prepare_corpus
from zrodlo.data.tokenizer import load_tokenizer
from zrodlo.exchange.peft_adapter import ADAPTER_CONFIG, ADAPTER_WEIGHTS, peft_adapter
from zrodlo.model.adapter_spec import AdapterSpec
from zrodlo.model.adapters import Adapters, initial_adapters
from zrodlo.model.directory import read_config
from zrodlo.model.parts import parameter_count
from zrodlo.training.checkpoint import read_model
from zrodlo.training.plan import RunPlan
from zrodlo.training.score import check_data
from zrodlo.training.step import Trainer

ZRODLO = Path(sys.executable).parent / "zrodlo"
RANK, ALPHA, TARGETS = 8, 16, "q,k,v,o"
# The sides by the format the base is held in: the full fine-tune of a model whose adapters need
# a bfloat16 base does not fit beside them; their adapters over the float32 base are measured.
SIDES = {
    "f32": ("zrodlo_lora", "peft_lora", "zrodlo_full"),
    "bf16": ("zrodlo_lora", "peft_lora", "zrodlo_lora_f32_base"),
}


def zrodlo_trainer(work: Path, corpus: Corpus, adapters: bool, base: str) -> Trainer:
    model = read_model(work / "model")
    lora = {"lora_rank": RANK, "lora_alpha": ALPHA, "lora_targets": TARGETS, "lora_base": base}
    lora = lora if adapters else {}
    plan = RunPlan(
        steps=10**6, context=CONTEXT, batch_size=BATCH, decay_scope="all", seed=SEED,
        precision="f32", shuffle=True, **ADAMW, **lora,
    )  # fmt: skip
    if plan.adapters is not None:
        tensors = initial_adapters(model.config, plan.adapters, SEED)
        model = replace(model, adapters=Adapters(plan.adapters, tensors, model.path, "0" * 64))
    table = check_data(corpus, model, CONTEXT)
    return Trainer.start(plan, model, corpus.tokens, table, CPU)


def write_adapter(work: Path) -> None:
    """The fresh adapters of Zrodlo's side as a PEFT adapter directory (B zero on both sides)."""
    model = read_model(work / "model")
    spec = AdapterSpec(RANK, float(ALPHA), tuple(TARGETS.split(",")))
    settings, tensors = peft_adapter(model.config, spec, initial_adapters(model.config, spec, SEED))
    (work / "adapter").mkdir()
    (work / "adapter" / ADAPTER_CONFIG).write_text(json.dumps(settings))
    save_file(tensors, work / "adapter" / ADAPTER_WEIGHTS)


def peft_model(work: Path, base: str) -> torch.nn.Module:
    """transformers' model, in bfloat16 where `base` is bf16, with peft's LoRA of Zrodlo's fresh
    adapters, the adapters trainable and float32."""
    import peft

    dtype = torch.bfloat16 if base == "bf16" else torch.float32
    model = peft.PeftModel.from_pretrained(
        loaded(work / "source", dtype), work / "adapter", is_trainable=True
    )
    for name, parameter in model.named_parameters():
        if "lora_" in name:
            parameter.data = parameter.data.float()
    return model


def stepper(side: str, work: Path, corpus: Corpus, base: str) -> Any:
    """A call that makes one step of `side`."""
    if side == "peft_lora":
        return Plain(peft_model(work, base), corpus.tokens).step
    held = "f32" if side == "zrodlo_lora_f32_base" else base
    trainer = zrodlo_trainer(work, corpus, side != "zrodlo_full", held)
    indices = iter(range(10**6))
    return lambda: trainer.step(next(indices))


def child(kind: str, work: Path, steps: int, base: str) -> None:
    """One process's work: `steps` of every side, one of each in turn after one of each, or
    `steps` of one side; each step's seconds printed (a warm-up left out)."""
    corpus = Corpus.open(work / "corpus")
    if kind == "together":
        steppers = {side: stepper(side, work, corpus, base) for side in SIDES[base]}
        variants = {side: (lambda s=s: measure.timed(s)) for side, s in steppers.items()}
        measure.interleave(variants, 1)
        print(json.dumps(measure.interleave(variants, steps)))
        return
    step = stepper(kind, work, corpus, base)
    print(json.dumps([measure.timed(step) for _ in range(steps)][1:]))


def in_child(kind: str, work: Path, steps: int, model: str, base: str) -> tuple[int, Any]:
    command = [sys.executable, __file__, "--child", kind, "--work", str(work),
               "--memory-steps", str(steps), "--model", model, "--base", base]  # fmt: skip
    peak, printed = measure.peak_of(command)
    return peak, json.loads(printed) if printed.strip() else []


def run(work: Path, args: argparse.Namespace) -> dict:
    sides, base = SIDES[args.base], args.base
    in_child("save", work, 0, args.model, base)
    measure.peak_of([str(ZRODLO), "model", "import", "--from", str(work / "source"), "--output",
             str(work / "model")])  # fmt: skip
    (work / "corpus").mkdir()
    prepare_corpus(work / "documents.jsonl", load_tokenizer(work / "model"), work / "corpus")
    write_adapter(work)
    peaks: dict[str, list[int]] = {side: [] for side in sides}
    for _ in range(args.rounds):
        for side in sides:
            peaks[side].append(in_child(side, work, args.memory_steps, args.model, base)[0])
    samples = in_child("together", work, args.repeats, args.model, base)[1]
    positions = BATCH * (CONTEXT - 1)
    speed = {side: round(positions / statistics.median(samples[side])) for side in sides}
    peak = {side: min(values) for side, values in peaks.items()}
    against_peft = measure.ratios(samples["peft_lora"], samples["zrodlo_lora"])
    other = sides[2].removeprefix("zrodlo_")  # full, or lora_f32_base
    return {
        "parameters": parameter_count(read_config(work / "model")),
        "step": {side: measure.summary(values) for side, values in samples.items()},
        "tokens_per_second": speed,
        "throughput_ratio_lora_over_peft": against_peft,
        f"throughput_ratio_lora_over_{other}": measure.ratios(samples[sides[2]], samples[sides[0]]),
        "meets_target": against_peft["of_medians"] >= 0.95,
        "peak_rss_bytes": peak,
        f"peak_ratio_lora_over_{other}": round(peak["zrodlo_lora"] / peak[sides[2]], 3),
        "peak_ratio_lora_over_peft": round(peak["zrodlo_lora"] / peak["peft_lora"], 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--memory-steps", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=2, help="memory processes of each side")
    parser.add_argument("--model", default="gpt2_small", choices=MODELS)
    parser.add_argument("--base", default="f32", choices=SIDES, help="the frozen base's format")
    parser.add_argument("--report", default="lora", help="the report's name")
    every = sorted({side for sides in SIDES.values() for side in sides})
    parser.add_argument("--child", choices=["save", "together", *every], help=argparse.SUPPRESS)
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "2")))
    if args.child == "save":
        saved(args.work / "source", args.model, args.work / "documents.jsonl")
        return
    if args.child:
        child(args.child, args.work, args.memory_steps, args.base)
        return
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        generate(work / "documents.jsonl", 400_000)
        figures = run(work, args)
    result = {
        "benchmark": f"LoRA on {args.model}'s shape, the base held in {args.base}: adapters "
        f"against {SIDES[args.base][2]} and peft",
        "model": args.model, "base": args.base, "rank": RANK, "alpha": ALPHA, "targets": TARGETS,
        "batch": BATCH, "context": CONTEXT, **figures, "threads": torch.get_num_threads(),
        "machine": measure.machine(),
    }  # fmt: skip
    measure.write_report(measure.REPORTS / f"{args.report}.json", result)


if __name__ == "__main__":
    main()

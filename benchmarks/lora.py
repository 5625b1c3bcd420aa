"""Low-rank adapters (LoRA) on GPT-2 small's shape (124 M parameters, random weights saved by
transformers and imported by `zrodlo model import`), rank 8 on the query, key, value and output
projections of every block:

- Zrodlo's Trainer training the adapters alone, against the same Trainer fine-tuning every weight
  (a full fine-tune), and against a plain loop on transformers' model with peft's LoRA of the same
  rank, targets and alpha (the adapter directory `model export --adapter` writes, loaded with
  `PeftModel.from_pretrained(..., is_trainable=True)`: the same function), torch's AdamW over the
  adapters; the same batch, context, hyperparameters and threads, the dropout config.json states;
  timed side by side, one step of each in turn, in a process of its own;
- the peak resident memory of each, a process of its own running --memory-steps steps of one, the
  sides' processes alternating.

Figures go to reports/bench/lora.json; the target: the adapters' step at 0.95 of peft's throughput
or more.

    .venv/bin/python benchmarks/lora.py [--repeats 10] [--memory-steps 3]
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
from hub_models import BATCH, CONTEXT, Plain, loaded, peak_of, saved
from safetensors.torch import save_file
from train import ADAMW, CPU, SEED, generate

from zrodlo.data.corpus import Corpus
from zrodlo.data.preparation import prepare_corpus
from zrodlo.data.tokenizer import load_tokenizer
from zrodlo.exchange.peft_adapter import ADAPTER_CONFIG, ADAPTER_WEIGHTS, peft_adapter
from zrodlo.model.adapter_spec import AdapterSpec
from zrodlo.model.adapters import Adapters, initial_adapters
from zrodlo.training.checkpoint import read_model
from zrodlo.training.plan import RunPlan
from zrodlo.training.score import check_data
from zrodlo.training.step import Trainer

ZRODLO = Path(sys.executable).parent / "zrodlo"
RANK, ALPHA, TARGETS = 8, 16, "q,k,v,o"
SIDES = ("zrodlo_lora", "peft_lora", "zrodlo_full")


def zrodlo_trainer(work: Path, corpus: Corpus, adapters: bool) -> Trainer:
    model = read_model(work / "model")
    lora = {"lora_rank": RANK, "lora_alpha": ALPHA, "lora_targets": TARGETS} if adapters else {}
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


def peft_model(work: Path) -> torch.nn.Module:
    """transformers' model with peft's LoRA of Zrodlo's fresh adapters, the adapters trainable."""
    import peft

    return peft.PeftModel.from_pretrained(
        loaded(work / "source"), work / "adapter", is_trainable=True
    )


def stepper(side: str, work: Path, corpus: Corpus) -> Any:
    """A call that makes one step of `side`."""
    if side == "peft_lora":
        return Plain(peft_model(work), corpus.tokens).step
    trainer = zrodlo_trainer(work, corpus, adapters=side == "zrodlo_lora")
    indices = iter(range(10**6))
    return lambda: trainer.step(next(indices))


def child(kind: str, work: Path, steps: int) -> None:
    """One process's work: `steps` of every side, one of each in turn after one of each, or
    `steps` of one side; each step's seconds printed (a warm-up left out)."""
    corpus = Corpus.open(work / "corpus")
    if kind == "together":
        steppers = {side: stepper(side, work, corpus) for side in SIDES}
        variants = {side: (lambda s=s: measure.timed(s)) for side, s in steppers.items()}
        measure.interleave(variants, 1)
        print(json.dumps(measure.interleave(variants, steps)))
        return
    step = stepper(kind, work, corpus)
    print(json.dumps([measure.timed(step) for _ in range(steps)][1:]))


def in_child(kind: str, work: Path, steps: int) -> tuple[int, Any]:
    command = [sys.executable, __file__, "--child", kind, "--work", str(work),
               "--memory-steps", str(steps)]  # fmt: skip
    peak, printed = peak_of(command)
    return peak, json.loads(printed) if printed.strip() else []


def run(work: Path, repeats: int, memory_steps: int) -> dict:
    in_child("save", work, 0)
    peak_of([str(ZRODLO), "model", "import", "--from", str(work / "source"), "--output",
             str(work / "model")])  # fmt: skip
    (work / "corpus").mkdir()
    prepare_corpus(work / "documents.jsonl", load_tokenizer(work / "model"), work / "corpus")
    write_adapter(work)
    peaks: dict[str, list[int]] = {side: [] for side in SIDES}
    for _ in range(2):
        for side in SIDES:
            peaks[side].append(in_child(side, work, memory_steps)[0])
    samples = in_child("together", work, repeats)[1]
    positions = BATCH * (CONTEXT - 1)
    speed = {side: round(positions / statistics.median(samples[side])) for side in SIDES}
    peak = {side: min(values) for side, values in peaks.items()}
    against_peft = measure.ratios(samples["peft_lora"], samples["zrodlo_lora"])
    return {
        "step": {side: measure.summary(values) for side, values in samples.items()},
        "tokens_per_second": speed,
        "throughput_ratio_lora_over_peft": against_peft,
        "throughput_ratio_lora_over_full": measure.ratios(
            samples["zrodlo_full"], samples["zrodlo_lora"]
        ),
        "meets_target": against_peft["of_medians"] >= 0.95,
        "peak_rss_bytes": peak,
        "peak_ratio_lora_over_full": round(peak["zrodlo_lora"] / peak["zrodlo_full"], 3),
        "peak_ratio_lora_over_peft": round(peak["zrodlo_lora"] / peak["peft_lora"], 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--memory-steps", type=int, default=3)
    parser.add_argument("--child", choices=["save", "together", *SIDES], help=argparse.SUPPRESS)
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "2")))
    if args.child == "save":
        saved(args.work / "source", "gpt2_small", args.work / "documents.jsonl")
        return
    if args.child:
        child(args.child, args.work, args.memory_steps)
        return
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        generate(work / "documents.jsonl", 400_000)
        figures = run(work, args.repeats, args.memory_steps)
    result = {
        "benchmark": "LoRA on GPT-2 small's shape: adapters against a full fine-tune and peft",
        "rank": RANK, "alpha": ALPHA, "targets": TARGETS, "batch": BATCH, "context": CONTEXT,
        **figures, "threads": torch.get_num_threads(), "machine": measure.machine(),
    }  # fmt: skip
    measure.write_report(measure.REPORTS / "lora.json", result)


if __name__ == "__main__":
    main()

"""Models of a real size as transformers writes them: GPT-2 small's shape (124 M parameters) and,
with --qwen, Qwen2.5-0.5B's (494 M); or the ones --models names (Qwen3-0.6B's, Gemma-3-270m's,
written to the report --report names); random weights saved by transformers beside a byte-level
BPE.

- import: `zrodlo model import` in a process of its own, its peak resident memory against the
  bytes of the weights it reads (model.safetensors), and the largest difference between the
  imported model's float32 logits and transformers' own over 600 positions;
- a fine-tuning step: zrodlo's Trainer (ChaCha20 windows and dropout masks, AdamW) on the imported
  model against a plain PyTorch loop on transformers' own model loaded from the same directory
  (torch dropout, cross-entropy, torch's AdamW), the same batch, hyperparameters and threads, the
  dropout rates config.json states; timed side by side, one step of each in turn (Qwen2.5-0.5B's
  two sides do not fit in this machine's memory at once: timed in the processes below instead);
- the peak resident memory of each, a process of its own running --memory-steps steps of one,
  the two sides' processes alternating.

Figures go to reports/bench/hub_models.json; the targets: import at most twice the weights' bytes,
a step at 0.95 of the plain loop's throughput or more, peak memory no higher than the loop's.

    .venv/bin/python benchmarks/hub_models.py [--repeats 10] [--memory-steps 3] [--qwen]
    .venv/bin/python benchmarks/hub_models.py --models qwen3_0.6b,gemma3_270m --report recent_models
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import measure
import numpy as np
import torch
import torch.nn.functional as F
from train import ADAMW, CPU, SEED, generate

from zrodlo.data.corpus import Corpus
from zrodlo.data.preparation import prepare_corpus
from zrodlo.data.tokenizer import load_tokenizer
from zrodlo.model.directory import read_config
from zrodlo.model.parts import parameter_count
from zrodlo.training.checkpoint import read_model
from zrodlo.training.plan import RunPlan
from zrodlo.training.score import check_data
from zrodlo.training.step import Trainer

ZRODLO = Path(sys.executable).parent / "zrodlo"
BATCH, CONTEXT = 4, 129  # 512 positions a step
LOGIT_POSITIONS = 600  # the import's logits compared over a sequence longer than Gemma's window
# Each shape as the released configuration states it (transformers' class and its fields).
MODELS = {
    "gpt2_small": ("GPT2LMHeadModel", {"vocab_size": 50257, "n_positions": 1024, "n_embd": 768,
                                       "n_layer": 12, "n_head": 12}),
    "qwen2.5_0.5b": ("Qwen2ForCausalLM", {
        "vocab_size": 151936, "hidden_size": 896, "intermediate_size": 4864,
        "num_hidden_layers": 24, "num_attention_heads": 14, "num_key_value_heads": 2,
        "max_position_embeddings": 32768, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
        "tie_word_embeddings": True, "use_sliding_window": False}),
    "qwen3_0.6b": ("Qwen3ForCausalLM", {
        "vocab_size": 151936, "hidden_size": 1024, "intermediate_size": 3072,
        "num_hidden_layers": 28, "num_attention_heads": 16, "num_key_value_heads": 8,
        "head_dim": 128, "max_position_embeddings": 40960, "rms_norm_eps": 1e-6,
        "rope_theta": 1000000.0, "tie_word_embeddings": True, "use_sliding_window": False,
        "attention_bias": False}),
    "gemma3_270m": ("Gemma3ForCausalLM", {
        "vocab_size": 262144, "hidden_size": 640, "intermediate_size": 2048,
        "num_hidden_layers": 18, "num_attention_heads": 4, "num_key_value_heads": 1,
        "head_dim": 256, "max_position_embeddings": 32768, "query_pre_attn_scalar": 256,
        "sliding_window": 512, "rms_norm_eps": 1e-6, "tie_word_embeddings": True,
        "rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 1000000.0},
                            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}},
        "pad_token_id": 0, "eos_token_id": 1, "bos_token_id": 2}),
}  # fmt: skip
# Qwen3-1.7B: Qwen3-0.6B's configuration twice as wide.
MODELS["qwen3_1.7b"] = (
    "Qwen3ForCausalLM",
    {**MODELS["qwen3_0.6b"][1], "hidden_size": 2048, "intermediate_size": 6144},
)
# The models whose two sides, each with its AdamW state, fit in this machine's 23 GiB at once
# (timed one step of each in turn); the others are timed in processes of their own.
TOGETHER = {"gpt2_small", "gemma3_270m"}


def saved(directory: Path, name: str, documents: Path) -> None:
    """The model `name`, random, saved by transformers with a byte-level BPE of 1,024 tokens
    fitted on the documents."""
    import transformers
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    class_name, fields = MODELS[name]
    model_class = getattr(transformers, class_name)
    torch.manual_seed(SEED)  # transformers' own initialisation: the benchmark's weights only
    model_class(model_class.config_class(**fields)).save_pretrained(directory)
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=1024, special_tokens=["<|endoftext|>"], show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )  # fmt: skip
    texts = (json.loads(line)["text"] for line in documents.open())
    tokenizer.train_from_iterator(texts, trainer)
    tokenizer.save(str(directory / "tokenizer.json"))


class Plain:
    """The plain loop on a transformers model: random windows, its own dropout, mean cross-entropy,
    torch's AdamW with zrodlo's hyperparameters over the parameters that take gradients."""

    def __init__(self, model: torch.nn.Module, tokens: np.ndarray) -> None:
        self.model = model.train()
        self.optimizer = torch.optim.AdamW(
            [p for p in model.parameters() if p.requires_grad], lr=ADAMW["learning_rate"],
            betas=(ADAMW["beta1"], ADAMW["beta2"]), eps=ADAMW["epsilon"],
            weight_decay=ADAMW["weight_decay"],
        )  # fmt: skip
        self.tokens = torch.from_numpy(tokens.astype(np.int64))  # (N,)
        self.offsets = torch.arange(CONTEXT)  # (C,)

    def step(self) -> None:
        starts = torch.randint(0, len(self.tokens) - CONTEXT + 1, (BATCH,))  # (B,)
        window = self.tokens[starts[:, None] + self.offsets]  # (B, C)
        logits = self.model(window[:, :-1]).logits  # (B, C-1, vocab)
        loss = F.cross_entropy(logits.flatten(0, 1), window[:, 1:].flatten())
        loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)


def loaded(directory: Path, dtype: torch.dtype = torch.float32) -> torch.nn.Module:
    """transformers' own model of the directory, in float32 or `dtype`."""
    import transformers

    return transformers.AutoModelForCausalLM.from_pretrained(
        directory, local_files_only=True, dtype=dtype
    )


def zrodlo_trainer(model_directory: Path, corpus: Corpus) -> Trainer:
    model = read_model(model_directory)
    plan = RunPlan(
        steps=10**6, context=CONTEXT, batch_size=BATCH, decay_scope="all", seed=SEED,
        precision="f32", shuffle=True, **ADAMW,
    )  # fmt: skip
    return Trainer.start(plan, model, corpus.tokens, check_data(corpus, model, CONTEXT), CPU)


def largest_logit_difference(work: Path) -> float:
    """The largest |difference| between the imported model's float32 logits and transformers'
    own, over one sequence of LOGIT_POSITIONS random ids (past Gemma's window of 512)."""
    from zrodlo.model.decoder import build_model

    model = read_model(work / "model")
    rng = np.random.default_rng(SEED)  # benchmark ids only
    ids = torch.from_numpy(rng.integers(0, model.config.vocab_size, (1, LOGIT_POSITIONS)))
    with torch.no_grad():
        ours = build_model(model).eval()(ids)  # (1, T, vocab)
        del model
        theirs = loaded(work / "source").eval()(ids).logits  # (1, T, vocab)
    return float((ours - theirs).abs().max())


def child(kind: str, work: Path, steps: int, name: str) -> None:
    """One process's work: the model `name` saved, its logits compared, or steps of one side, each
    step's seconds printed (the first, a warm-up, left out)."""
    if kind == "save":
        saved(work / "source", name, work / "documents.jsonl")
        return
    if kind == "logits":
        print(json.dumps(largest_logit_difference(work)))
        return
    corpus = Corpus.open(work / "corpus")
    if kind == "together":  # `steps` of each side, one of each in turn, after one of each
        trainer, plain = (
            zrodlo_trainer(work / "model", corpus),
            Plain(loaded(work / "source"), corpus.tokens),
        )
        indices = iter(range(10**6))
        variants = {
            "zrodlo_trainer_step": lambda: measure.timed(lambda: trainer.step(next(indices))),
            "plain_transformers_step": lambda: measure.timed(plain.step),
        }
        measure.interleave(variants, 1)
        print(json.dumps(measure.interleave(variants, steps)))
        return
    if kind == "zrodlo":
        trainer = zrodlo_trainer(work / "model", corpus)
        seconds = [measure.timed(lambda i=i: trainer.step(i)) for i in range(steps)]
    else:
        plain = Plain(loaded(work / "source"), corpus.tokens)
        seconds = [measure.timed(plain.step) for _ in range(steps)]
    print(json.dumps(seconds[1:]))


def in_child(kind: str, work: Path, steps: int = 0, name: str = "") -> tuple[int, Any]:
    """Peak resident bytes of `child(kind, ...)` in a process of its own, and its steps' seconds."""
    command = [sys.executable, __file__, "--child", kind, "--work", str(work),
               "--memory-steps", str(steps), "--model", name]  # fmt: skip
    peak, printed = measure.peak_of(command)
    return peak, json.loads(printed) if printed.strip() else []


def compare(name: str, work: Path, repeats: int, memory_steps: int, together: bool) -> dict:
    """Every figure of one model, each from a process of its own (a process's peak memory counts
    the high-water mark of the one it was forked from, which therefore never holds a model):
    saved, imported, its logits compared, trained (the sides' processes alternating), then timed
    one step of each in turn (`together`) or, where the sides do not fit at once, as trained."""
    source = work / "source"
    in_child("save", work, name=name)
    weights_bytes = (source / "model.safetensors").stat().st_size
    import_peak, _ = measure.peak_of([str(ZRODLO), "model", "import", "--from", str(source), "--output",
                              str(work / "model")])  # fmt: skip
    difference = in_child("logits", work)[1]
    (work / "corpus").mkdir()
    prepare_corpus(work / "documents.jsonl", load_tokenizer(work / "model"), work / "corpus")
    peaks: dict[str, list[int]] = {"zrodlo": [], "plain": []}
    apart: dict[str, list[float]] = {"zrodlo_trainer_step": [], "plain_transformers_step": []}
    for _ in range(2):
        for kind, timed in zip(peaks, apart, strict=True):
            peak, seconds = in_child(kind, work, memory_steps)
            peaks[kind].append(peak)
            apart[timed] += seconds
    samples = apart
    if together:
        samples = in_child("together", work, repeats)[1]
    z, p = samples["zrodlo_trainer_step"], samples["plain_transformers_step"]
    ratio = measure.ratios(p, z)
    positions = BATCH * (CONTEXT - 1)
    peak = {kind: min(values) for kind, values in peaks.items()}
    return {
        "model": name,
        "parameters": parameter_count(read_config(work / "model")),
        "steps_timed": "one of each in turn, in a process of their own"
        if together
        else (f"in the processes above, {memory_steps - 1} steps each after a warm-up"),
        "import": {
            "weights_bytes": weights_bytes,
            "peak_rss_bytes": import_peak,
            "peak_over_weights": round(import_peak / weights_bytes, 3),
            "meets_target": import_peak <= 2 * weights_bytes,
            "logit_positions": LOGIT_POSITIONS,
            "largest_logit_difference": difference,
        },
        "step": {kind: measure.summary(values) for kind, values in samples.items()},
        "tokens_per_second": {
            "zrodlo": round(positions / statistics.median(z)),
            "plain_transformers": round(positions / statistics.median(p)),
        },
        "throughput_ratio_zrodlo_over_plain": ratio,
        "throughput_meets_target": ratio["of_medians"] >= 0.95,
        "training_peak_rss_bytes": peak,
        "training_peak_ratio_zrodlo_over_plain": round(peak["zrodlo"] / peak["plain"], 3),
        "memory_meets_target": peak["zrodlo"] <= peak["plain"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--memory-steps", type=int, default=3)
    parser.add_argument("--qwen", action="store_true", help="Qwen2.5-0.5B's shape as well")
    parser.add_argument("--models", help="the shapes to measure, by name, comma-separated")
    parser.add_argument("--report", default="hub_models", help="the report's name")
    parser.add_argument(
        "--child", choices=["save", "logits", "zrodlo", "plain", "together"], help=argparse.SUPPRESS
    )
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    args = parser.parse_args()
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "2")))
    if args.child:
        child(args.child, args.work, args.memory_steps, args.model)
        return
    chosen = ["gpt2_small", *(["qwen2.5_0.5b"] if args.qwen else [])]
    names = args.models.split(",") if args.models else chosen
    results = []
    for name in names:
        together = name in TOGETHER
        with tempfile.TemporaryDirectory() as folder:
            work = Path(folder)
            generate(work / "documents.jsonl", 400_000)
            results.append(compare(name, work, args.repeats, args.memory_steps, together))
    result = {
        "benchmark": "models of a real size: import, and a fine-tuning step against a plain "
        "loop on transformers' own model",
        "batch": BATCH, "context": CONTEXT, "models": results,
        "threads": torch.get_num_threads(), "machine": measure.machine(),
    }  # fmt: skip
    measure.write_report(measure.REPORTS / f"{args.report}.json", result)


if __name__ == "__main__":
    main()

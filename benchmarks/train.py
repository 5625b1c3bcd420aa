"""Training throughput of zrodlo's real training path against a plain PyTorch loop, and checkpoint I/O.

A corpus is prepared with the library from generated documents (97 characters, so vocab 100). At
each size, zrodlo's `Trainer.step` (ChaCha20 window order and dropout masks, target-weighted loss,
gradient norm, AdamW) and a plain loop over `reference.TorchGPT` holding the same initial weights
(batches of windows at torch.randint positions of the same tokens, torch's dropout, cross-entropy,
torch.optim.AdamW with its defaults, which zrodlo's plan here matches) take one step each in turn;
tokens per second count the B*(C-1) positions a step computes. Then `zrodlo model train` runs as a
subprocess for a few steps, alternating with as many plain steps here, its step times read from the
run's timing.csv (its first step, which warms up, left out).

Checkpoint I/O: the medium trainer's model and AdamW state are written with `write_checkpoint` inside
`new_directory` (every file and directory fsynced, then renamed) and read back with
`read_checkpoint`, each in turn with a raw open().write()+fsync / open().read() of the same number
of bytes; cold reads first drop the files from the page cache (posix_fadvise DONTNEED).
Figures go to reports/bench/train.json.

    .venv/bin/python benchmarks/train.py [--repeats 9] [--cli-steps 5] [--threads 1]

--threads sets torch's thread count for both sides and the subprocess (see benchmarks/dropout.py).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import measure
import numpy as np
import torch
import torch.nn.functional as F
from checkpoint_io import against_raw
from reference import TorchGPT

from zrodlo.data.corpus import Corpus
from zrodlo.data.preparation import prepare_corpus
from zrodlo.data.tokenizer.char import CharTokenizer
from zrodlo.draws.chacha import GENERATOR
from zrodlo.model.config import ModelConfig
from zrodlo.model.decoder import build_decoder
from zrodlo.model.directory import Model, write_model
from zrodlo.model.weights import initial_weights
from zrodlo.storage.outputs import new_directory
from zrodlo.training.checkpoint import write_checkpoint
from zrodlo.training.environment import environment
from zrodlo.training.loop import fresh_provenance
from zrodlo.training.plan import RunPlan
from zrodlo.training.score import check_data
from zrodlo.training.step import Trainer

ZRODLO = Path(sys.executable).parent / "zrodlo"
ALPHABET = np.array([chr(c) for c in range(32, 127)] + ["\n", "é"])  # 97 characters
SIZES = {
    "small": {"d_model": 128, "layers": 4, "heads": 4, "d_ff": 512, "context": 128, "batch": 32},
    "medium": {"d_model": 256, "layers": 6, "heads": 8, "d_ff": 1024, "context": 256, "batch": 16},
}
SEED = 20240229
DROPOUT = 0.1
CPU = torch.device("cpu")
# torch.optim.AdamW's defaults, given to zrodlo's plan so both sides make the same update.
ADAMW = {"learning_rate": 1e-3, "beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8, "weight_decay": 0.01}


def generate(path: Path, characters: int) -> None:
    """Write documents of 1,000 to 16,000 characters until they hold `characters` in all."""
    rng = np.random.default_rng(SEED)  # benchmark data only; never part of a training run
    written = 0
    with open(path, "w", encoding="utf-8") as handle:
        while written < characters:
            length = int(rng.integers(1_000, 16_000))
            text = "".join(ALPHABET[rng.integers(0, len(ALPHABET), size=length)])
            handle.write(json.dumps({"id": f"doc-{written}", "text": text}) + "\n")
            written += length


def prepare(work: Path, characters: int) -> tuple[CharTokenizer, Corpus]:
    documents = work / "documents.jsonl"
    generate(documents, characters)
    tokenizer = CharTokenizer.fit(["".join(ALPHABET)])
    (work / "corpus").mkdir()
    prepare_corpus(documents, tokenizer, work / "corpus")
    return tokenizer, Corpus.open(work / "corpus")


def plan_for(size: dict, steps: int) -> RunPlan:
    return RunPlan(
        steps=steps,
        context=size["context"],
        batch_size=size["batch"],
        decay_scope="all",
        seed=SEED,
        precision="f32",
        shuffle=True,
        **ADAMW,
    )


def model_config(size: dict, vocab_size: int) -> ModelConfig:
    return ModelConfig(
        vocab_size=vocab_size,
        positions=size["context"],
        d_model=size["d_model"],
        layers=size["layers"],
        heads=size["heads"],
        d_ff=size["d_ff"],
        dropout=DROPOUT,
        attention_dropout=0.0,
    )


class PlainLoop:
    """The plain PyTorch loop: random windows, torch dropout, mean cross-entropy, default AdamW."""

    def __init__(self, model: TorchGPT, tokens: np.ndarray, size: dict) -> None:
        self.model = model.train()
        self.optimizer = torch.optim.AdamW(model.parameters())
        self.tokens = torch.from_numpy(tokens.astype(np.int64))  # (N,)
        self.batch, self.context = size["batch"], size["context"]
        self.offsets = torch.arange(self.context)  # (C,)

    def step(self) -> None:
        starts = torch.randint(0, len(self.tokens) - self.context + 1, (self.batch,))  # (B,)
        window = self.tokens[starts[:, None] + self.offsets]  # (B, C)
        inputs, targets = window[:, :-1], window[:, 1:]  # (B, C-1) each
        logits = self.model(inputs)  # (B, C-1, vocab)
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))
        loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)


def in_process(
    size_name: str, tokenizer: CharTokenizer, corpus: Corpus, repeats: int
) -> tuple[dict, Trainer, Model]:
    size = SIZES[size_name]
    config = model_config(size, tokenizer.vocab_size)
    model = Model(Path(f"model-{size_name}"), config, tokenizer, initial_weights(config, SEED))
    plan = plan_for(size, 10**6)
    trainer = Trainer.start(
        plan, model, corpus.tokens, check_data(corpus, model, size["context"]), CPU
    )
    plain = PlainLoop(TorchGPT.from_gpt(trainer.model), corpus.tokens, size)
    step_index = iter(range(10**6))
    internal: list[float] = []

    def zrodlo_step() -> float:
        return measure.timed(lambda: internal.append(trainer.step(next(step_index)).seconds))

    variants = {
        "zrodlo_trainer_step": zrodlo_step,
        "plain_pytorch_step": lambda: measure.timed(plain.step),
    }
    measure.interleave(variants, 1)  # warm-up
    internal.clear()
    samples = measure.interleave(variants, repeats)
    positions = size["batch"] * (size["context"] - 1)
    z, p = samples["zrodlo_trainer_step"], samples["plain_pytorch_step"]
    result = {
        "size": size_name,
        "config": config.to_json(),
        "batch_size": size["batch"],
        "context": size["context"],
        "positions_per_step": positions,
        "step": {name: measure.summary(values) for name, values in samples.items()},
        "zrodlo_step_seconds_as_recorded_by_trainer_median": round(statistics.median(internal), 6),
        "tokens_per_second": {
            "zrodlo": round(positions / statistics.median(z)),
            "plain_pytorch": round(positions / statistics.median(p)),
        },
        # tokens/s of zrodlo over the plain loop's is the plain step time over zrodlo's.
        "throughput_ratio_zrodlo_over_plain": measure.ratios(p, z),
    }
    result["meets_target"] = result["throughput_ratio_zrodlo_over_plain"]["of_medians"] >= 0.95
    return result, trainer, model


def through_command(
    size_name: str,
    tokenizer: CharTokenizer,
    corpus: Corpus,
    work: Path,
    steps: int,
    rounds: int,
    threads: int,
) -> dict:
    """`zrodlo model train` in a subprocess, alternating with as many plain-loop steps here."""
    size = SIZES[size_name]
    config = model_config(size, tokenizer.vocab_size)
    weights = initial_weights(config, SEED)
    model_dir = work / f"model-{size_name}"
    model_dir.mkdir()
    write_model(model_dir, config, tokenizer, weights)
    plain = PlainLoop(TorchGPT.from_gpt(build_decoder(config, weights)), corpus.tokens, size)
    plain.step()  # warm-up
    # OMP_NUM_THREADS is read when torch starts: the child runs on the thread count used here.
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    command_steps: list[float] = []
    plain_steps: list[float] = []
    for index in range(rounds):
        run = work / f"run-{size_name}-{index}"
        subprocess.run(
            [
                ZRODLO, "model", "train", "--model", model_dir, "--corpus", corpus.path,
                "--output", run, "--steps", str(steps), "--context", str(size["context"]),
                "--batch-size", str(size["batch"]), "--learning-rate", str(ADAMW["learning_rate"]),
                "--beta1", str(ADAMW["beta1"]), "--beta2", str(ADAMW["beta2"]),
                "--epsilon", str(ADAMW["epsilon"]), "--weight-decay", str(ADAMW["weight_decay"]),
                "--decay-scope", "all", "--seed", str(SEED), "--precision", "f32", "--shuffle",
                "--device", "cpu",
            ],
            check=True,
            capture_output=True,
            env=env,
        )  # fmt: skip
        with open(run / "timing.csv", newline="") as handle:
            seconds = [float(row["seconds"]) for row in csv.DictReader(handle)]
        command_steps += seconds[1:]  # the first step of a fresh process warms up
        shutil.rmtree(run)
        plain_steps += [measure.timed(plain.step) for _ in range(steps - 1)]
    positions = size["batch"] * (size["context"] - 1)
    ratio = measure.ratios(plain_steps, command_steps)
    return {
        "size": size_name,
        "command": f"zrodlo model train --steps {steps} --shuffle (subprocess, OMP_NUM_THREADS={threads})",
        "timing": f"{rounds} runs, each followed by {steps - 1} plain steps in this process; "
        "the command's step seconds from timing.csv, its first step left out",
        "step": {
            "zrodlo_model_train": measure.summary(command_steps),
            "plain_pytorch_step": measure.summary(plain_steps),
        },
        "tokens_per_second": {
            "zrodlo": round(positions / statistics.median(command_steps)),
            "plain_pytorch": round(positions / statistics.median(plain_steps)),
        },
        "throughput_ratio_zrodlo_over_plain": {"of_medians": ratio["of_medians"]},
    }


def checkpoint_io(trainer: Trainer, model: Model, corpus: Corpus, work: Path, repeats: int) -> dict:
    """Write and read the medium trainer's checkpoint, each in turn with raw I/O of as many bytes."""
    state_seconds = measure.timed(lambda: (trainer.weights(), trainer.optimizer_state()))
    weights, state = trainer.weights(), trainer.optimizer_state()
    record = {
        "generator": GENERATOR,
        **fresh_provenance(model, corpus.digest, trainer.plan),
        "hyperparameters": trainer.plan.hyperparameters(),
        "environment": environment(CPU),
        "step": int(max(entry["step"] for entry in trainer.optimizer.state.values())),
    }
    directory = work / "checkpoints"
    directory.mkdir()
    count = iter(range(10**6))

    def write() -> Path:
        # Distinct names that are not step-<n>: the record's step belongs to the trainer, not to
        # the copy a repetition writes.
        path = directory / f"copy-{next(count)}"
        with new_directory(path) as partial:
            write_checkpoint(
                partial, Model(path, model.config, model.tokenizer, weights), state, record
            )
        return path

    return {
        "checkpoint": "medium model + AdamW state after the benchmark's steps",
        "gathering_weights_and_optimizer_state_s": round(state_seconds, 6),
        **against_raw(write, work, repeats),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=9, help="timed steps of each side")
    parser.add_argument("--sizes", nargs="+", choices=sorted(SIZES), default=["small", "medium"])
    parser.add_argument(
        "--cli-steps", type=int, default=5, help="steps a command run makes; 0 skips"
    )
    parser.add_argument("--cli-rounds", type=int, default=2, help="command runs at each size")
    parser.add_argument(
        "--io-repeats", type=int, default=5, help="timed checkpoint writes and reads"
    )
    parser.add_argument("--characters", type=int, default=2_000_000, help="corpus size")
    parser.add_argument("--threads", type=int, default=1, help="torch threads for both sides")
    parser.add_argument("--output", type=Path, default=measure.REPORTS / "train.json")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    facts = measure.machine()
    work = Path(tempfile.mkdtemp(prefix="zrodlo-bench-train-"))
    try:
        tokenizer, corpus = prepare(work, args.characters)
        results, commands, io = [], [], None
        for size in args.sizes:
            result, trainer, model = in_process(size, tokenizer, corpus, args.repeats)
            results.append(result)
            print(
                f"{size}: zrodlo/plain tokens/s {result['throughput_ratio_zrodlo_over_plain']}",
                flush=True,
            )
            if size == "medium":
                io = checkpoint_io(trainer, model, corpus, work, args.io_repeats)
            del trainer, model
            if args.cli_steps > 1:
                commands.append(
                    through_command(
                        size, tokenizer, corpus, work, args.cli_steps, args.cli_rounds, args.threads
                    )
                )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result = {
        "benchmark": "training throughput and checkpoint I/O",
        "target": "zrodlo tokens/s >= 0.95 of the plain PyTorch loop's (in-process ratio is the headline)",
        "timing": f"both sides a step each in turn, {args.repeats} repetitions after 1 warm-up; medians",
        "configuration": {
            "repeats": args.repeats,
            "threads": args.threads,
            "sizes": {name: SIZES[name] for name in args.sizes},
            "dropout": DROPOUT,
            "attention_dropout": 0.0,
            "adamw": ADAMW
            | {"decay_scope": "all", "implementation": "single-tensor (CPU default)"},
            "zrodlo_plan": "shuffle, no clip norm, constant learning rate, no micro-batches",
            "corpus_characters": args.characters,
            "vocab_size": tokenizer.vocab_size,
            "seed": SEED,
            "cli_steps": args.cli_steps,
            "cli_rounds": args.cli_rounds,
            "io_repeats": args.io_repeats,
            "device": "cpu",
            "precision": "f32",
        },
        "in_process": results,
        "command": commands,
        "checkpoint_io": io,
        "machine": facts,
        "load_average_at_end": measure.machine()["load_average_1_5_15"],
    }
    measure.write_report(args.output, result)


if __name__ == "__main__":
    main()

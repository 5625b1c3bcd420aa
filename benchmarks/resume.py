"""Time from the start of `zrodlo checkpoint resume` to its first resumed step, after 10, 1,000 and
20,000 steps of a tiny model: the target is a time that does not grow with the steps done.

A tiny model (d_model 16, one layer) is trained for real with the library's own run loop
(`zrodlo.training.loop.run_updates`, the loop behind `zrodlo model train`) in three segments, 0-10, 10-1,000 and
1,000-20,000, each ending in the checkpoint and run records that a run stopped there leaves; a copy
of the run directory is kept after each. (At a few hundred steps a second, `zrodlo model train`
would take as long and write the same files; its rate is measured and recorded alongside.)

Each resume is the real command in a subprocess, timed from just before it is started until its
first progress line ("step n/total ...") arrives on stdout, in two ways: into a new output
directory (the DVC resume stage) and into a copy of the run directory it was stopped in (continuing
a killed run, which also trims and appends to the run's records). The three checkpoints, both ways,
and a bare interpreter importing what the command imports run in turn in every repetition.
In-process, the same rotation times `read_checkpoint` (MB/s) and the run-directory bookkeeping a
resume into the run directory does. Figures go to reports/bench/resume.json.

    .venv/bin/python benchmarks/resume.py [--repeats 4] [--steps 10 1000 20000] [--threads 1]
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
import time
from pathlib import Path

import measure
import numpy as np
import torch

from zrodlo.data.corpus import Corpus
from zrodlo.data.preparation import prepare_corpus
from zrodlo.data.tokenizer.char import CharTokenizer
from zrodlo.model.config import ModelConfig
from zrodlo.model.directory import write_model
from zrodlo.model.weights import initial_weights
from zrodlo.training.checkpoint import read_checkpoint, read_model
from zrodlo.training.loop import fresh_provenance, run_updates
from zrodlo.training.plan import RunPlan
from zrodlo.training.record import read_record
from zrodlo.training.records import RunLog
from zrodlo.training.score import check_data
from zrodlo.training.step import Trainer

ZRODLO = Path(sys.executable).parent / "zrodlo"
ALPHABET = np.array(list("abcdefghijklmnopqrstuvwxyz ,.;:!?'\n"))
SEED = 20240229
CONTEXT, BATCH = 32, 8
TINY = {"d_model": 16, "layers": 1, "heads": 2, "d_ff": 64, "positions": CONTEXT}
CPU = torch.device("cpu")
# What `zrodlo checkpoint resume` imports before its first step; its start-up floor.
IMPORTS = "import torch, zrodlo.stages.cli, zrodlo.stages.resume, zrodlo.training.loop, zrodlo.training.step"


def prepare(work: Path) -> tuple[Path, Path]:
    """A corpus of 100 generated documents and a model directory of seeded initial weights."""
    rng = np.random.default_rng(SEED)  # benchmark data only; never part of a training run
    documents = work / "documents.jsonl"
    with open(documents, "w", encoding="utf-8") as handle:
        for index in range(100):
            text = "".join(ALPHABET[rng.integers(0, len(ALPHABET), size=2_000)])
            handle.write(json.dumps({"id": f"doc-{index}", "text": text}) + "\n")
    tokenizer = CharTokenizer.fit(["".join(ALPHABET)])
    corpus, model = work / "corpus", work / "model"
    corpus.mkdir()
    prepare_corpus(documents, tokenizer, corpus)
    config = ModelConfig(
        vocab_size=tokenizer.vocab_size, dropout=0.1, attention_dropout=0.0, **TINY
    )
    model.mkdir()
    write_model(model, config, tokenizer, initial_weights(config, SEED))
    return corpus, model


def plan(steps: int, **writes) -> RunPlan:
    return RunPlan(
        steps=steps,
        context=CONTEXT,
        batch_size=BATCH,
        learning_rate=1e-3,
        beta1=0.9,
        beta2=0.999,
        epsilon=1e-8,
        weight_decay=0.01,
        decay_scope="all",
        seed=SEED,
        precision="f32",
        shuffle=True,
        **writes,
    )


def build_runs(corpus_dir: Path, model_dir: Path, work: Path, stops: list[int]) -> dict:
    """Train through every stop with zrodlo.training.loop.run_updates, keeping a copy of the run at each stop."""
    model, corpus = read_model(model_dir), Corpus.open(corpus_dir)
    table = check_data(corpus, model, CONTEXT)
    trainer = Trainer.start(plan(stops[-1]), model, corpus.tokens, table, CPU)
    provenance = fresh_provenance(model, corpus.digest, plan(stops[-1]))
    live = work / "live"
    done = 0
    started = time.perf_counter()
    for stop in stops:
        run_updates(trainer, plan(stop), done, live, model, provenance)
        shutil.copytree(live, work / f"run-{stop}")
        done = stop
    seconds = time.perf_counter() - started
    shutil.rmtree(live)
    return {
        "steps": stops[-1],
        "seconds": round(seconds, 3),
        "steps_per_second": round(stops[-1] / seconds),
    }


def command_rate(corpus: Path, model: Path, work: Path, steps: int, env: dict) -> dict:
    """Steps a second of `zrodlo model train` on the tiny model, from its timing.csv."""
    run = work / "command-rate"
    started = time.perf_counter()
    subprocess.run(
        [
            ZRODLO, "model", "train", "--model", model, "--corpus", corpus, "--output", run,
            "--steps", str(steps), "--context", str(CONTEXT), "--batch-size", str(BATCH),
            "--learning-rate", "1e-3", "--beta1", "0.9", "--beta2", "0.999", "--epsilon", "1e-8",
            "--weight-decay", "0.01", "--decay-scope", "all", "--seed", str(SEED),
            "--precision", "f32", "--shuffle", "--device", "cpu",
        ],
        check=True,
        capture_output=True,
        env=env,
    )  # fmt: skip
    wall = time.perf_counter() - started
    with open(run / "timing.csv", newline="") as handle:
        step_seconds = sum(float(row["seconds"]) for row in csv.DictReader(handle))
    shutil.rmtree(run)
    return {
        "steps": steps,
        "wall_seconds": round(wall, 3),
        "steps_per_second_in_steps": round(steps / step_seconds),
        "steps_per_second_wall": round(steps / wall),
    }


def time_to_first_step(arguments: list, env: dict) -> tuple[float, float]:
    """Seconds from starting the command until its first progress line, and until it exits."""
    started = time.perf_counter()
    child = subprocess.Popen(
        [ZRODLO, *arguments], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    first = None
    for line in child.stdout:
        if line.startswith("step "):
            first = time.perf_counter() - started
            break
    _, errors = child.communicate()
    total = time.perf_counter() - started
    if child.returncode != 0 or first is None:
        raise SystemExit(f"zrodlo {' '.join(map(str, arguments))} failed: {errors}")
    return first, total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=4, help="timed resumes of each kind")
    parser.add_argument("--steps", type=int, nargs="+", default=[10, 1_000, 20_000])
    parser.add_argument("--threads", type=int, default=1, help="torch threads of the run")
    parser.add_argument("--output", type=Path, default=measure.REPORTS / "resume.json")
    args = parser.parse_args()
    stops = sorted(args.steps)
    torch.set_num_threads(args.threads)
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads)}
    facts = measure.machine()
    work = Path(tempfile.mkdtemp(prefix="zrodlo-bench-resume-"))
    try:
        corpus, model = prepare(work)
        rate = command_rate(corpus, model, work, 300, env)
        build = build_runs(corpus, model, work, stops)
        print(f"built checkpoints at {stops}: {build}", flush=True)
        checkpoint = {n: work / f"run-{n}" / f"step-{n}" for n in stops}
        fresh = iter(range(10**6))

        def into_new_directory(n: int) -> float:
            output = work / f"resumed-{next(fresh)}"
            first, _ = time_to_first_step(
                ["checkpoint", "resume", "--checkpoint", checkpoint[n], "--corpus", corpus,
                 "--output", output, "--steps", str(n + 1), "--device", "cpu"],
                env,
            )  # fmt: skip
            shutil.rmtree(output)
            return first

        def into_run_directory(n: int) -> float:
            run = work / f"again-{next(fresh)}"
            shutil.copytree(work / f"run-{n}", run)
            first, _ = time_to_first_step(
                ["checkpoint", "resume", "--checkpoint", run / f"step-{n}", "--corpus", corpus,
                 "--output", run, "--steps", str(n + 1), "--device", "cpu"],
                env,
            )  # fmt: skip
            shutil.rmtree(run)
            return first

        def bookkeeping(n: int) -> float:
            """What a resume into its run directory does to the run's records, in-process."""
            run = work / f"records-{next(fresh)}"
            shutil.copytree(work / f"run-{n}", run)
            files = read_record(run / f"step-{n}")["files"]

            def action() -> None:
                log = RunLog(run, n)
                log.continue_from(n, files)
                log.close()

            seconds = measure.timed(action)
            shutil.rmtree(run)
            return seconds

        def imports() -> float:
            return measure.timed(
                lambda: subprocess.run([sys.executable, "-c", IMPORTS], check=True, env=env)
            )

        variants = {"import_floor": imports}
        for n in stops:
            variants[f"new_directory_{n}"] = lambda n=n: into_new_directory(n)
            variants[f"run_directory_{n}"] = lambda n=n: into_run_directory(n)
            variants[f"read_checkpoint_{n}"] = lambda n=n: measure.timed(
                lambda: read_checkpoint(checkpoint[n])
            )
            variants[f"run_records_{n}"] = lambda n=n: bookkeeping(n)
        samples = measure.interleave(variants, args.repeats)
        sizes = {n: sum(p.stat().st_size for p in checkpoint[n].iterdir()) for n in stops}
        ledger_lines = {
            n: len((work / f"run-{n}" / "ledger.jsonl").read_text(encoding="utf-8").splitlines())
            for n in stops
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)

    def median(name: str) -> float:
        return statistics.median(samples[name])

    first, last = stops[0], stops[-1]
    result = {
        "benchmark": "checkpoint resume: time to the first resumed step",
        "target": f"flat: the time after {last} steps no longer than after {first}",
        "timing": "wall time from starting `zrodlo checkpoint resume` to its first progress line "
        f"on stdout; every kind in turn, {args.repeats} repetitions; medians",
        "configuration": {
            "steps_done": stops,
            "repeats": args.repeats,
            "threads": args.threads,
            "model": TINY | {"dropout": 0.1, "attention_dropout": 0.0},
            "context": CONTEXT,
            "batch_size": BATCH,
            "resume_to": "one step past the checkpoint (--steps n+1)",
            "seed": SEED,
            "device": "cpu",
        },
        "build": {
            "method": "zrodlo.training.loop.run_updates in-process, one trainer, segments ending at each stop",
            **build,
            "zrodlo_model_train_rate": rate,
        },
        "import_floor": measure.summary(samples["import_floor"]) | {"imports": IMPORTS},
        "new_directory": {str(n): measure.summary(samples[f"new_directory_{n}"]) for n in stops},
        "run_directory": {str(n): measure.summary(samples[f"run_directory_{n}"]) for n in stops},
        "ratio_to_first": {
            kind: {
                str(n): measure.ratios(samples[f"{kind}_{n}"], samples[f"{kind}_{first}"])
                for n in stops[1:]
            }
            for kind in ("new_directory", "run_directory")
        },
        "above_import_floor_s": {
            kind: {str(n): round(median(f"{kind}_{n}") - median("import_floor"), 4) for n in stops}
            for kind in ("new_directory", "run_directory")
        },
        "run_records_in_process": {
            "what": "RunLog(run, done) and continue_from on a copy of the run directory",
            "ledger_lines": {str(n): ledger_lines[n] for n in stops},
            "seconds": {str(n): measure.summary(samples[f"run_records_{n}"]) for n in stops},
        },
        "read_checkpoint": {
            str(n): {
                "bytes": sizes[n],
                "median_s": round(median(f"read_checkpoint_{n}"), 6),
                "megabytes_per_second": round(sizes[n] / median(f"read_checkpoint_{n}") / 1e6, 2),
            }
            for n in stops
        },
        "machine": facts,
        "load_average_at_end": measure.machine()["load_average_1_5_15"],
    }
    measure.write_report(args.output, result)


if __name__ == "__main__":
    main()

"""Zrodlo on corpora of growing size: does memory or start-up grow with the corpus?

For generated corpora of --sizes megabytes of text (100 and 5,000 by default), the real commands
in subprocesses, one after another:
- `zrodlo corpus prepare`: characters per second and peak resident memory (the documents are
  benchmarks/prepare.py's, 10% of their characters outside ASCII);
- `zrodlo model train` of a tiny model for a few steps: peak resident memory and the seconds
  from starting the command to its first progress line ("step 1/...");
- `zrodlo checkpoint resume` of that run: the same two figures;
- `zrodlo model evaluate` of the whole corpus: peak resident memory over its first --evaluate-seconds
  of scoring (it is stopped there: scoring five billion tokens takes hours), and how far it got.
Peak resident memory counts the corpus pages a process has mapped, as the kernel does. Figures go
to reports/bench/scale.json with the ratios of the largest size to the smallest.

    .venv/bin/python benchmarks/scale.py [--sizes 100 5000] [--keep /path/for/the/corpora]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from prepare import generate_apart  # numpy only: this process stays small

# `measure` imports torch: this process stays small until the end, because a child's peak
# resident memory as the kernel reports it starts from its parent's size when it was started.
ROOT = Path(__file__).resolve().parent.parent
ZRODLO = Path(sys.executable).parent / "zrodlo"
CONTEXT = 65
TINY = ["--layers", "1", "--heads", "1", "--d-model", "16", "--d-ff", "32", "--positions", "64",
        "--dropout", "0.1", "--seed", "1"]  # fmt: skip
TRAIN = ["--context", str(CONTEXT), "--batch-size", "16", "--learning-rate", "0.001",
         "--beta1", "0.9", "--beta2", "0.99", "--epsilon", "1e-8", "--weight-decay", "0.1",
         "--decay-scope", "matrices", "--seed", "1", "--precision", "f32", "--device", "cpu",
         "--shuffle", "--threads", "1", "--checkpoint-every", "1"]  # fmt: skip


def peak_of(pid: int) -> int:
    """The peak resident memory (VmHWM) of a running process, in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def run(args: list[object], first_line: str | None = None, stop_after: float | None = None) -> dict:
    """Run the real command; its seconds, peak memory, exit status, and the seconds until a line
    of its stdout first starts with `first_line`. With `stop_after`, it is stopped after that
    many seconds and its peak read just before."""
    started = time.perf_counter()
    child = subprocess.Popen([ZRODLO, *map(str, args)], stdout=subprocess.PIPE, text=True)
    result: dict = {}
    if first_line is not None:
        for line in child.stdout:
            if line.startswith(first_line):
                result["seconds_to_first_step"] = round(time.perf_counter() - started, 3)
                break
    if stop_after is not None:
        peak = 0
        while child.poll() is None and time.perf_counter() - started < stop_after:
            peak = max(peak, peak_of(child.pid))
            time.sleep(0.2)
        stopped = child.poll() is None
        if stopped:
            child.terminate()
        child.communicate()
        return {"seconds": round(time.perf_counter() - started, 3), "peak_rss_bytes": peak,
                "stopped": stopped}  # fmt: skip
    child.stdout.read()
    _, status, usage = os.wait4(child.pid, 0)
    if status != 0:
        raise SystemExit(f"zrodlo {' '.join(map(str, args[:2]))} failed with status {status}")
    result.update(seconds=round(time.perf_counter() - started, 3))
    result["peak_rss_bytes"] = usage.ru_maxrss * 1024  # kilobytes on Linux
    return result


def measure_size(work: Path, megabytes: int) -> dict:
    root = work / f"{megabytes}MB"
    root.mkdir()
    documents, sample = root / "documents.jsonl", root / "sample.jsonl"
    count, characters = generate_apart(documents, megabytes, sample)
    tokenizer, corpus, model = root / "tokenizer", root / "corpus", root / "model"
    for args in (
        ["tokenizer", "fit", "--documents", sample, "--output", tokenizer],
        ["model", "init", "--tokenizer", tokenizer, "--output", model, *TINY],
    ):
        run(args)
    prepare = run(["corpus", "prepare", "--documents", documents, "--tokenizer", tokenizer,
                   "--output", corpus])  # fmt: skip
    prepare["characters_per_second"] = round(characters / prepare["seconds"])
    steps = ["--steps", "3"]
    train = run(["model", "train", "--model", model, "--corpus", corpus, "--output", root / "run",
                 *steps, *TRAIN], first_line="step 1/")  # fmt: skip
    resume = run(["checkpoint", "resume", "--checkpoint", root / "run/step-2", "--corpus", corpus,
                  "--output", root / "resumed", "--steps", "4", "--device", "cpu"],
                 first_line="step 3/")  # fmt: skip
    evaluate = run(["model", "evaluate", "--model", root / "run/step-3", "--corpus", corpus,
                    "--context", CONTEXT, "--output", root / "metrics.json"],
                   stop_after=ARGS.evaluate_seconds)  # fmt: skip
    return {
        "text_megabytes": megabytes,
        "documents": count,
        "characters": characters,
        "tokens_bytes": (corpus / "tokens.bin").stat().st_size,
        "prepare": prepare,
        "train": train,
        "resume": resume,
        "evaluate": evaluate,
    }


def ratios(small: dict, large: dict) -> dict:
    """Largest size over smallest, for every figure the targets speak of."""
    out = {
        "prepare_peak_rss": large["prepare"]["peak_rss_bytes"] / small["prepare"]["peak_rss_bytes"]
    }
    for command in ("train", "resume", "evaluate"):
        out[f"{command}_peak_rss"] = (
            large[command]["peak_rss_bytes"] / small[command]["peak_rss_bytes"]
        )
    for command in ("train", "resume"):
        out[f"{command}_seconds_to_first_step"] = (
            large[command]["seconds_to_first_step"] / small[command]["seconds_to_first_step"]
        )
    return {name: round(value, 3) for name, value in out.items()}


def main() -> None:
    work = ARGS.keep or Path(tempfile.mkdtemp(prefix="zrodlo-bench-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        sizes = [measure_size(work, megabytes) for megabytes in ARGS.sizes]
    finally:
        if ARGS.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    from measure import machine, write_report

    write_report(
        ARGS.output,
        {
            "benchmark": "corpora of growing size",
            "command": "real zrodlo commands in subprocesses, run one after another",
            "sizes": sizes,
            "largest_over_smallest": ratios(sizes[0], sizes[-1]),
            "machine": machine(),
        },
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 5000])
    parser.add_argument("--evaluate-seconds", type=float, default=60.0)
    parser.add_argument("--keep", type=Path)
    parser.add_argument("--output", type=Path, default=ROOT / "reports/bench/scale.json")
    ARGS = parser.parse_args()
    main()

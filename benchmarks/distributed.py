"""What data-parallel training costs: tokens/s at 1, 2 and 4 processes, and the exact reduction
against the all_reduce torch's DDP makes, on the small and medium sizes, one thread a process.

Each variant is `distributed_worker.py` started by torchrun on 127.0.0.1 (gloo over loopback) for a
few steps of `Trainer.step`, the real training step: `exact` with Zrodlo's ordered chain, `all_reduce`
with the same step whose gradient sum is one all_reduce of each rank's own micro-batch sum (DDP's
reduction: the ranks' sums added in the order gloo's ring picks). Variants run in turn, one
repetition each (A B A B ...), so that the load on a shared machine falls on all alike; figures are
medians over the repetitions of each run's median step (its first step, which warms up, left out).
Bytes sent per rank per step are read from the loopback interface's counters (/proc/net/dev), so
they include the rendezvous and are an upper bound. Memory per rank is each worker's peak RSS.
Figures go to reports/bench/distributed.json.

    .venv/bin/python benchmarks/distributed.py [--repeats 3] [--steps 6] [--sizes small medium]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import measure
from prepare import generate

from zrodlo.data.documents import read_documents
from zrodlo.data.preparation import prepare_corpus
from zrodlo.data.tokenizer.char import CharTokenizer

# The sizes of benchmarks/train.py, with micro-batches that 1, 2 and 4 processes divide.
SIZES = {
    "small": {"d_model": 128, "layers": 4, "heads": 4, "d_ff": 512, "context": 128, "batch": 32,
              "micro_batch": 8},
    "medium": {"d_model": 256, "layers": 6, "heads": 8, "d_ff": 1024, "context": 256, "batch": 16,
               "micro_batch": 4},
}  # fmt: skip
WORKER = Path(__file__).parent / "distributed_worker.py"
TORCHRUN = Path(sys.executable).parent / "torchrun"


def loopback_bytes() -> int:
    for line in Path("/proc/net/dev").read_text().splitlines():
        name, _, counters = line.partition(":")
        if name.strip() == "lo":
            return int(counters.split()[8])  # bytes transmitted
    return 0


def run_variant(
    work: Path, size: str, processes: int, reduction: str, steps: int
) -> dict[str, float]:
    result = work / f"{size}-{processes}-{reduction}.json"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "GLOO_SOCKET_IFNAME": "lo"}
    config = json.dumps({**SIZES[size], "steps": steps, "reduction": reduction})
    sent = loopback_bytes()
    subprocess.run(
        [str(TORCHRUN), "--standalone", "--nproc-per-node", str(processes), str(WORKER),
         str(work / "corpus"), config, str(result)],
        env=env, check=True, capture_output=True, text=True, cwd=work,
    )  # fmt: skip
    sent = loopback_bytes() - sent
    figures = json.loads(result.read_text())
    figures["loopback_bytes_per_rank_step"] = sent / processes / steps
    figures["sent_over_gradient"] = (
        figures["loopback_bytes_per_rank_step"] / figures["gradient_bytes"]
    )
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--sizes", nargs="+", choices=sorted(SIZES), default=["small", "medium"])
    parser.add_argument("--output", type=Path, default=measure.REPORTS / "distributed.json")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="zrodlo-bench-distributed-"))
    source = work / "documents.jsonl"
    generate(source, 2)
    tokenizer = CharTokenizer.fit(document.text for document in read_documents(source))
    (work / "corpus").mkdir()
    (work / "tokenizer").mkdir()
    tokenizer.save(work / "tokenizer")
    prepare_corpus(source, tokenizer, work / "corpus")

    variants = [(1, "exact"), (2, "exact"), (4, "exact"), (2, "all_reduce"), (4, "all_reduce")]
    sizes = {}
    for size in args.sizes:
        runs: dict[str, list[dict]] = {f"{p} {r}": [] for p, r in variants}
        for _ in range(args.repeats):
            for processes, reduction in variants:
                figures = run_variant(work, size, processes, reduction, args.steps)
                runs[f"{processes} {reduction}"].append(figures)
        medians = {
            name: {
                key: statistics.median(figure[key] for figure in figures)
                for key in figures[0]
                if isinstance(figures[0][key], (int, float))
            }
            for name, figures in runs.items()
        }
        alone = medians["1 exact"]["tokens_per_second"]
        sizes[size] = {
            "variants": medians,
            "speedup_2_processes": medians["2 exact"]["tokens_per_second"] / alone,
            "speedup_4_processes": medians["4 exact"]["tokens_per_second"] / alone,
            "exact_over_all_reduce_2": medians["2 exact"]["tokens_per_second"]
            / medians["2 all_reduce"]["tokens_per_second"],
            "exact_over_all_reduce_4": medians["4 exact"]["tokens_per_second"]
            / medians["4 all_reduce"]["tokens_per_second"],
        }
    report = {
        "benchmark": "data-parallel training: processes and the exact reduction",
        "repeats": args.repeats,
        "steps": args.steps,
        "sizes": {name: SIZES[name] for name in args.sizes},
        "results": sizes,
        "machine": measure.machine(),
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(report["results"], indent=2))


if __name__ == "__main__":
    main()

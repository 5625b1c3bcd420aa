"""Fitting a byte-level BPE on hostile documents, against the trainer it replaced.

Cases, each fitted (GPT-2's split, then the merges) in a process of its own: the seconds of those
two steps (and of each), and the process's peak resident memory:

- letters: one document of 200 KB of random letters without a space (a single piece), 1,024 tokens;
- code points: one document of every Unicode code point but the surrogates (4.4 MB), 4,096 tokens;
- run of a: one document of 50 MB of the letter `a` (one piece, every pair overlapping), 1,024;
- Python source: 2 MB of the standard library's .py files as documents (ordinary text), 1,024.

With --before REV, the same cases run on `src/zrodlo/data/tokenizer/bpe_training.py` as it was at
git revision REV (copied out and imported by path), each stopped after --timeout seconds. Figures
go to reports/bench/bpe_fit.json.

    .venv/bin/python benchmarks/bpe_fit.py [--before REV] [--timeout 300] [--cases letters ...]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import measure

TRAINER = measure.ROOT / "src/zrodlo/data/tokenizer/bpe_training.py"
CASES = {
    "letters": ("200 KB of letters without a space, 1,024 tokens", 1024),
    "code_points": ("every Unicode code point (4.4 MB), 4,096 tokens", 4096),
    "run_of_a": ("50 MB of the letter a, 1,024 tokens", 1024),
    "python_source": ("2 MB of Python source (ordinary text), 1,024 tokens", 1024),
}

# The child: builds the case's documents, imports the trainer from a file, splits and fits (its
# seconds, those two steps alone), and prints its figures.
_CHILD = """
import importlib.util, json, random, sys, sysconfig, time
from pathlib import Path
path, case, vocab_size = sys.argv[1], sys.argv[2], int(sys.argv[3])
spec = importlib.util.spec_from_file_location("trainer", path)
trainer = importlib.util.module_from_spec(spec)
spec.loader.exec_module(trainer)
if case == "letters":
    texts = ["".join(random.Random(0).choices("abcdefghijklmnopqrstuvwxyz", k=200_000))]
elif case == "code_points":
    texts = ["".join(chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000)]
elif case == "run_of_a":
    texts = ["a" * 50_000_000]
else:
    texts, size = [], 0
    for source in sorted(Path(sysconfig.get_paths()["stdlib"]).rglob("*.py")):
        text = source.read_text(encoding="utf-8", errors="replace")
        texts.append(text)
        size += len(text.encode())
        if size >= 2_000_000:
            break
started = time.perf_counter()
counts = trainer.count_pieces(texts)
split = time.perf_counter() - started
merges = trainer.fit_merges(counts, vocab_size - 258)  # after BOS, EOS and the 256 bytes
print(json.dumps({
    "text_megabytes": round(sum(len(t.encode()) for t in texts) / 1e6, 2),
    "distinct_piece_bytes": sum(map(len, counts)),
    "merges": len(merges),
    "split_seconds": round(split, 2),
    "fit_seconds": round(time.perf_counter() - started - split, 2),
    "seconds": round(time.perf_counter() - started, 2),
}))
"""


# Runs the child under a timeout and prints its output and its peak RSS (KiB): a fresh, small
# process's RUSAGE_CHILDREN holds the child alone (a child's own peak would count the resident
# set of the process that forked it, this benchmark's, torch and all).
_PEAK = """
import json, resource, subprocess, sys
try:
    done = subprocess.run(sys.argv[2:], check=True, capture_output=True, text=True,
                          timeout=float(sys.argv[1]))
except subprocess.TimeoutExpired:
    print(json.dumps(None))
else:
    figures = json.loads(done.stdout)
    figures["peak_rss_mib"] = round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1)
    print(json.dumps(figures))
"""


def fitted(trainer: Path, case: str, vocab_size: int, timeout: int) -> dict | str:
    """The case fitted by `trainer` in a process of its own: its figures, with its wall seconds;
    or, where it ran past `timeout`, a sentence saying so."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", _PEAK, str(timeout), sys.executable, "-c", _CHILD, trainer, case,
         str(vocab_size)], capture_output=True, text=True, check=True,
    )  # fmt: skip
    figures = json.loads(done.stdout)
    if figures is None:
        return f"killed at {timeout} s"
    return {"wall_seconds": round(time.perf_counter() - started, 2), **figures}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", help="git revision of the trainer to compare against")
    parser.add_argument("--timeout", type=int, default=300)
    parser.add_argument("--cases", nargs="+", choices=sorted(CASES), default=list(CASES))
    args = parser.parse_args()
    cases = {}
    with tempfile.TemporaryDirectory() as folder:
        before = Path(folder) / "bpe_training_before.py"
        if args.before:
            source = f"{args.before}:{TRAINER.relative_to(measure.ROOT)}"
            before.write_bytes(subprocess.run(["git", "show", source], check=True,
                                              capture_output=True, cwd=measure.ROOT).stdout)  # fmt: skip
        for name in args.cases:
            what, vocab_size = CASES[name]
            after = fitted(TRAINER, name, vocab_size, args.timeout)
            earlier = fitted(before, name, vocab_size, args.timeout) if args.before else None
            cases[name] = {"what": what, "vocab_size": vocab_size, "after": after,
                           "before": earlier or "not measured"}  # fmt: skip
            print(name, json.dumps(cases[name]), flush=True)
    report = {
        "benchmark": "byte-level BPE fit on hostile documents, before and after",
        "trainer_before": args.before or "not measured",
        "timeout_seconds": args.timeout,
        "cases": cases,
        "machine": measure.machine(),
    }
    measure.write_report(measure.REPORTS / "bpe_fit.json", report)


if __name__ == "__main__":
    main()

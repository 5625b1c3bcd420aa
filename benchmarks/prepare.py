"""Throughput and peak memory of `zrodlo corpus prepare` on a generated documents file.

Writes a JSONL of at least --megabytes MB (documents of 1 to 64 KB of text over a 100-character
alphabet with some non-ASCII), fits a tokenizer on a slice of it, runs the real `zrodlo corpus
prepare` in a subprocess and records characters per second and the child's peak resident memory
against the input size. Figures go to reports/bench/prepare.json.

    .venv/bin/python benchmarks/prepare.py [--megabytes 512]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
ZRODLO = Path(sys.executable).parent / "zrodlo"
ALPHABET = np.array(
    list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .,;:!?()-'\n")
    + list("éàüßλπ—…"),
)


# Each character of ALPHABET as a JSON string holds it (UTF-8, a line break escaped), end to end.
_ENCODED = [json.dumps(str(c), ensure_ascii=False)[1:-1].encode("utf-8") for c in ALPHABET]
_TABLE = np.frombuffer(b"".join(_ENCODED), dtype=np.uint8)
_LENGTHS = np.array([len(e) for e in _ENCODED], dtype=np.int64)
_STARTS = np.cumsum(_LENGTHS) - _LENGTHS


def generate(path: Path, megabytes: int) -> tuple[int, int]:
    """Write documents until the file holds `megabytes` MB; return (documents, characters).

    The text is drawn as alphabet indices and turned into the bytes of a JSON string with array
    operations (each index gathers its character's encoded bytes), so gigabytes take seconds."""
    rng = np.random.default_rng(0)  # benchmark data only; never part of a training run
    target = megabytes * 1_000_000
    written = documents = characters = 0
    with open(path, "wb") as handle:
        while written < target:
            lengths = rng.integers(1_000, 64_000, size=256)  # characters of each document
            chosen = rng.integers(0, len(ALPHABET), size=int(lengths.sum()))
            sizes = _LENGTHS[chosen]  # bytes of each character
            before = np.cumsum(sizes) - sizes
            gather = np.repeat(_STARTS[chosen] - before, sizes) + np.arange(int(sizes.sum()))
            text = _TABLE[gather].tobytes()
            ends = np.cumsum(sizes)[np.cumsum(lengths) - 1].tolist()  # byte end of each document
            lines = []
            for start, end in zip([0, *ends[:-1]], ends, strict=True):
                lines.append(b'{"id": "doc-%d", "text": "%s"}\n' % (documents, text[start:end]))
                documents += 1
            block = b"".join(lines)
            handle.write(block)
            written += len(block)
            characters += int(lengths.sum())
    return documents, characters


def generate_apart(source: Path, megabytes: int, sample: Path) -> tuple[int, int]:
    """`generate` in a child process, and the first 64 documents copied to `sample` (to fit a
    tokenizer on). A child's peak RSS starts from its parent's size at fork, so the parent stays
    small to keep the measured peak that of the command alone."""
    generated = subprocess.run(
        [sys.executable, __file__, "--megabytes", str(megabytes), "--generate-into", source],
        check=True,
        capture_output=True,
        text=True,
    )
    with open(source, "rb") as full, open(sample, "wb") as head:
        for _, line in zip(range(64), full, strict=False):
            head.write(line)
    return tuple(json.loads(generated.stdout))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=int, default=512)
    parser.add_argument("--output", type=Path, default=ROOT / "reports/bench/prepare.json")
    parser.add_argument("--generate-into", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.generate_into:
        print(json.dumps(generate(args.generate_into, args.megabytes)))
        return
    work = Path(tempfile.mkdtemp(prefix="zrodlo-bench-prepare-"))
    try:
        source, sample = work / "documents.jsonl", work / "sample.jsonl"
        documents, characters = generate_apart(source, args.megabytes, sample)
        subprocess.run(
            [ZRODLO, "tokenizer", "fit", "--documents", sample, "--output", work / "tok"],
            check=True,
            capture_output=True,
        )
        started = time.perf_counter()
        child = subprocess.Popen(
            [
                ZRODLO,
                "corpus",
                "prepare",
                "--documents",
                source,
                "--tokenizer",
                work / "tok",
                "--output",
                work / "corpus",
            ],
            stdout=subprocess.DEVNULL,
        )
        _, status, usage = os.wait4(child.pid, 0)
        seconds = time.perf_counter() - started
        if status != 0:
            raise SystemExit(f"zrodlo corpus prepare failed with status {status}")
        peak_bytes = usage.ru_maxrss * 1024  # this child's own peak, in kilobytes on Linux
        input_bytes = source.stat().st_size
        result = {
            "benchmark": "corpus prepare",
            "command": "zrodlo corpus prepare (subprocess, includes interpreter start-up)",
            "input_bytes": input_bytes,
            "documents": documents,
            "characters": characters,
            "seconds": round(seconds, 3),
            "characters_per_second": round(characters / seconds),
            "peak_rss_bytes": peak_bytes,
            "peak_rss_over_input": round(peak_bytes / input_bytes, 4),
            "machine": {
                "python": platform.python_version(),
                "processor": platform.machine(),
                "cpus": os.cpu_count(),
            },
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()

"""The byte-level BPE's cost: fitting it, and preparing a corpus with it against the tokenizers
library's own batch encoding of the same text on the same threads.

Text: the Python standard library's and its installed packages' .py files in path order, as
documents, up to --megabytes (real text nobody here wrote), and the default training pool (the
torch docstrings, made here from the pinned torch as the pipeline makes them).

- fit: `zrodlo tokenizer fit --kind bpe` on the default pool at each of --vocab-sizes, and on the
  large text at the first of them, each in a process of its own: seconds and peak memory (RSS).
- prepare: `zrodlo corpus prepare` of the large text with that tokenizer, alternating with
  `Tokenizer.encode_batch_fast` over the same documents in batches of the same size (the library
  alone, nothing written or hashed), --repeats times each: megabytes a second and their ratio.

Figures go to reports/bench/bpe.json.

    .venv/bin/python benchmarks/bpe.py [--megabytes 100] [--vocab-sizes 1024 4096] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

import measure

from zrodlo import api
from zrodlo.data.documents import batched, read_documents
from zrodlo.data.preparation import _BATCH_CHARACTERS
from zrodlo.data.tokenizer import load_tokenizer

ZRODLO = Path(sys.executable).parent / "zrodlo"


def python_sources(output: Path, megabytes: int) -> int:
    """Write the .py files under the standard library's folder as documents, up to `megabytes` of
    text; their UTF-8 bytes."""
    written = 0
    with output.open("w", encoding="utf-8") as sink:
        for path in sorted(Path(sysconfig.get_paths()["stdlib"]).rglob("*.py")):
            try:
                text = path.read_text(encoding="utf-8")
            except (UnicodeDecodeError, OSError):
                continue
            if not text:
                continue
            sink.write(json.dumps({"id": str(path), "text": text}, ensure_ascii=False) + "\n")
            written += len(text.encode())
            if written >= megabytes * 1_000_000:
                break
    return written


# Runs a command as its own child and prints that child's peak RSS (KiB): a fresh process's
# RUSAGE_CHILDREN holds that command alone (its largest process, the encoding child included).
_PEAK = (
    "import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True, "
    "capture_output=True); print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
)


def in_a_process(*args: object) -> dict:
    """Run `zrodlo args` alone: its seconds and its peak resident memory."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", _PEAK, ZRODLO, *map(str, args)], check=True, capture_output=True,
        text=True,
    )  # fmt: skip
    seconds = time.perf_counter() - started
    return {"wall_seconds": round(seconds, 2), "peak_rss_mib": round(int(done.stdout) / 1024, 1)}


def library_encoding(documents: Path, tokenizer: Path) -> float:
    """Seconds the tokenizers library takes to encode the documents, batch by batch."""
    library = load_tokenizer(tokenizer).library
    seconds = 0.0
    for batch in batched(read_documents(documents), _BATCH_CHARACTERS):
        texts = [document.text for document in batch]
        started = time.perf_counter()
        library.encode_batch_fast(texts, add_special_tokens=False)
        seconds += time.perf_counter() - started
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=int, default=100)
    parser.add_argument("--vocab-sizes", type=int, nargs="+", default=[1024, 4096])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        large = root / "large.jsonl"
        text_bytes = python_sources(large, args.megabytes)
        pool = root / "torch-docs.jsonl"
        api.torch_docs(pool)
        fits = {}
        for size in args.vocab_sizes:
            fits[f"default_pool_{size}"] = in_a_process(
                "tokenizer", "fit", "--documents", pool, "--output", root / f"tok-{size}",
                "--kind", "bpe", "--vocab-size", size,
            )  # fmt: skip
        tokenizer = root / "tok-large"
        fits[f"large_{args.vocab_sizes[0]}"] = in_a_process(
            "tokenizer", "fit", "--documents", large, "--output", tokenizer, "--kind", "bpe",
            "--vocab-size", args.vocab_sizes[0],
        )  # fmt: skip
        prepare, library = [], []
        for turn in range(args.repeats):
            corpus = root / f"corpus-{turn}"
            prepared = in_a_process(
                "corpus", "prepare", "--documents", large, "--tokenizer", tokenizer,
                "--output", corpus,
            )  # fmt: skip
            prepare.append(prepared["wall_seconds"])
            library.append(library_encoding(large, tokenizer))
        peak = prepared["peak_rss_mib"]
    megabytes = text_bytes / 1e6
    report = {
        "benchmark": "byte-level BPE: fit and corpus preparation against the tokenizers library",
        "large_text_megabytes": round(megabytes, 1),
        "fit": fits,
        "prepare": {
            "zrodlo_prepare": measure.summary(prepare),
            "library_encode_batch": measure.summary(library),
            "megabytes_per_second": {
                "zrodlo_prepare": round(megabytes / min(prepare), 2),
                "library_encode_batch": round(megabytes / min(library), 2),
            },
            "share_of_library": measure.ratios(library, prepare),
            "peak_rss_mib": peak,
        },
        "machine": measure.machine(),
    }
    measure.write_report(measure.REPORTS / "bpe.json", report)


if __name__ == "__main__":
    main()

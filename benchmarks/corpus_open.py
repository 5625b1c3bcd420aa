"""Opening a corpus, and its verifying pass, on a corpus of about 100 M tokens.

Every train, resume and evaluate opens its corpora with `Corpus.open`, which checks corpus.json
against its own digest and documents.arrow against its sha256 and maps tokens.bin; one pass over
tokens.bin then checks its sha256, computes the content digest again and finds the largest token
(on a second thread for a corpus this size, while the run steps). This prepares a generated corpus
of --megabytes MB of text and times, side by side and in turn: the open alone, the open and its
pass, and the sha256 of tokens.bin alone (what reading the file costs at the least). Figures go to
reports/bench/corpus_open.json.

    .venv/bin/python benchmarks/corpus_open.py [--megabytes 100] [--repeats 5]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

import measure
from prepare import generate

from zrodlo.data.corpus import TOKENS_FILE, Corpus
from zrodlo.data.documents import read_documents
from zrodlo.data.preparation import prepare_corpus
from zrodlo.data.tokenizer.char import CharTokenizer
from zrodlo.storage.digest import file_sha256


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--output", type=Path, default=measure.REPORTS / "corpus_open.json")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="zrodlo-bench-corpus-open-"))
    try:
        source = work / "documents.jsonl"
        documents, _ = generate(source, args.megabytes)
        first = next(iter(read_documents(source)))
        tokenizer = CharTokenizer.fit([first.text])
        (work / "corpus").mkdir()
        prepare_corpus(source, tokenizer, work / "corpus")
        source.unlink()
        opened = Corpus.open(work / "corpus")
        variants = {
            "open": lambda: measure.timed(lambda: Corpus.open(work / "corpus")),
            "open_and_verifying_pass": lambda: measure.timed(
                lambda: Corpus.open(work / "corpus").verified()
            ),
            "tokens_sha256": lambda: measure.timed(
                lambda: file_sha256(work / "corpus" / TOKENS_FILE)
            ),
        }
        samples = measure.interleave(variants, args.repeats)
        result = {
            "benchmark": "corpus open, checked from its own bytes",
            "documents": documents,
            "tokens": len(opened.tokens),
            "tokens_bin_bytes": (work / "corpus" / TOKENS_FILE).stat().st_size,
            "seconds": {name: measure.summary(values) for name, values in samples.items()},
            "pass_over_tokens_sha256": measure.ratios(
                samples["open_and_verifying_pass"], samples["tokens_sha256"]
            ),
            "machine": measure.machine(),
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)
    measure.write_report(args.output, result)


if __name__ == "__main__":
    main()

"""A byte-level BPE of more than 65,536 tokens: its corpus stores uint32 ids, and a tiny model on
it trains, resumes byte-identically and exports, by the real commands."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import TINY_MODEL

from zrodlo.data.tokenizer.bpe import BPETokenizer
from zrodlo.data.tokenizer.bpe_training import byte_symbols

pytestmark = pytest.mark.slow

transformers = pytest.importorskip("transformers")  # the hf extra, which the test extra includes

STEPS = {"--context": 9, "--checkpoint-every": 2, "--micro-batch-size": 2}
TEXT = "the quick brown fox jumps over the lazy dog " * 3


def wide() -> BPETokenizer:
    """A merge for every pair of bytes, 65,794 tokens in all: the pairs of lowercase letters and
    the space come last, so that the text's tokens have ids past 65,535."""
    symbols = byte_symbols()
    common = {symbols[b] for b in b"abcdefghijklmnopqrstuvwxyz "}
    pairs = [(a, b) for a in symbols for b in symbols]
    pairs.sort(key=lambda pair: pair[0] in common and pair[1] in common)  # stable: others first
    return BPETokenizer(tuple(pairs))


@pytest.fixture(scope="module")
def wide_run(tmp_path_factory, write_documents, train_args, run_zrodlo) -> Path:
    root = tmp_path_factory.mktemp("wide")
    (root / "tokenizer").mkdir()
    wide().save(root / "tokenizer")  # written with the library: no corpus holds 65,536 merges
    write_documents(root / "train.jsonl", {f"d{i}": TEXT[i:] for i in range(6)})
    commands = [
        ("corpus", "prepare", "--documents", "train.jsonl", "--tokenizer", "tokenizer",
         "--output", "corpus"),
        ("model", "init", "--tokenizer", "tokenizer", "--output", "model", *TINY_MODEL,
         "--dropout", "0", "--seed", "7"),
        tuple(train_args(root / "model", root / "corpus", root / "run", 4, STEPS)),
    ]  # fmt: skip
    for args in commands:
        returncode, _, stderr = run_zrodlo(*args, cwd=root)
        assert (returncode, stderr) == (0, ""), (args, stderr)
    return root


def test_the_corpus_stores_uint32_ids_past_65535(wide_run):
    manifest = json.loads((wide_run / "corpus" / "corpus.json").read_text())
    assert wide().vocab_size == 65_794
    assert manifest["token_type"] == "uint32"
    assert manifest["largest_token"] > 65_535


def test_a_wide_run_resumes_byte_identically(wide_run, resume_args, run_zrodlo):
    args = resume_args(wide_run / "run" / "step-2", wide_run / "corpus", wide_run / "resumed", 4)
    returncode, _, stderr = run_zrodlo(*args, cwd=wide_run)
    assert (returncode, stderr) == (0, ""), stderr
    for name in ("model.safetensors", "optimizer.safetensors"):
        resumed = (wide_run / "resumed" / "step-4" / name).read_bytes()
        assert resumed == (wide_run / "run" / "step-4" / name).read_bytes()


def test_a_wide_model_exports_with_its_ids(wide_run, run_zrodlo):
    output = wide_run / "exported"
    returncode, _, stderr = run_zrodlo(
        "model", "export", "--model", wide_run / "run" / "step-4", "--output", output, cwd=wide_run
    )
    assert (returncode, stderr) == (0, ""), stderr
    hf = transformers.AutoTokenizer.from_pretrained(output, local_files_only=True)
    assert hf(TEXT)["input_ids"] == wide().encode(TEXT).tolist()
    config = json.loads((output / "config.json").read_text())
    assert config["vocab_size"] == 65_794

"""A corpus past the size verified as it opens (32 MiB of tokens): the real commands step while its
verifying pass runs on a second thread, write their records and checkpoints once it has passed,
and when it fails stop with the corpus's sentence having written nothing, a fresh run directory
or a run directory they continue alike."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

# In `make test`, not `make check`: corpora past the size verified as they open.
pytestmark = pytest.mark.slow

DOCUMENTS = 40
CHARACTERS_EACH = 450_000  # 40 * 450,002 uint16 tokens: 36 MB, past the 32 MiB verified at open
EVERY = {"--checkpoint-every": 2}


@pytest.fixture(scope="module")
def large_corpus(tmp_path_factory, training_data, run_zrodlo, write_documents) -> Path:
    root = tmp_path_factory.mktemp("large-corpus")
    text = "the quick brown fox jumps over the lazy dog"  # characters the tokenizer knows
    texts = {
        f"doc-{i}": (text * (CHARACTERS_EACH // len(text) + 1))[:CHARACTERS_EACH]
        for i in range(DOCUMENTS)
    }
    documents = write_documents(root / "documents.jsonl", texts)
    corpus = root / "corpus"
    returncode, _, stderr = run_zrodlo(
        "corpus", "prepare", "--documents", documents, "--tokenizer", training_data.tokenizer,
        "--output", corpus, cwd=root,
    )  # fmt: skip
    assert (returncode, stderr) == (0, "")
    assert (corpus / "tokens.bin").stat().st_size > 1 << 25
    return corpus


def flipped(corpus: Path, destination: Path) -> Path:
    """A copy of the corpus with one byte of its tokens changed: its size and manifest still fit."""
    copy = Path(shutil.copytree(corpus, destination))
    with open(copy / "tokens.bin", "r+b") as handle:
        handle.seek(12_345_679)
        byte = handle.read(1)
        handle.seek(12_345_679)
        handle.write(bytes([byte[0] ^ 0x01]))
    return copy


def changed_sentence(corpus: Path) -> str:
    actual = hashlib.sha256((corpus / "tokens.bin").read_bytes()).hexdigest()
    recorded = json.loads((corpus / "corpus.json").read_text())["tokens_sha256"]
    return (
        f"{corpus / 'tokens.bin'} has sha256 {actual}, and {corpus / 'corpus.json'} records "
        f"{recorded}; the corpus was changed after it was prepared"
    )


def test_a_run_on_a_large_corpus_writes_every_record_once_its_corpus_has_passed(
    tmp_path, large_corpus, training_data, train_args, run_zrodlo
):
    run = tmp_path / "run"
    args = train_args(training_data.model, large_corpus, run, 4, EVERY)
    returncode, stdout, stderr = run_zrodlo(*args, cwd=tmp_path)
    assert (returncode, stderr) == (0, "")
    assert [line.split(",")[0] for line in (run / "steps.csv").read_text().splitlines()] == [
        "step", "1", "2", "3", "4"
    ]  # fmt: skip
    assert sorted(p.name for p in run.glob("step-*")) == ["step-2", "step-4"]
    assert "step 4/4" in stdout


def test_a_large_corpus_changed_after_it_was_prepared_stops_a_run_having_written_nothing(
    tmp_path, large_corpus, training_data, train_args, run_zrodlo
):
    corpus = flipped(large_corpus, tmp_path / "changed")
    run = tmp_path / "run"
    args = train_args(training_data.model, corpus, run, 4, EVERY)
    returncode, _, stderr = run_zrodlo(*args, cwd=tmp_path)
    assert (returncode, stderr) == (1, f"Error: {changed_sentence(corpus)}\n")
    assert not run.exists()


def test_a_resume_into_its_run_directory_on_a_changed_large_corpus_leaves_it_as_it_was(
    tmp_path, large_corpus, training_data, train_args, resume_args, run_zrodlo, snapshot
):
    run = tmp_path / "run"
    assert (
        run_zrodlo(*train_args(training_data.model, large_corpus, run, 4, EVERY), cwd=tmp_path)[0]
        == 0
    )
    corpus = flipped(large_corpus, tmp_path / "changed")
    before = snapshot(run)
    args = resume_args(run / "step-4", corpus, run, 6, EVERY)
    returncode, _, stderr = run_zrodlo(*args, cwd=tmp_path)
    assert (returncode, stderr) == (1, f"Error: {changed_sentence(corpus)}\n")
    assert snapshot(run) == before

"""A byte-level BPE through the whole path by the real commands: fit, prepare, init, train, resume
byte-identically, evaluate, sample, and export to transformers, whose ids and loss are Zrodlo's;
and a corpus of one tokenizer kind refused on a model of the other, by digest."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from conftest import HELD_OUT_DOCUMENTS, TINY_MODEL, TRAINING_DOCUMENTS
from hypothesis import given, settings
from hypothesis import strategies as st

from oracles import transformers_loss
from zrodlo.data.tokenizer import load_tokenizer

# In `make test`, not `make check`: training runs and transformers loading the exported directory.
pytestmark = pytest.mark.slow

transformers = pytest.importorskip("transformers")  # the hf extra, which the test extra includes

CONTEXT = 9
STEPS = {"--context": CONTEXT, "--checkpoint-every": 2, "--micro-batch-size": 2}


@pytest.fixture(scope="module")
def bpe(tmp_path_factory, write_documents, run_zrodlo) -> Path:
    """A BPE of 300 tokens fitted on the training documents, its corpora, and a tiny model
    trained 4 steps on it (step-2, step-4), then exported."""
    root = tmp_path_factory.mktemp("bpe")
    write_documents(root / "train.jsonl", {k: v * 4 for k, v in TRAINING_DOCUMENTS.items()})
    write_documents(root / "held-out.jsonl", HELD_OUT_DOCUMENTS)
    commands = [
        ("tokenizer", "fit", "--documents", "train.jsonl", "--output", "tokenizer", "--kind",
         "bpe", "--vocab-size", 300),
        ("corpus", "prepare", "--documents", "train.jsonl", "--tokenizer", "tokenizer",
         "--output", "corpus"),
        ("corpus", "prepare", "--documents", "held-out.jsonl", "--tokenizer", "tokenizer",
         "--output", "held-out"),
        ("model", "init", "--tokenizer", "tokenizer", "--output", "model", *TINY_MODEL,
         "--dropout", "0.1", "--seed", "7"),
    ]  # fmt: skip
    for args in commands:
        returncode, _, stderr = run_zrodlo(*args, cwd=root)
        assert (returncode, stderr) == (0, ""), (args, stderr)
    return root


@pytest.fixture(scope="module")
def bpe_run(bpe, train_args, run_zrodlo) -> Path:
    args = train_args(bpe / "model", bpe / "corpus", bpe / "run", 4, STEPS)
    returncode, _, stderr = run_zrodlo(*args, cwd=bpe)
    assert (returncode, stderr) == (0, ""), stderr
    return bpe / "run"


@pytest.fixture(scope="module")
def exported(bpe_run, run_zrodlo) -> Path:
    output = bpe_run.parent / "exported"
    returncode, _, stderr = run_zrodlo(
        "model", "export", "--model", bpe_run / "step-4", "--output", output, cwd=bpe_run.parent
    )
    assert (returncode, stderr) == (0, ""), stderr
    return output


def test_a_bpe_corpus_holds_fewer_tokens_than_characters(bpe):
    manifest = json.loads((bpe / "corpus" / "corpus.json").read_text())
    assert manifest["tokens"] - 2 * manifest["documents"] < manifest["characters"]
    assert manifest["unknown_tokens"] == 0


def test_a_bpe_run_resumes_byte_identically(bpe, bpe_run, resume_args, run_zrodlo):
    args = resume_args(bpe_run / "step-2", bpe / "corpus", bpe / "resumed", 4)
    returncode, _, stderr = run_zrodlo(*args, cwd=bpe)
    assert (returncode, stderr) == (0, ""), stderr
    for name in ("model.safetensors", "optimizer.safetensors"):
        assert (bpe / "resumed/step-4" / name).read_bytes() == (
            bpe_run / "step-4" / name
        ).read_bytes()


def test_a_character_corpus_on_a_bpe_model_is_refused_by_digest(
    bpe, training_data, train_args, assert_refused
):
    model = bpe / "model"
    char = load_tokenizer(training_data.tokenizer).digest
    assert_refused(
        *train_args(model, training_data.corpus, "run", 2, STEPS),
        sentence=f"{training_data.corpus} was encoded with another tokenizer than {model}: its "
        f"corpus.json records tokenizer {char}, and {model} has digest "
        f"{load_tokenizer(model).digest}; prepare the corpus again with {model}",
    )  # fmt: skip


@settings(max_examples=100, deadline=None)
@given(st.text(st.characters(exclude_categories=["Cs"]), max_size=40))
def test_transformers_encodes_any_text_to_zrodlos_ids_and_back(exported, bpe_run, text):
    hf = transformers.AutoTokenizer.from_pretrained(exported, local_files_only=True)
    ours = load_tokenizer(bpe_run / "step-4")
    ids = hf(text)["input_ids"]
    assert ids == ours.encode(text).tolist()
    assert hf.decode(ids) == text
    assert (hf.bos_token_id, hf.eos_token_id, hf.pad_token_id) == (0, 1, 1)


def test_transformers_loss_is_zrodlo_model_evaluates(exported, bpe, bpe_run, run_zrodlo):
    scores = bpe / "scores.json"
    returncode, _, stderr = run_zrodlo(
        "model", "evaluate", "--model", bpe_run / "step-4", "--corpus", bpe / "held-out",
        "--context", CONTEXT, "--output", scores, cwd=bpe,
    )  # fmt: skip
    assert (returncode, stderr) == (0, ""), stderr
    scored = json.loads(scores.read_text())["corpora"]["held-out"]
    expected = scored["loss"]
    # Bits per byte are over the held-out text itself, whatever its tokens.
    text_bytes = sum(len(text.encode()) for text in HELD_OUT_DOCUMENTS.values())
    assert scored["bytes"] == text_bytes
    bits = expected * scored["targets"] / math.log(2) / text_bytes
    assert scored["bits_per_byte"] == pytest.approx(bits, rel=1e-9)
    model = transformers.AutoModelForCausalLM.from_pretrained(exported, local_files_only=True)
    loss = transformers_loss(model, bpe / "held-out", CONTEXT)
    assert loss == pytest.approx(expected, abs=1e-5)


def test_a_bpe_model_samples_text(bpe_run, run_zrodlo):
    returncode, stdout, stderr = run_zrodlo(
        "model", "sample", "--model", bpe_run / "step-4", "--prompt", "the ", "--tokens", 5,
        "--seed", 1, cwd=bpe_run.parent,
    )  # fmt: skip
    assert (returncode, stderr) == (0, "")
    assert stdout.startswith("the ")

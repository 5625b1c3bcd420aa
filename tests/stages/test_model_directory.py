"""A model directory as every command that reads one sees it: evaluate, sample and train."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from zrodlo.checkpoint import read_config
from zrodlo.digest import json_sha256
from zrodlo.tokenizer import CharTokenizer


@pytest.mark.parametrize("command", ["sample", "report"])
def test_a_tokenizer_with_more_tokens_than_the_model_has_rows_is_refused(
    tmp_path, training_data, assert_refused_in_process, command
):
    model = Path(shutil.copytree(training_data.model, tmp_path / "model"))
    wider = CharTokenizer.fit(["the quick brown fox jumps over the lazy dog ZQXJ 0123456789"])
    wider.save(model)
    rows = read_config(model).vocab_size
    assert wider.vocab_size > rows
    corpus = training_data.corpus
    args = {
        "sample": ["model", "sample", "--model", model, "--seed", 1],
        "report": ["report", "--run", tmp_path, "--metrics", tmp_path / "metrics.json",
                   "--corpora", corpus.parent, "--model", model, "--output", tmp_path / "out"],
    }[command]  # fmt: skip
    assert_refused_in_process(
        *args,
        sentence=f"{model / 'tokenizer.json'} has {wider.vocab_size} tokens, more than the "
        f"vocab_size {rows} of {model / 'config.json'}; the model has no weights for the rest",
    )


@pytest.mark.parametrize("field, value", [("layers", 10_000_000), ("d_model", 2**40)])
def test_a_configuration_too_large_for_this_machine_is_refused_not_built(
    tmp_path, training_data, run_zrodlo, snapshot, field, value
):
    model = Path(shutil.copytree(training_data.model, tmp_path / "model"))
    config = json.loads((model / "config.json").read_text())
    (model / "config.json").write_text(json.dumps({**config, field: value, "heads": 1}))
    before = snapshot(tmp_path)
    returncode, stdout, stderr = run_zrodlo(
        "model", "evaluate", "--model", model, "--corpus", training_data.corpus, cwd=tmp_path
    )
    assert re.fullmatch(
        rf"Error: {re.escape(str(model / 'config.json'))} does not load as a model "
        r"configuration: a model of [\d,]+ parameters needs [\d,.]+ GiB for its float32 weights, "
        r"gradients and AdamW moments, more than the [\d,.]+ GiB of memory this machine has\n",
        stderr,
    )
    assert (returncode, stdout) == (1, "")
    assert snapshot(tmp_path) == before


@pytest.fixture
def impostor(tmp_path, training_data, other_corpus) -> Path:
    """other_corpus, whose corpus.json claims training_data's corpus digest, its own digest redone
    as a tool that knows the format would: only the tokens it holds tell it apart."""
    corpus = Path(shutil.copytree(other_corpus, tmp_path / "impostor"))
    manifest = json.loads((corpus / "corpus.json").read_text())
    claimed = json.loads((training_data.corpus / "corpus.json").read_text())["corpus_digest"]
    body = {k: v for k, v in manifest.items() if k != "manifest_sha256"}
    body["corpus_digest"] = claimed
    (corpus / "corpus.json").write_text(json.dumps({**body, "manifest_sha256": json_sha256(body)}))
    return corpus


@pytest.mark.parametrize("command", ["train", "evaluate", "resume"])
def test_a_corpus_whose_manifest_claims_another_corpus_is_refused(
    tmp_path,
    impostor,
    other_corpus,
    training_data,
    trained_run,
    train_args,
    resume_args,
    assert_refused_in_process,
    command,
):
    actual = json.loads((other_corpus / "corpus.json").read_text())["corpus_digest"]
    claimed = json.loads((impostor / "corpus.json").read_text())["corpus_digest"]
    args = {
        "train": train_args(training_data.model, impostor, tmp_path / "run", 2),
        "evaluate": ["model", "evaluate", "--model", training_data.model, "--corpus", impostor],
        "resume": resume_args(trained_run / "step-4", impostor, tmp_path / "resumed", 6),
    }[command]
    assert_refused_in_process(
        *args,
        sentence=f"{impostor / 'tokens.arrow'} holds corpus {actual}, and "
        f"{impostor / 'corpus.json'} records corpus {claimed}; the manifest is not this corpus's, "
        "so prepare the corpus again",
    )

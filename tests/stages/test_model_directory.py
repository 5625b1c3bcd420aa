"""A model directory as every command that reads one sees it: evaluate, sample and train."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from zrodlo.checkpoint import read_config
from zrodlo.tokenizer import CharTokenizer


@pytest.mark.parametrize("command", ["evaluate", "sample", "train"])
def test_a_tokenizer_with_more_tokens_than_the_model_has_rows_is_refused(
    tmp_path, training_data, train_args, assert_refused_in_process, command
):
    model = Path(shutil.copytree(training_data.model, tmp_path / "model"))
    wider = CharTokenizer.fit(["the quick brown fox jumps over the lazy dog ZQXJ 0123456789"])
    wider.save(model)
    rows = read_config(model).vocab_size
    assert wider.vocab_size > rows
    corpus = training_data.corpus
    args = {
        "evaluate": ["model", "evaluate", "--model", model, "--corpus", corpus],
        "sample": ["model", "sample", "--model", model, "--seed", 1],
        "train": train_args(model, corpus, tmp_path / "run", 2),
    }[command]
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

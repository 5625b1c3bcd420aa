"""A model directory as every command that reads one sees it: evaluate, sample and train."""

from __future__ import annotations

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

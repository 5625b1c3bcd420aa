"""What the commands that read a model tell a user: a run directory given as a model names its
newest checkpoint, a sample without a seed draws with the default and says which (a greedy one draws
nothing and says nothing), a chat answer that ends at once says so, and the scores table reads
whole on an 80-column terminal."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from zrodlo.model.directory import write_model
from zrodlo.training.checkpoint import read_model

ZRODLO = Path(sys.executable).parent / "zrodlo"


@pytest.mark.parametrize("command", ["sample", "evaluate", "export"])
def test_a_run_directory_given_as_a_model_names_its_newest_checkpoint(
    command, trained_run, training_data, assert_refused, tmp_path
):
    extra = {
        "sample": ["--prompt", "the ", "--seed", "1"],
        "evaluate": ["--corpus", training_data.corpus],
        "export": ["--output", tmp_path / "exported"],
    }[command]
    assert_refused(
        "model", command, "--model", trained_run, *extra,
        sentence=f"{trained_run} is a run directory, not a model; name one of its checkpoints, "
        f"such as its newest, {trained_run / 'step-6'}",
    )  # fmt: skip


def test_a_sample_without_a_seed_draws_with_the_default_and_says_so(
    trained_run, run_zrodlo, tmp_path
):
    model = trained_run / "step-6"
    status, defaulted, said = run_zrodlo("model", "sample", "--model", model, "--tokens", 8,
                                         cwd=tmp_path)  # fmt: skip
    assert (status, said) == (0, "drawn with --seed 1, the default\n")
    _, seeded, _ = run_zrodlo("model", "sample", "--model", model, "--tokens", 8, "--seed", 1,
                              cwd=tmp_path)  # fmt: skip
    assert defaulted == seeded


def test_a_greedy_sample_draws_nothing_and_names_no_seed(trained_run, run_zrodlo, tmp_path):
    args = ("model", "sample", "--model", trained_run / "step-6", "--tokens", 8)
    status, _, said = run_zrodlo(*args, "--temperature", 0, cwd=tmp_path)
    assert (status, said) == (0, "")


def test_a_chat_answer_that_ends_at_once_says_so(training_data, run_zrodlo, tmp_path):
    """A model made to predict EOS everywhere: its final norm outputs its bias alone, which only
    EOS's row of the head reads."""
    model = read_model(training_data.model)
    weights = {name: tensor.clone() for name, tensor in model.weights.items()}
    weights["final_norm.weight"].zero_()
    weights["final_norm.bias"].fill_(1.0)
    weights["lm_head.weight"].zero_()
    weights["lm_head.weight"][model.tokenizer.eos] = torch.ones(model.config.d_model)
    (tmp_path / "ends").mkdir()
    write_model(tmp_path / "ends", model.config, model.tokenizer, weights)
    status, answer, said = run_zrodlo("model", "sample", "--model", "ends", "--prompt", "the",
                                      "--chat", "--temperature", 0, cwd=tmp_path)  # fmt: skip
    assert (status, answer, said) == (
        0,
        "",
        "(the model ended its turn at once: the answer is empty)\n",
    )


def test_the_scores_table_reads_whole_at_80_columns(trained_run, training_data, tmp_path):
    done = subprocess.run(
        [str(ZRODLO), "model", "evaluate", "--model", trained_run / "step-6", "--corpus",
         training_data.corpus, "--baseline", training_data.corpus],
        capture_output=True, text=True, cwd=tmp_path, timeout=120, check=False,
        env={**os.environ, "COLUMNS": "80"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "…" not in done.stdout, done.stdout
    assert max(map(len, done.stdout.splitlines())) <= 80
    header = "\n".join(done.stdout.splitlines()[1:4])
    assert "perplexity" in header and "bits per" in header and "unknown" in header


def test_a_corpus_of_no_documents_is_left_unscored_and_said(
    trained_run, training_data, run_zrodlo, tmp_path
):
    """An empty test pool (splits.test 0): the pools that exist are scored."""
    (tmp_path / "none.jsonl").write_bytes(b"")
    returncode, _, stderr = run_zrodlo("corpus", "prepare", "--documents", "none.jsonl",
                                       "--tokenizer", training_data.tokenizer, "--output", "test",
                                       "--allow-empty", cwd=tmp_path)  # fmt: skip
    assert (returncode, stderr) == (0, "")
    returncode, _, stderr = run_zrodlo(
        "model", "evaluate", "--model", trained_run / "step-6", "--corpus", training_data.corpus,
        "--corpus", "test", "--output", "scores.json", cwd=tmp_path,
    )  # fmt: skip
    assert (returncode, stderr) == (0, "test holds no documents, so it is not scored\n")
    scores = json.loads((tmp_path / "scores.json").read_text())
    assert list(scores["corpora"]) == [training_data.corpus.name]

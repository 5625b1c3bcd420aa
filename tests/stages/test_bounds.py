"""Counts past what a run or a sample can hold, refused where they are read (the command line and
a checkpoint's record alike) with one sentence, before anything is written or allocated: a
thread count train accepts, a resume of its checkpoint accepts too."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from forgery import rewrite_record
from zrodlo.model.device import memory_of
from zrodlo.training.plan import MAX_STEPS
from zrodlo.training.record import MAX_THREADS


@pytest.mark.parametrize(
    ("flag", "value", "sentence"),
    [
        ("--threads", MAX_THREADS + 1, f"--threads is {MAX_THREADS + 1}; a run computes on 1 to {MAX_THREADS} threads"),
        ("--steps", MAX_STEPS + 1, f"--steps is {MAX_STEPS + 1}; it must be a whole number from 1 to {MAX_STEPS:,}"),
    ],
)  # fmt: skip
def test_train_refuses_a_count_past_its_bound(
    flag, value, sentence, training_data, dropout_model, train_args, tmp_path,
    assert_refused_in_process,
):  # fmt: skip
    args = train_args(dropout_model, training_data.corpus, tmp_path / "run", 2, {flag: value})
    assert_refused_in_process(*args, sentence=sentence)


def test_sample_refuses_more_tokens_than_a_sample_draws(dropout_model, assert_refused_in_process):
    assert_refused_in_process(
        "model", "sample", "--model", dropout_model, "--tokens", 10**12, "--seed", 1,
        sentence=f"--tokens is {10**12}; a sample draws 1 to 1,048,576 tokens",
    )  # fmt: skip


def test_a_batch_whose_window_indices_cannot_fit_in_memory_is_refused_by_train_and_resume(
    trained_run, training_data, dropout_model, train_args, resume_args, tmp_path,
    assert_refused_in_process,
):  # fmt: skip
    # Micro-batches of 2 windows fit: only the step's 10^12 window indices (8 TB) cannot.
    memory = memory_of(torch.device("cpu")) / 2**30
    refusal = (
        "a step of 1,000,000,000,000 windows draws 7,450.6 GiB of window indices at once, more "
        f"than the {memory:,.1f} GiB of memory this machine has; lower --batch-size"
    )
    flags = {"--batch-size": 10**12, "--micro-batch-size": 2}
    args = train_args(dropout_model, training_data.corpus, tmp_path / "run", 2, flags)
    assert_refused_in_process(*args, sentence=refusal)
    checkpoint = Path(shutil.copytree(trained_run / "step-4", tmp_path / "run" / "step-4"))
    rewrite_record(checkpoint, lambda record: record["hyperparameters"].update(batch_size=10**12))
    args = resume_args(checkpoint, training_data.corpus, tmp_path / "resumed", 6)
    assert_refused_in_process(*args, sentence=refusal)

"""The Python API (`zrodlo.api`): each function, called in this process, writes and returns what
the real command does, byte for byte."""

from __future__ import annotations

import json

import pytest
import torch

from zrodlo.api import Compute, RunPlan, evaluate, export, prepare, resume, sample, train
from zrodlo.storage.refusal import Refusal

STEPS = 4
# The conftest's TRAIN_FLAGS, as a plan, on one thread like the command below.
PLAN = RunPlan(
    steps=STEPS, context=9, batch_size=4, micro_batch_size=2, learning_rate=0.01, beta1=0.9,
    beta2=0.99, epsilon=1e-8, weight_decay=0.1, decay_scope="matrices", seed=11, precision="f32",
    warmup_steps=2, decay_steps=10, decay_shape="cosine", min_learning_rate=0.001, clip_norm=0.5,
    shuffle=True, checkpoint_every=2,
)  # fmt: skip


@pytest.fixture(autouse=True)
def own_threads():
    """train and resume set this process's thread count; the tests after these keep theirs."""
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def files_of(directory):
    return {p.relative_to(directory): p.read_bytes() for p in directory.rglob("*") if p.is_file()}


def test_prepare_writes_the_corpus_the_command_writes(training_data, tmp_path):
    manifest = prepare(training_data.documents, training_data.tokenizer, tmp_path / "corpus")
    assert files_of(tmp_path / "corpus") == files_of(training_data.corpus)
    assert (
        manifest["corpus_digest"]
        == json.loads((training_data.corpus / "corpus.json").read_text())["corpus_digest"]
    )


def test_train_and_resume_write_the_runs_the_commands_write(
    training_data, dropout_model, train_args, resume_args, run_zrodlo, tmp_path
):
    by_command = tmp_path / "by-command"
    flags = {"--checkpoint-every": 2, "--threads": 1}
    returncode, _, stderr = run_zrodlo(
        *train_args(dropout_model, training_data.corpus, by_command, STEPS, flags), cwd=tmp_path
    )
    assert (returncode, stderr) == (0, ""), stderr
    written = train(dropout_model, training_data.corpus, tmp_path / "by-api", PLAN, threads=1)
    assert written == [tmp_path / "by-api" / "step-2", tmp_path / "by-api" / "step-4"]
    for step in ("step-2", "step-4"):
        ours, theirs = files_of(tmp_path / "by-api" / step), files_of(by_command / step)
        assert ours == theirs, step
    resumed = resume(
        tmp_path / "by-api" / "step-2", training_data.corpus, tmp_path / "resumed", STEPS,
        Compute("cpu"), checkpoint_every=2,
    )  # fmt: skip
    assert resumed == [tmp_path / "resumed" / "step-4"]
    for name in ("model.safetensors", "optimizer.safetensors"):
        assert (tmp_path / "resumed" / "step-4" / name).read_bytes() == (
            by_command / "step-4" / name
        ).read_bytes()


def test_evaluate_returns_the_scores_the_command_writes(
    trained_run, training_data, run_zrodlo, tmp_path
):
    model, written = trained_run / "step-6", tmp_path / "scores.json"
    returncode, _, stderr = run_zrodlo(
        "model", "evaluate", "--model", model, "--corpus", training_data.held_out,
        "--baseline", training_data.corpus, "--context", 9, "--output", written, cwd=tmp_path,
    )  # fmt: skip
    assert (returncode, stderr) == (0, ""), stderr
    scores = evaluate(model, [training_data.held_out], 9, baseline=training_data.corpus)
    assert scores == json.loads(written.read_text())


def test_sample_returns_the_text_the_command_prints(trained_run, run_zrodlo, tmp_path):
    model = trained_run / "step-6"
    returncode, stdout, _ = run_zrodlo(
        "model", "sample", "--model", model, "--prompt", "the", "--tokens", 12, "--seed", 3,
        cwd=tmp_path,
    )  # fmt: skip
    assert returncode == 0
    assert "the" + sample(model, "the", tokens=12, seed=3) + "\n" == stdout


def test_export_writes_the_directory_the_command_writes(trained_run, run_zrodlo, tmp_path):
    pytest.importorskip("tokenizers")
    model = trained_run / "step-6"
    returncode, _, stderr = run_zrodlo(
        "model", "export", "--model", model, "--output", tmp_path / "by-command", cwd=tmp_path
    )
    assert (returncode, stderr) == (0, ""), stderr
    assert export(model, tmp_path / "by-api") == tmp_path / "by-api"
    assert files_of(tmp_path / "by-api") == files_of(tmp_path / "by-command")


def test_a_refusal_is_raised_with_the_commands_sentence(training_data, tmp_path):
    with pytest.raises(Refusal) as refused:
        prepare(training_data.documents, training_data.tokenizer, training_data.corpus)
    assert refused.value.sentence == (
        f"{training_data.corpus} already exists; Zrodlo writes a new directory and overwrites "
        "nothing"
    )

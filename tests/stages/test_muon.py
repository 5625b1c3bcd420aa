"""`model train --optimizer muon` through the real commands: a resume continues it to the bit, worker
processes over gloo on 127.0.0.1 make the one-process run, a checkpoint resumes onto another number
of processes, forged Muon state is refused, and Muon's flags are refused where they mean nothing.

Every run computes on one thread a process (OMP_NUM_THREADS=1): the promise is bit-equality at the
same threads per process.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load as load_safetensors
from safetensors.torch import save as save_safetensors

from forgery import replace_member

pytestmark = pytest.mark.slow  # real worker processes over gloo

ZRODLO = Path(sys.executable).parent / "zrodlo"
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "GLOO_SOCKET_IFNAME": "lo", "COLUMNS": "200"}
STEPS = 6
MUON = {
    "--optimizer": "muon", "--learning-rate": 0.02, "--muon-momentum-warmup": 3,
    "--embedding-rate": 0.05, "--head-rate": 0.004, "--batch-size": 8,
    "--checkpoint-every": 2, "--eval-every": 2,
}  # fmt: skip
WRITTEN = ("model.safetensors", "optimizer.safetensors")


def run(*args: object, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(arg) for arg in (ZRODLO, *args)], cwd=cwd, env=ENV, capture_output=True, text=True,
        timeout=300, check=False,
    )  # fmt: skip


def muon_args(train_args, training_data, model: Path, output: Path) -> list:
    flags = {**MUON, "--eval-corpus": training_data.held_out}
    return train_args(model, training_data.corpus, output, STEPS, flags)


@pytest.fixture(scope="module")
def alone(train_args, training_data, dropout_model, tmp_path_factory) -> Path:
    """The one-process Muon run (dropout, shuffle, micro-batches, clipping, warmup and decay on)."""
    output = tmp_path_factory.mktemp("muon") / "run"
    done = run(*muon_args(train_args, training_data, dropout_model, output), cwd=output.parent)
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    return output


def test_a_muon_run_records_its_settings_and_keeps_momentum_for_the_blocks_matrices(alone):
    record = json.loads((alone / f"step-{STEPS}" / "trainer.json").read_text())["hyperparameters"]
    assert {key: record[key] for key in record if "muon" in key or "rate" in key} == {
        "learning_rate": 0.02, "min_learning_rate": 0.001, "muon_momentum": 0.95,
        "muon_momentum_warmup": 3, "embedding_rate": 0.05, "head_rate": 0.004,
        "vector_rate": 0.02,
    }  # fmt: skip
    assert record["optimizer"] == "muon"
    state = load_safetensors((alone / f"step-{STEPS}" / "optimizer.safetensors").read_bytes())
    matrices = {name.rsplit(".", 1)[1] for name in state if ".mlp.up.weight." in name}
    assert matrices == {"momentum", "step"}
    biases = {name.rsplit(".", 1)[1] for name in state if ".mlp.up.bias." in name}
    assert biases == {"exp_avg", "exp_avg_sq", "step"}
    assert {name.rsplit(".", 1)[1] for name in state if name.startswith("token_")} == {
        "exp_avg", "exp_avg_sq", "step",
    }  # fmt: skip


@pytest.mark.parametrize("processes", [1, 2])
def test_a_resume_continues_the_muon_run_to_the_bit(
    processes, alone, resume_args, training_data, tmp_path
):
    resumed = tmp_path / "resumed"
    flags = {"--eval-corpus": training_data.held_out, "--eval-every": 2, "--checkpoint-every": 2}
    args = resume_args(alone / "step-2", training_data.corpus, resumed, STEPS, flags)
    done = run(*args, "--processes", processes, cwd=tmp_path)
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    for step in (4, 6):
        for name in WRITTEN:
            straight = (alone / f"step-{step}" / name).read_bytes()
            assert (resumed / f"step-{step}" / name).read_bytes() == straight, (step, name)
    compared = run("checkpoint", "diff", alone, resumed, cwd=tmp_path)
    assert compared.stdout == "the runs agree on all 4 steps both recorded\n"


@pytest.mark.parametrize("processes", [2, 4] if os.environ.get("ZRODLO_FULL_TESTS") == "1" else [4])
def test_processes_make_the_one_process_muon_run_to_the_bit(
    processes, alone, train_args, training_data, dropout_model, tmp_path
):
    output = tmp_path / "run"
    args = muon_args(train_args, training_data, dropout_model, output)
    done = run(*args, "--processes", processes, cwd=tmp_path)
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    for name in ("ledger.jsonl", "steps.csv", "held_out.csv"):
        assert (output / name).read_bytes() == (alone / name).read_bytes(), name
    for step in (2, 4, 6):
        for name in WRITTEN:
            straight = (alone / f"step-{step}" / name).read_bytes()
            assert (output / f"step-{step}" / name).read_bytes() == straight, (step, name)


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (
            lambda state: state.__setitem__(
                "blocks.0.mlp.down.weight.exp_avg", torch.zeros_like(
                    state["blocks.0.mlp.down.weight.momentum"])),
            "blocks.0.mlp.down.weight.exp_avg is state the optimizer of blocks.0.mlp.down.weight "
            "does not keep",
        ),
        (
            lambda state: state["blocks.0.attention.qkv.weight.momentum"].fill_(float("inf")),
            "blocks.0.attention.qkv.weight.momentum holds a value that is not finite",
        ),
    ],
)  # fmt: skip
def test_forged_muon_state_is_refused(
    change, problem, alone, assert_refused_in_process, resume_args, training_data, tmp_path
):
    checkpoint = Path(shutil.copytree(alone / "step-4", tmp_path / "run" / "step-4"))
    state = load_safetensors((checkpoint / "optimizer.safetensors").read_bytes())
    change(state)
    replace_member(checkpoint, "optimizer.safetensors", save_safetensors(state))
    args = resume_args(checkpoint, training_data.corpus, tmp_path / "resumed", STEPS)
    sentence = f"{checkpoint} holds optimizer state that does not fit its model: {problem}"
    assert_refused_in_process(*args, sentence=sentence)


@pytest.mark.parametrize(
    ("flags", "sentence"),
    [
        ({"--optimizer": "sgd"}, "--optimizer is 'sgd'; it takes adamw or muon"),
        (
            {"--head-rate": 0.01},
            "--head-rate needs --optimizer muon, whose setting it is",
        ),
        (
            {"--optimizer": "muon", "--muon-momentum": 1.0},
            "--muon-momentum is 1.0; a momentum lies from zero up to, and not at, 1",
        ),
        (
            {"--optimizer": "muon", "--vector-rate": "inf"},
            "--vector-rate is inf; it must be a positive finite number",
        ),
        (
            {"--optimizer": "muon", "--lora-rank": 2},
            "--optimizer muon trains whole matrices, and --lora-rank trains adapters; adapters "
            "train with --optimizer adamw",
        ),
    ],
)
def test_muon_flags_that_cannot_make_a_run_are_refused(
    flags, sentence, assert_refused_in_process, train_args, training_data, tmp_path
):
    args = train_args(training_data.model, training_data.corpus, tmp_path / "run", 2, flags)
    assert_refused_in_process(*args, sentence=sentence)

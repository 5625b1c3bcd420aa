"""Forged training state through the real `zrodlo checkpoint resume`: a checkpoint whose files were
edited and whose digests were recomputed to match (tests/forgery.py) is refused before the first
step when its optimizer state, trainer.json or model.json holds what no run writes. Each refusal:
the sentence, exit 1, and nothing written."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from safetensors.torch import load as load_safetensors
from safetensors.torch import save as save_safetensors

from forgery import replace_member, rewrite_record


@pytest.fixture
def checkpoint(tmp_path: Path, trained_run: Path) -> Path:
    """A copy of trained_run's step-4, which has made 4 updates."""
    return Path(shutil.copytree(trained_run / "step-4", tmp_path / "run" / "step-4"))


@pytest.fixture
def refused(assert_refused_in_process, training_data, resume_args, tmp_path) -> Callable:
    def check(checkpoint: Path, sentence: str) -> None:
        args = resume_args(checkpoint, training_data.corpus, tmp_path / "resumed", 6)
        assert_refused_in_process(*args, sentence=sentence)

    return check


def forge_optimizer(checkpoint: Path, change: Callable[[dict[str, torch.Tensor]], str]) -> str:
    """Change the optimizer state and seal it; `change` returns the parameter it changed."""
    state = load_safetensors((checkpoint / "optimizer.safetensors").read_bytes())
    name = change(state)
    replace_member(checkpoint, "optimizer.safetensors", save_safetensors(state))
    return name


def first(state: dict[str, torch.Tensor], key: str) -> str:
    return sorted(name for name in state if name.endswith(f".{key}"))[0]


@pytest.mark.parametrize(
    ("key", "value", "problem"),
    [
        ("exp_avg_sq", float("inf"), "holds a value that is not finite"),
        ("exp_avg_sq", float("nan"), "holds a value that is not finite"),
        ("exp_avg", float("-inf"), "holds a value that is not finite"),
        ("exp_avg_sq", -1e-3, "holds a negative second moment"),
    ],
)
def test_moments_no_adamw_holds_are_refused(checkpoint, refused, key, value, problem):
    def change(state):
        name = first(state, key)
        state[name] = state[name].clone()
        state[name].view(-1)[0] = value
        return name

    name = forge_optimizer(checkpoint, change)
    refused(
        checkpoint,
        f"{checkpoint} holds optimizer state that does not fit its model: {name} {problem}",
    )


def test_a_parameter_never_updated_with_moments_is_refused(checkpoint, refused):
    def change(state):
        name = first(state, "step")
        state[name] = torch.tensor(0.0)
        return name.removesuffix(".step")

    parameter = forge_optimizer(checkpoint, change)
    refused(
        checkpoint,
        f"{checkpoint} holds optimizer state that does not fit its model: {parameter}.step counts "
        "0 updates, and its moments are not zero",
    )


@pytest.mark.parametrize(
    ("change", "sentence"),
    [
        ({"run": ""}, "{file} names no run it belongs to; the checkpoint is incomplete"),
        ({"notes": "mine"}, '{file} records "notes", which no checkpoint of format 2 holds'),
        ({"run": "run-1"}, '{file} records run "run-1", which is no sha256 digest'),
        ({"corpus_digest": "x"}, '{file} records corpus_digest "x", which is no sha256 digest'),
        (
            {"seed": 12345},
            "{file} records seed 12345 and hyperparameters of seed 11; a run draws from one seed",
        ),
    ],
)
def test_a_record_whose_provenance_no_run_writes_is_refused(checkpoint, refused, change, sentence):
    seed = json.loads((checkpoint / "trainer.json").read_text())["hyperparameters"]["seed"]
    assert seed == 11  # TRAIN_FLAGS' seed, which the last sentence names
    rewrite_record(checkpoint, lambda record: record.update(change))
    refused(checkpoint, sentence.format(file=checkpoint / "trainer.json"))


def test_a_model_json_that_lists_other_files_than_trainer_json_is_refused(checkpoint, refused):
    listing = json.loads((checkpoint / "model.json").read_text())
    recorded = listing["files"]["config.json"]
    listing["files"]["config.json"] = "0" * 64
    replace_member(checkpoint, "model.json", json.dumps(listing).encode())
    refused(
        checkpoint,
        f"{checkpoint / 'model.json'} records {'0' * 64} as the sha256 of config.json, and "
        f"{checkpoint / 'trainer.json'} records {recorded}; the checkpoint was altered after it "
        "was written",
    )


def test_a_model_json_that_is_no_listing_is_refused(checkpoint, refused):
    replace_member(checkpoint, "model.json", b'{"format_version": 1, "files": []}')
    refused(
        checkpoint,
        f"{checkpoint / 'model.json'} does not load as a model manifest: it holds its "
        "format_version and the sha256 of config.json, tokenizer.json, model.safetensors, and "
        "nothing else",
    )

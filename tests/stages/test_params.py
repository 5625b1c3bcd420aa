"""`zrodlo --params params.yaml <command>` by the real command, as every stage of dvc.yaml runs it:
the command's section gives every option the command line leaves out, a flag given wins, the
schedule's shares become whole updates, and a key that is no flag is refused before anything is
written."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

INIT = {
    "preset": "tiny", "layers": 3, "heads": None, "positions": 16, "dropout": 0.1,
    "architecture": "llama", "kv_heads": 2, "rope_theta": None, "tie_embeddings": False,
    "seed": 4,
}  # fmt: skip


def params_file(folder: Path, **sections: dict) -> Path:
    path = folder / "params.yaml"
    path.write_text(yaml.safe_dump(sections, sort_keys=False))
    return path


def test_the_init_section_sets_the_shape_over_the_preset_and_a_flag_wins(
    tmp_path, training_data, run_zrodlo
):
    params = params_file(tmp_path, init=INIT)
    init = ("--params", params, "model", "init", "--tokenizer", training_data.tokenizer)
    returncode, _, stderr = run_zrodlo(*init, "--output", tmp_path / "model", cwd=tmp_path)
    assert (returncode, stderr) == (0, "")
    stated = json.loads((tmp_path / "model" / "config.json").read_text())
    assert {key: stated[key] for key in ("layers", "heads", "d_model", "d_ff")} == {
        "layers": 3, "heads": 4, "d_model": 64, "d_ff": 256,
    }  # fmt: skip
    assert (stated["architecture"], stated["kv_heads"], stated["rope_theta"]) == ("llama", 2, 1e4)
    returncode, _, stderr = run_zrodlo(
        *init, "--output", tmp_path / "narrow", "--d-model", "32", cwd=tmp_path
    )
    assert (returncode, stderr) == (0, "")
    assert json.loads((tmp_path / "narrow" / "config.json").read_text())["d_model"] == 32


def test_another_familys_keys_are_left_unread_and_refused_when_typed(
    tmp_path, training_data, run_zrodlo, assert_refused
):
    """-S init.architecture=gpt beside llama's init.kv_heads makes a gpt model; --kv-heads typed
    for a gpt model is still refused."""
    params = params_file(tmp_path, init={**INIT, "architecture": "gpt"})
    init = ("--params", params, "model", "init", "--tokenizer", training_data.tokenizer)
    returncode, _, stderr = run_zrodlo(*init, "--output", tmp_path / "gpt", cwd=tmp_path)
    assert (returncode, stderr) == (0, "")
    stated = json.loads((tmp_path / "gpt" / "config.json").read_text())
    # A gpt model at its defaults states no architecture (config.json as released versions wrote).
    assert "architecture" not in stated and "kv_heads" not in stated and stated["layers"] == 3
    assert_refused(
        *init, "--output", tmp_path / "typed", "--kv-heads", "2",
        sentence="--kv-heads is for --architecture llama, qwen2, qwen3, smollm3 or gemma3; a gpt "
        "model has none",
    )  # fmt: skip


def test_a_key_that_is_no_flag_of_the_command_is_refused(tmp_path, training_data, assert_refused):
    params = params_file(tmp_path, init={**INIT, "layer": 6})
    assert_refused(
        "--params", params, "model", "init", "--tokenizer", training_data.tokenizer,
        "--output", "model",
        sentence="init.layer is no flag of zrodlo model init; its section takes the flags zrodlo "
        "model init --help lists, with - or _ between words",
    )  # fmt: skip


def test_a_missing_section_is_refused_naming_the_file(tmp_path, training_data, assert_refused):
    params = params_file(tmp_path, train={"steps": 2})
    assert_refused(
        "--params", params, "model", "init", "--tokenizer", training_data.tokenizer,
        "--output", "model",
        sentence=f"{params} has no section init; the pipeline's stages read it",
    )  # fmt: skip


def test_the_train_section_gives_the_schedule_in_whole_updates(tmp_path, training_data, run_zrodlo):
    train = {
        "steps": 4, "context": 9, "batch_size": 4, "micro_batch_size": 2, "learning_rate": 0.01,
        "beta1": 0.9, "beta2": 0.99, "epsilon": 1e-8, "weight_decay": 0.1,
        "decay_scope": "matrices", "warmup": 0.25, "decay": 0.5, "decay_shape": "cosine",
        "min_learning_rate": 0.001, "clip_norm": None, "seed": 3, "precision": "f32",
        "device": "cpu", "threads": 1,
    }  # fmt: skip
    params = params_file(tmp_path, train=train)
    returncode, _, stderr = run_zrodlo(
        "--params", params, "model", "train", "--model", training_data.model,
        "--corpus", training_data.corpus, "--output", tmp_path / "run", cwd=tmp_path,
    )  # fmt: skip
    assert (returncode, stderr) == (0, "")
    record = json.loads((tmp_path / "run" / "step-4" / "trainer.json").read_text())
    plan = record["hyperparameters"]
    assert (plan["warmup_steps"], plan["stable_steps"], plan["decay_steps"]) == (1, 1, 2)
    assert plan["clip_norm"] is None and plan["learning_rate"] == 0.01


def test_steps_given_on_the_command_line_take_the_schedule_with_them(
    tmp_path, training_data, run_zrodlo
):
    """train.steps is 4 and --steps 8: the warmup and decay are the shares of 8, so the decay
    still ends at the last step."""
    train = {
        "steps": 4, "context": 9, "batch_size": 4, "learning_rate": 0.01, "beta1": 0.9,
        "beta2": 0.99, "epsilon": 1e-8, "weight_decay": 0.1, "decay_scope": "matrices",
        "warmup": 0.25, "decay": 0.5, "decay_shape": "linear", "min_learning_rate": 0.001,
        "seed": 3, "precision": "f32", "device": "cpu", "threads": 1,
    }  # fmt: skip
    params = params_file(tmp_path, train=train)
    returncode, _, stderr = run_zrodlo(
        "--params", params, "model", "train", "--model", training_data.model,
        "--corpus", training_data.corpus, "--output", tmp_path / "run", "--steps", 8,
        cwd=tmp_path,
    )  # fmt: skip
    assert (returncode, stderr) == (0, "")
    plan = json.loads((tmp_path / "run" / "step-8" / "trainer.json").read_text())["hyperparameters"]
    assert (plan["warmup_steps"], plan["stable_steps"], plan["decay_steps"]) == (2, 2, 4)

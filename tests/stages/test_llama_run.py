"""The llama decoder through the real commands, with GPT-2's guarantees: init from ChaCha20, a run
with dropout on every site and grouped-query attention resumed byte-identically and made to the bit
by two processes (over gloo on 127.0.0.1), its refusals before anything is written, and an export
that transformers loads as LlamaForCausalLM with Zrodlo's loss and greedy text."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from conftest import TINY_MODEL, zrodlo_succeeds

from oracles import transformers_loss
from zrodlo.data.tokenizer import load_tokenizer

# In `make test`, not `make check`: training runs, worker processes and transformers.
pytestmark = pytest.mark.slow

transformers = pytest.importorskip("transformers")

LLAMA = ("--architecture", "llama", "--kv-heads", "1", "--rope-theta", "500")
FLAGS = {"--context": 9, "--checkpoint-every": 2, "--micro-batch-size": 2}
SAME = ("model.safetensors", "optimizer.safetensors", "config.json", "model.json")


@pytest.fixture(scope="module")
def llama(training_data, tmp_path_factory, run_zrodlo) -> Path:
    """A tiny llama (2 query heads sharing 1 key and value head) with dropout everywhere."""
    root = tmp_path_factory.mktemp("llama")
    returncode, _, stderr = run_zrodlo(
        "model", "init", "--tokenizer", training_data.tokenizer, "--output", "model", *TINY_MODEL,
        "--dropout", "0.1", "--attention-dropout", "0.1", *LLAMA, "--seed", "7", cwd=root,
    )  # fmt: skip
    assert (returncode, stderr) == (0, ""), stderr
    return root


def train(root: Path, output: str, train_args, *extra: object) -> Path:
    args = train_args(root / "model", root.parent / "corpus", root / output, 4, FLAGS)
    zrodlo_succeeds(*args, *extra, cwd=root)
    return root / output


@pytest.fixture(scope="module")
def llama_run(llama, training_data, train_args) -> Path:
    (llama.parent / "corpus").symlink_to(training_data.corpus, target_is_directory=True)
    return train(llama, "run", train_args)


def test_the_model_directory_states_its_architecture(llama):
    config = json.loads((llama / "model" / "config.json").read_text())
    assert config["architecture"] == "llama"
    assert (config["kv_heads"], config["rope_theta"], config["tie_embeddings"]) == (1, 500.0, False)


def test_two_processes_and_a_resume_make_the_same_bytes(
    llama, llama_run, train_args, resume_args, run_zrodlo, training_data
):
    shared = train(llama, "shared", train_args, "--processes", 2)
    args = resume_args(llama_run / "step-2", training_data.corpus, llama / "resumed", 4)
    returncode, _, stderr = run_zrodlo(*args, cwd=llama)
    assert (returncode, stderr) == (0, ""), stderr
    ledger = (llama_run / "ledger.jsonl").read_text().splitlines()
    assert (shared / "ledger.jsonl").read_text().splitlines() == ledger
    resumed = (llama / "resumed" / "ledger.jsonl").read_text().splitlines()
    assert resumed == [line for line in ledger if line in resumed] and len(resumed) >= 3
    for other in (shared, llama / "resumed"):
        for name in SAME:
            assert (other / "step-4" / name).read_bytes() == (
                llama_run / "step-4" / name
            ).read_bytes(), (other, name)


@pytest.mark.parametrize(
    ("flags", "sentence"),
    [
        (("--kv-heads", "3"), "--kv-heads 3 does not divide --heads 2; each key and value head "
         "serves an equal share of the query heads"),
        (("--rope-theta", "nan"), "--rope-theta is nan; it must be a positive finite number"),
        (("--rope-theta", "-1"), "--rope-theta is -1.0; it must be a positive finite number"),
    ],
)  # fmt: skip
def test_a_bad_llama_setting_is_refused_before_anything_is_written(
    training_data, assert_refused, flags, sentence
):
    assert_refused(
        "model", "init", "--tokenizer", training_data.tokenizer, "--output", "model",
        *TINY_MODEL, "--dropout", "0", "--architecture", "llama", *flags, "--seed", "1",
        sentence=sentence,
    )  # fmt: skip


def test_a_llama_setting_on_a_gpt_model_is_refused(training_data, assert_refused):
    assert_refused(
        "model", "init", "--tokenizer", training_data.tokenizer, "--output", "model",
        *TINY_MODEL, "--dropout", "0", "--kv-heads", "1", "--seed", "1",
        sentence="--kv-heads is for --architecture llama, qwen2, qwen3, smollm3 or gemma3; a gpt "
        "model has none",
    )  # fmt: skip


@pytest.fixture(scope="module")
def exported(llama_run, run_zrodlo) -> Path:
    output = llama_run.parent / "exported"
    returncode, _, stderr = run_zrodlo(
        "model", "export", "--model", llama_run / "step-4", "--output", output, cwd=llama_run.parent
    )
    assert (returncode, stderr) == (0, ""), stderr
    return output


def test_transformers_loads_a_llama_whose_loss_is_zrodlos(
    exported, llama_run, training_data, run_zrodlo
):
    assert json.loads((exported / "config.json").read_text())["model_type"] == "llama"
    model = transformers.AutoModelForCausalLM.from_pretrained(exported, local_files_only=True)
    assert type(model).__name__ == "LlamaForCausalLM"
    scores = llama_run.parent / "scores.json"
    returncode, _, stderr = run_zrodlo(
        "model", "evaluate", "--model", llama_run / "step-4", "--corpus", training_data.held_out,
        "--context", 9, "--output", scores, cwd=llama_run.parent,
    )  # fmt: skip
    assert (returncode, stderr) == (0, ""), stderr
    expected = json.loads(scores.read_text())["corpora"]["held-out"]["loss"]
    loss = transformers_loss(model, training_data.held_out, 9)
    assert loss == pytest.approx(expected, abs=1e-5)


def test_greedy_text_in_transformers_is_zrodlo_sample_at_temperature_zero(
    exported, llama_run, run_zrodlo
):
    """50 tokens, greedy, from the same prompt: the model reads at most its 16 positions, so both
    stop there (transformers would run past them)."""
    tokenizer = load_tokenizer(llama_run / "step-4")
    prompt = "the "
    returncode, stdout, stderr = run_zrodlo(
        "model", "sample", "--model", llama_run / "step-4", "--prompt", prompt, "--tokens", 11,
        "--temperature", 0, "--seed", 1, cwd=llama_run.parent,
    )  # fmt: skip
    assert (returncode, stderr) == (0, ""), stderr
    model = transformers.AutoModelForCausalLM.from_pretrained(exported, local_files_only=True)
    ids = torch.tensor([[tokenizer.bos, *tokenizer.encode(prompt).tolist()]])
    generated = model.eval().generate(
        ids, max_new_tokens=11, do_sample=False, eos_token_id=None, pad_token_id=tokenizer.eos
    )
    assert stdout.rstrip("\n") == tokenizer.decode(generated[0, 1:].tolist())

"""Low-rank adapters through the real commands: `model train --lora-rank` trains the adapters
alone over a frozen base, named by digest, the same bytes on 1 and 2 processes (over gloo on
127.0.0.1); a base that changed is refused by its digest, and the flags are checked before
anything is written."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest
from conftest import TINY_MODEL, zrodlo_succeeds

from forgery import rewrite_record
from zrodlo import api
from zrodlo.model.directory import write_model
from zrodlo.model.held_base import rounded
from zrodlo.training.checkpoint import read_model

pytestmark = pytest.mark.slow  # training runs and worker processes

LORA = {"--lora-rank": 2, "--lora-alpha": 4, "--lora-targets": "q,v,up", "--checkpoint-every": 2}
WRITTEN = ("adapters.safetensors", "optimizer.safetensors", "config.json", "tokenizer.json")


def train(root: Path, corpus: Path, output: str, train_args, *extra: object) -> Path:
    zrodlo_succeeds(*train_args(root / "model", corpus, root / output, 4, LORA), *extra, cwd=root)
    return root / output


@pytest.fixture(scope="module")
def lora(training_data, tmp_path_factory, train_args) -> Path:
    """The tiny model and its adapters trained 4 steps (on 1 process), side by side."""
    root = tmp_path_factory.mktemp("lora")
    shutil.copytree(training_data.model, root / "model")
    train(root, training_data.corpus, "run", train_args)
    return root


def test_two_processes_and_a_resume_make_the_same_adapters(
    lora, training_data, train_args, resume_args, run_zrodlo
):
    shared = train(lora, training_data.corpus, "shared", train_args, "--processes", 2)
    args = resume_args(lora / "run" / "step-2", training_data.corpus, lora / "resumed", 4)
    returncode, _, stderr = run_zrodlo(*args, cwd=lora)
    assert (returncode, stderr) == (0, ""), stderr
    for other in (shared, lora / "resumed"):
        for name in WRITTEN:
            assert (other / "step-4" / name).read_bytes() == (
                lora / "run" / "step-4" / name
            ).read_bytes(), (other, name)
    ledger = (lora / "run" / "ledger.jsonl").read_text()
    assert (shared / "ledger.jsonl").read_text() == ledger


def test_a_base_that_changed_is_refused_by_its_digest(
    lora, training_data, tmp_path, assert_refused_in_process, resume_args
):
    shutil.copytree(lora / "run", tmp_path / "run")
    shape = {flag.removeprefix("--").replace("-", "_"): int(value)
             for flag, value in zip(TINY_MODEL[::2], TINY_MODEL[1::2], strict=True)}  # fmt: skip
    api.init(training_data.tokenizer, tmp_path / "model", seed=8, dropout=0.0, **shape)
    changed = hashlib.sha256((tmp_path / "model" / "model.safetensors").read_bytes()).hexdigest()
    trained = hashlib.sha256((lora / "model" / "model.safetensors").read_bytes()).hexdigest()
    sentence = (
        f"model/model.safetensors has sha256 {changed}, and the adapters of run/step-2 were "
        f"trained on a base whose weights have sha256 {trained}; give them the model they were "
        "trained on"
    )
    args = resume_args(Path("run/step-2"), training_data.corpus, Path("resumed"), 4)
    assert_refused_in_process(*args, sentence=sentence)
    assert_refused_in_process(
        "model", "export", "--model", "run/step-2", "--adapter", "--output", "exported",
        sentence=sentence,
    )  # fmt: skip


def test_checkpoints_of_adapters_naming_each_other_as_bases_are_refused(
    lora, training_data, tmp_path, assert_refused_in_process
):
    """A forged pair, each one's base the other: the base is read without adapters, so no chain
    of bases is followed."""
    shutil.copytree(lora / "run", tmp_path / "run")
    for checkpoint, other in (("step-2", "step-4"), ("step-4", "step-2")):
        rewrite_record(tmp_path / "run" / checkpoint,
                       lambda record, other=other: record["base"].update(path=other))  # fmt: skip
    assert_refused_in_process(
        "model", "evaluate", "--model", "run/step-4", "--corpus", training_data.corpus,
        sentence="run/step-4 holds adapters over the model run/step-2, which cannot be read: "
        "run/step-2 holds adapters over run/step-4; adapters are trained over a model directory "
        "or a checkpoint of every weight, and these continue with zrodlo checkpoint resume",
    )  # fmt: skip


def test_a_checkpoint_of_adapters_starts_no_run_and_exports_as_adapters_only(
    lora, training_data, train_args, assert_refused_in_process
):
    step = lora / "run" / "step-4"
    assert_refused_in_process(
        *train_args(step, training_data.corpus, Path("again"), 2),
        sentence=f"{step} holds adapters over {lora / 'model'}; adapters are trained over a "
        "model directory or a checkpoint of every weight, and these continue with zrodlo "
        "checkpoint resume",
        also=[lora],
    )
    model = lora / "model"
    assert_refused_in_process(
        "model", "export", "--model", model, "--adapter", "--output", "exported",
        sentence=f"{model} holds no adapters; --adapter exports the adapters of a run that "
        "trained them (model train --lora-rank), and model export alone writes this model",
        also=[lora],
    )  # fmt: skip


def test_a_bfloat16_base_trains_the_adapters_of_the_rounded_base_on_any_processes(
    lora, training_data, train_args, resume_args, run_zrodlo
):
    """--lora-base bf16 holds the base in half the bytes and computes in float32: its adapters and
    their AdamW state are, to the byte, those of a run over the float32 base rounded to bfloat16,
    on 1 process, on 2 and resumed; what it scores is what that rounded base scores."""
    base = read_model(lora / "model")
    (lora / "rounded").mkdir()
    write_model(lora / "rounded", base.config, base.tokenizer, rounded(base.weights, "bf16"))
    zrodlo_succeeds(
        *train_args(lora / "rounded", training_data.corpus, lora / "over-rounded", 4, LORA),
        cwd=lora,
    )
    held = {**LORA, "--lora-base": "bf16"}
    runs = {"held": 1, "held-shared": 2}
    for output, processes in runs.items():
        args = train_args(lora / "model", training_data.corpus, lora / output, 4, held)
        zrodlo_succeeds(*args, "--processes", processes, cwd=lora)
    args = resume_args(lora / "held" / "step-2", training_data.corpus, lora / "held-resumed", 4)
    returncode, _, stderr = run_zrodlo(*args, cwd=lora)
    assert (returncode, stderr) == (0, ""), stderr
    expected = lora / "over-rounded" / "step-4"
    for output in (*runs, "held-resumed"):
        for name in ("adapters.safetensors", "optimizer.safetensors"):
            assert (lora / output / "step-4" / name).read_bytes() == (
                expected / name
            ).read_bytes(), (output, name)
    scores = [
        api.evaluate(checkpoint, [training_data.held_out])["corpora"]
        for checkpoint in (lora / "held" / "step-4", expected)
    ]
    assert scores[0] == scores[1]


@pytest.mark.parametrize(
    ("flags", "sentence"),
    [
        ({"--lora-alpha": 4}, "--lora-alpha needs --lora-rank, the rank of the adapters it "
         "describes"),
        ({"--lora-base": "bf16"}, "--lora-base needs --lora-rank, the rank of the adapters it "
         "describes"),
        ({"--lora-rank": 2, "--lora-base": "f16"}, "--lora-base is 'f16'; it takes f32 or bf16"),
        ({"--lora-rank": 0}, "--lora-rank is 0; it must be a whole number of 1 or more"),
        ({"--lora-rank": 2, "--lora-alpha": "nan"}, "--lora-alpha is nan; it must be a positive "
         "finite number"),
        ({"--lora-rank": 2, "--lora-targets": "q,gate"}, "--lora-targets is q,gate; it names each "
         "of q, k, v, o, up, down once at most, one or more of them"),
    ],
)  # fmt: skip
def test_adapter_flags_that_make_no_run_are_refused(
    flags, sentence, training_data, train_args, assert_refused_in_process
):
    args = train_args(training_data.model, training_data.corpus, Path("run"), 2, flags)
    assert_refused_in_process(*args, sentence=sentence, also=[training_data.root])

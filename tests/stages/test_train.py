"""`zrodlo model train` through the real command: checkpoints, records, logs and every refusal.

The corpus of `training_data` has 8 windows at --context 9, so with --batch-size 4 a pass takes two
steps and, without --shuffle, step n reads the same windows as step n+2.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from oracles import window_order
from zrodlo.data.corpus import Corpus
from zrodlo.data.text_size import scored_text
from zrodlo.data.tokenizer import load_tokenizer
from zrodlo.data.windows import build_windows
from zrodlo.draws.bijection import bijection
from zrodlo.draws.chacha import GENERATOR, Purpose, Stream
from zrodlo.model.decoder import build_decoder
from zrodlo.model.directory import write_model
from zrodlo.model.weights import initial_weights
from zrodlo.storage.digest import file_sha256, json_sha256
from zrodlo.training.checkpoint import read_checkpoint, read_model
from zrodlo.training.record import read_record
from zrodlo.training.schedule import Schedule
from zrodlo.training.score import score
from zrodlo.training.step import windows_digest

ZRODLO = Path(sys.executable).parent / "zrodlo"
# One torch thread: on a busy machine with few cores, OpenMP threads waiting for each other make a
# step of this tiny model take a third of a second instead of a few milliseconds.
ONE_THREAD = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1", "OMP_NUM_THREADS": "1"}
FLAGS = {
    "context": 9,
    "batch-size": 4,
    "learning-rate": 0.01,
    "beta1": 0.9,
    "beta2": 0.99,
    "epsilon": 1e-8,
    "weight-decay": 0.1,
    "decay-scope": "matrices",
    "seed": 3,
    "precision": "f32",
    "device": "cpu",
}
CHECKPOINT_FILES = [
    "config.json",
    "model.json",
    "model.safetensors",
    "optimizer.safetensors",
    "tokenizer.json",
    "trainer.json",
]
LOGS = ["held_out.csv", "ledger.jsonl", "run.json", "steps.csv", "timing.csv"]


def training_args(data, output: Path, steps: int = 2, **changes: object) -> list[object]:
    """`model train` on `data` with FLAGS; a change of None drops a flag, True makes a switch."""
    values: dict[str, object] = {
        "model": data.model,
        "corpus": data.corpus,
        "output": output,
        "steps": steps,
        **FLAGS,
    }
    values.update({name.replace("_", "-"): value for name, value in changes.items()})
    args: list[object] = ["model", "train"]
    for name, value in values.items():
        if value is True:
            args.append(f"--{name}")
        elif value is not None:
            args += [f"--{name}", value]
    return args


def train(*args: object, cwd: Path) -> tuple[int, str, str]:
    completed = subprocess.run(
        [str(ZRODLO), *map(str, args)],
        cwd=cwd,
        env=ONE_THREAD,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    return completed.returncode, completed.stdout, completed.stderr


def ledger(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "ledger.jsonl").read_text().splitlines()]


def step_entries(run: Path) -> list[dict]:
    return [entry for entry in ledger(run) if "checkpoint" not in entry]


def csv_rows(file: Path) -> list[list[str]]:
    return [line.split(",") for line in file.read_text().splitlines()[1:]]


def rewrite_record(checkpoint: Path, **changes: object) -> None:
    """Change trainer.json and seal it again with its own digest, as a writer would have."""
    file = checkpoint / "trainer.json"
    record = json.loads(file.read_text())
    record.pop("record_sha256")
    record.update(changes)
    file.write_text(json.dumps({**record, "record_sha256": json_sha256(record)}))


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("runs")


@pytest.fixture(scope="module")
def main_run(training_data, runs) -> tuple[Path, tuple[int, str, str]]:
    """5 steps in micro-batches of 2 with clipping, checkpoints every 2, held-out scores every 3."""
    output = runs / "main"
    args = training_args(
        training_data,
        output,
        steps=5,
        micro_batch_size=2,
        clip_norm=1.0,
        checkpoint_every=2,
        eval_corpus=training_data.held_out,
        eval_every=3,
    )
    return output, train(*args, cwd=runs)


@pytest.fixture(scope="module")
def kept_run(training_data, runs) -> tuple[Path, tuple[int, str, str]]:
    """4 shuffled steps over a warmup, a stable update and a cosine decay; keeps 2 of 4 checkpoints."""
    output = runs / "kept"
    args = training_args(
        training_data,
        output,
        steps=4,
        shuffle=True,
        warmup_steps=1,
        stable_steps=1,
        decay_steps=2,
        decay_shape="cosine",
        min_learning_rate=0.001,
        checkpoint_every=1,
        keep_checkpoints=2,
    )
    return output, train(*args, cwd=runs)


# --- what a run writes ---


def test_checkpoints_every_n_steps_and_at_the_last(main_run):
    output, (returncode, stdout, stderr) = main_run
    assert (returncode, stderr) == (0, "")
    assert sorted(p.name for p in output.iterdir()) == sorted([*LOGS, "step-2", "step-4", "step-5"])
    # The summary line says what share of the run's wall time went to held-out scores.
    assert re.fullmatch(
        re.escape(f"wrote 3 checkpoints into {output}; the last is {output / 'step-5'}")
        + r"; held-out scores took \d+\.\d% of the run's wall time \(\d+\.\d of \d+\.\d s\)",
        stdout.splitlines()[-1],
    ), stdout
    for step in (2, 4, 5):
        checkpoint = read_checkpoint(output / f"step-{step}")
        assert checkpoint.step == step
        assert sorted(p.name for p in checkpoint.model.path.iterdir()) == CHECKPOINT_FILES


def test_trainer_record_names_the_run_data_and_environment(training_data, main_run):
    output, _ = main_run
    checkpoint = output / "step-5"
    record = json.loads((checkpoint / "trainer.json").read_text())
    corpus = json.loads((training_data.corpus / "corpus.json").read_text())
    assert record["step"] == 5
    assert record["generator"] == GENERATOR
    assert record["seed"] == 3
    assert record["corpus_digest"] == corpus["corpus_digest"]
    assert record["tokenizer_digest"] == load_tokenizer(training_data.tokenizer).digest
    assert record["hyperparameters"] == {
        "context": 9,
        "batch_size": 4,
        "micro_batch_size": 2,
        "learning_rate": 0.01,
        "beta1": 0.9,
        "beta2": 0.99,
        "epsilon": 1e-8,
        "weight_decay": 0.1,
        "decay_scope": "matrices",
        "seed": 3,
        "precision": "f32",
        "warmup_steps": 0,
        "stable_steps": None,
        "decay_steps": None,
        "decay_shape": None,
        "min_learning_rate": None,
        "clip_norm": 1.0,
        "shuffle": False,
    }
    environment = record["environment"]
    assert (environment["torch"], environment["threads"]) == (torch.__version__, 1)
    assert environment["device"] == "cpu"
    files = {name: file_sha256(checkpoint / name) for name in CHECKPOINT_FILES[:-1]}
    assert record["files"] == files
    body = {key: value for key, value in record.items() if key != "record_sha256"}
    assert record["record_sha256"] == json_sha256(body)


def test_optimizer_state_counts_the_updates_of_every_weight(main_run):
    output, _ = main_run
    state = load_file(output / "step-4" / "optimizer.safetensors")
    weights = load_file(output / "step-4" / "model.safetensors")
    assert set(state) == {f"{n}.{k}" for n in weights for k in ("exp_avg", "exp_avg_sq", "step")}
    assert {state[f"{name}.step"].item() for name in weights} == {4.0}


def test_logs_hold_one_line_per_step_and_held_out_scores_every_n_and_last(main_run):
    output, _ = main_run
    steps = csv_rows(output / "steps.csv")
    assert [int(row[0]) for row in steps] == [1, 2, 3, 4, 5]
    assert [row[4] for row in steps] == ["28"] * 5  # the targets of 4 windows
    assert [bool(row[5]) for row in steps] == [False, False, True, False, True]
    assert [bool(row[6]) for row in steps] == [False, False, True, False, True]
    held_out = [row[0:1] + row[5:] for row in steps if row[5]]
    assert csv_rows(output / "held_out.csv") == held_out
    assert [int(row[0]) for row in csv_rows(output / "timing.csv")] == [1, 2, 3, 4, 5]
    entries = step_entries(output)
    assert [entry["step"] for entry in entries] == [1, 2, 3, 4, 5]
    assert [float.fromhex(entry["loss"]) for entry in entries] == [float(r[1]) for r in steps]
    saved = {
        entry["step"]: entry["checkpoint"] for entry in ledger(output) if "checkpoint" in entry
    }
    assert set(saved) == {2, 4, 5}
    record = json.loads((output / "step-4" / "trainer.json").read_text())
    assert saved[4] == record["files"]


def test_held_out_loss_is_the_score_of_the_checkpoint(training_data, main_run):
    output, _ = main_run
    model = read_model(output / "step-5")
    held_out = Corpus.open(training_data.held_out)
    table = build_windows(held_out.offsets, 9)
    network = build_decoder(model.config, model.weights)
    expected = score(network, held_out.tokens, table, 2, torch.device("cpu")).loss
    assert float(csv_rows(output / "steps.csv")[4][5]) == pytest.approx(expected, rel=1e-6)


def test_progress_lines_name_loss_rate_norm_and_throughput(main_run):
    output, (_, stdout, _) = main_run
    lines = stdout.splitlines()[:-1]
    number = r"\d+\.\d+"
    pattern = re.compile(
        rf"step (\d)/5  loss ({number})  lr 0\.01  grad_norm ({number})  [\d,]+ tokens/s"
        rf"(  held-out loss ({number}))?"
    )
    matches = [pattern.fullmatch(line) for line in lines]
    assert all(matches), lines
    steps = csv_rows(output / "steps.csv")
    for match, row in zip(matches, steps, strict=True):
        assert match.group(1) == row[0]
        assert match.group(2) == f"{float(row[1]):.4f}"
        assert match.group(3) == f"{float(row[3]):.3f}"
        assert match.group(5) == (f"{float(row[5]):.4f}" if row[5] else None)


def test_keep_checkpoints_keeps_only_the_newest(kept_run):
    output, (returncode, _, stderr) = kept_run
    assert (returncode, stderr) == (0, "")
    assert sorted(p.name for p in output.iterdir()) == sorted([*LOGS, "step-3", "step-4"])
    assert [e["step"] for e in ledger(output) if "checkpoint" in e] == [1, 2, 3, 4]
    record = read_checkpoint(output / "step-4").record
    assert record["hyperparameters"]["shuffle"] is True
    assert record["hyperparameters"]["decay_shape"] == "cosine"


def test_rates_follow_the_schedule_through_its_boundaries(kept_run):
    output, _ = kept_run
    schedule = Schedule(0.01, 1, 1, 2, "cosine", 0.001)
    rates = [float(row[2]) for row in csv_rows(output / "steps.csv")]
    assert rates == [schedule.rate(n) for n in range(4)]
    assert rates[0] == rates[1] == 0.01
    assert rates[3] == 0.001


@pytest.mark.parametrize(
    ("changes", "sentence"),
    [
        (
            {"warmup_steps": 1, "stable_steps": 1, "decay_steps": 4},
            "the learning-rate schedule ends after update 6 (--warmup-steps 1, --stable-steps 1, "
            "--decay-steps 4), and --steps is 3: the rate never reaches --min-learning-rate "
            "0.001; the run goes on",
        ),
        (
            {"warmup_steps": 5, "decay_steps": None, "decay_shape": None,
             "min_learning_rate": None},
            "the learning-rate schedule ends after update 5 (--warmup-steps 5), and --steps is "
            "3: the rate never reaches --learning-rate 0.01; the run goes on",
        ),
    ],
)  # fmt: skip
def test_a_schedule_that_ends_after_the_last_step_is_warned_before_the_first(
    training_data, tmp_path, changes, sentence
):
    """Seed 001 allows a schedule longer than the run; the run says so before it trains, and
    trains (the kept run, whose schedule ends at its last step, warns of nothing)."""
    schedule = {"decay_shape": "cosine", "min_learning_rate": 0.001, **changes}
    args = training_args(training_data, tmp_path / "run", steps=3, **schedule)
    heard = {name: value for name, value in ONE_THREAD.items() if name != "PYTHONWARNINGS"}
    completed = subprocess.run(
        [str(ZRODLO), *map(str, args)], cwd=tmp_path, env=heard, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, check=False, timeout=120,
    )  # fmt: skip
    lines = completed.stdout.splitlines()
    assert completed.returncode == 0, completed.stdout
    assert lines[0] == f"warning: {sentence}"
    assert [line.split()[1] for line in lines[1:4]] == ["1/3", "2/3", "3/3"]
    assert (tmp_path / "run" / "step-3").is_dir()


@pytest.fixture(scope="module")
def subset_run(training_data, runs) -> tuple[Path, tuple[int, str, str]]:
    """4 steps scoring 2 of the held-out corpus's 5 windows every 2 steps."""
    output = runs / "subset"
    args = training_args(
        training_data, output, steps=4, eval_corpus=training_data.held_out, eval_every=2,
        eval_windows=2, checkpoint_every=2,
    )  # fmt: skip
    return output, train(*args, cwd=runs)


def test_held_out_scores_read_the_windows_drawn_once_from_the_seed(training_data, subset_run):
    """--eval-windows 2: every score reads the same 2 of the 5 held-out windows, the first two
    places of the keyed bijection of the run's seed; the ledger names them, the loss is theirs."""
    output, (returncode, _, stderr) = subset_run
    assert (returncode, stderr) == (0, "")
    held_out = Corpus.open(training_data.held_out)
    table = build_windows(held_out.offsets, 9)
    assert len(table) == 5
    drawn = np.sort(bijection(Stream(3, Purpose.SCORED_WINDOWS), 5, np.arange(2)))
    scored = [e for e in step_entries(output) if e["eval_loss"] is not None]
    assert [(e["step"], e["eval_windows"]) for e in scored] == [
        (2, windows_digest(drawn)), (4, windows_digest(drawn)),
    ]  # fmt: skip
    model = read_model(output / "step-4")
    network = build_decoder(model.config, model.weights)
    expected = score(network, held_out.tokens, table, 2, torch.device("cpu"), windows=drawn)
    assert expected.windows == 2
    row = csv_rows(output / "steps.csv")[3]
    assert float(row[5]) == pytest.approx(expected.loss, rel=1e-6)
    # Bits per byte of the text those windows score: the summed loss in bits over its bytes.
    text_bytes, _ = scored_text(held_out.tokens, table, drawn, model.tokenizer)
    bits = expected.summed / math.log(2) / text_bytes
    assert float(row[6]) == pytest.approx(bits, rel=1e-6)
    assert csv_rows(output / "held_out.csv")[1] == [row[0], row[5], row[6]]


@pytest.mark.parametrize(("windows", "differs"), [(2, None), (None, 4)])
def test_a_resume_scores_the_same_windows_only_when_told_the_same_count(
    training_data, subset_run, tmp_path, windows, differs
):
    """The resumed run with --eval-windows 2 records the same held-out windows as the run; without
    it the resume scores all five, and checkpoint diff names the step where that shows."""
    output, _ = subset_run
    resumed = tmp_path / "resumed"
    args = [
        "checkpoint", "resume", "--checkpoint", output / "step-2", "--corpus",
        training_data.corpus, "--output", resumed, "--steps", 4, "--device", "cpu",
        "--eval-corpus", training_data.held_out, "--eval-every", 2, "--checkpoint-every", 2,
    ]  # fmt: skip
    if windows is not None:
        args += ["--eval-windows", windows]
    assert train(*args, cwd=tmp_path)[0] == 0
    _, stdout, _ = train("checkpoint", "diff", output, resumed, "--json", cwd=tmp_path)
    assert json.loads(stdout)["first_differing_step"] == differs, stdout


def test_more_eval_windows_than_the_corpus_has_are_said_once(training_data, tmp_path):
    args = training_args(
        training_data, tmp_path / "run", steps=2, eval_corpus=training_data.held_out,
        eval_every=1, eval_windows=50,
    )  # fmt: skip
    returncode, _, stderr = train(*args, cwd=tmp_path)
    assert (returncode, stderr) == (
        0,
        f"warning: --eval-windows 50 is more than the 5 windows of {training_data.held_out} at "
        "--context 9; each score reads all of them\n",
    )


def test_refuses_eval_windows_without_eval_every(refused):
    refused("--eval-windows needs --eval-every, the steps between held-out scores", eval_windows=2)


def test_refuses_eval_windows_of_zero(refused, training_data):
    refused(
        "--eval-windows is 0; it must be a whole number of 1 or more",
        eval_corpus=training_data.held_out, eval_every=1, eval_windows=0,
    )  # fmt: skip


def test_shuffled_steps_read_each_pass_in_the_order_drawn_from_seed_and_pass(kept_run):
    output, _ = kept_run
    orders = [window_order(8, p, seed=3, shuffle=True) for p in (0, 1)]
    expected = [windows_digest(order[half]) for order in orders for half in (slice(4), slice(4, 8))]
    assert [entry["windows"] for entry in step_entries(output)] == expected


def test_training_a_checkpoint_starts_a_fresh_optimizer(training_data, main_run, runs):
    output, _ = main_run
    fresh = runs / "fresh"
    args = training_args(
        training_data, fresh, model=output / "step-2", micro_batch_size=2, clip_norm=1.0
    )
    returncode, _, stderr = train(*args, cwd=runs)
    assert (returncode, stderr) == (0, "")
    continued, restarted = step_entries(output)[2:4], step_entries(fresh)
    # Same weights and windows: the first losses agree; the update after differs, since the
    # moments start from zero and not from the 2 updates the checkpoint made.
    assert [e["windows"] for e in restarted] == [e["windows"] for e in continued]
    assert restarted[0]["loss"] == continued[0]["loss"]
    assert restarted[1]["loss"] != continued[1]["loss"]
    state = load_file(fresh / "step-2" / "optimizer.safetensors")
    assert {t.item() for name, t in state.items() if name.endswith(".step")} == {2.0}


def test_non_finite_loss_is_refused_after_the_checkpoints_before_it(training_data, tmp_path):
    output = tmp_path / "run"
    args = training_args(training_data, output, steps=4, learning_rate=1e30, checkpoint_every=1)
    returncode, stdout, stderr = train(*args, cwd=tmp_path)
    match = re.fullmatch(
        r"Error: the step after step 1 produced loss (\S+); lower --learning-rate or check the "
        r"corpus\n",
        stderr,
    )
    assert match, stderr
    assert not math.isfinite(float(match.group(1)))
    assert returncode == 1
    assert stdout.startswith("step 1/4  loss ")
    assert sorted(p.name for p in output.iterdir()) == sorted([*LOGS, "step-1"])
    assert read_checkpoint(output / "step-1").step == 1
    assert [row[0] for row in csv_rows(output / "steps.csv")] == ["1"]


def test_every_option_of_model_train_has_help(run_zrodlo, tmp_path):
    returncode, stdout, _ = run_zrodlo("model", "train", "--help", cwd=tmp_path)
    assert returncode == 0
    # option_descriptions reads no digits in flag names, and two of these flags have one.
    # The type column: <int> and the like, [a|b] for a fixed set of values, empty for a switch.
    row = r"^│ [* ]  (--[a-z0-9-]+) +(?:<\w+>|\[[a-z0-9|]+\])? +(\S.*?) *│$"
    options = dict(re.findall(row, stdout, re.M))
    expected = {f"--{name}" for name in FLAGS} | {"--model", "--corpus", "--output", "--steps"}
    optional = {"micro-batch-size", "warmup-steps", "stable-steps", "decay-steps", "decay-shape"}
    optional |= {"min-learning-rate", "clip-norm", "shuffle", "eval-corpus", "eval-every"}
    optional |= {"eval-windows"}
    optional |= {"checkpoint-every", "keep-checkpoints", "ordinal", "processes", "threads"}
    optional |= {"timing", "lora-rank", "lora-alpha", "lora-targets", "lora-base", "optimizer"}
    optional |= {"muon-momentum", "muon-momentum-warmup", "embedding-rate"}
    optional |= {"head-rate", "vector-rate"}
    optional |= {"help"}
    assert set(options) == expected | {f"--{name}" for name in optional}
    assert all(options.values()), options


# --- refusals ---
# Every refusal comes before training, so they run through the console script's entry in this
# process (torch imported once); the last one, and the non-finite loss above, in a subprocess.


@pytest.fixture
def refused(training_data, tmp_path, assert_refused_in_process):
    """`refused(sentence, **changes)`: `model train` into tmp_path/run with `changes` refuses
    with `sentence`, writing nothing there nor next to the inputs."""

    def check(sentence: str, output: Path | None = None, **changes: object) -> None:
        args = training_args(training_data, output or tmp_path / "run", **changes)
        assert_refused_in_process(*args, sentence=sentence, also=[training_data.root])

    return check


@pytest.fixture(scope="module")
def other_data(training_data, runs) -> Path:
    """`foreign`: the training documents prepared with another tokenizer; `short`: a corpus
    shorter than one window; `small-vocab`: the model with vocab_size 5 under the same tokenizer."""
    root = runs / "other"
    root.mkdir()
    (root / "short.jsonl").write_text('{"id": "ab", "text": "ab"}\n')
    documents = training_data.documents
    for args in (
        ("tokenizer", "fit", "--documents", "short.jsonl", "--output", "tok"),
        ("corpus", "prepare", "--documents", documents, "--tokenizer", "tok", "--output", "foreign"),
        ("corpus", "prepare", "--documents", "short.jsonl", "--tokenizer", training_data.tokenizer,
         "--output", "short"),
    ):  # fmt: skip
        assert train(*args, cwd=root)[0] == 0, args
    start = read_model(training_data.model)
    small = dataclasses.replace(start.config, vocab_size=5)
    (root / "small-vocab").mkdir()
    write_model(root / "small-vocab", small, start.tokenizer, initial_weights(small, 7))
    return root


@pytest.mark.parametrize("flag", ["learning-rate", "epsilon"])
@pytest.mark.parametrize(
    ("value", "shown"), [("nan", "nan"), ("0", "0.0"), ("-1", "-1.0"), ("inf", "inf")]
)
def test_refuses_a_rate_that_is_not_positive_and_finite(refused, flag, value, shown):
    refused(f"--{flag} is {shown}; it must be a positive finite number", **{flag: value})


@pytest.mark.parametrize("flag", ["beta1", "beta2"])
@pytest.mark.parametrize(("value", "shown"), [("0", "0.0"), ("1", "1.0"), ("1.5", "1.5")])
def test_refuses_a_beta_outside_zero_to_one(refused, flag, value, shown):
    refused(f"--{flag} is {shown}; a moment decay lies above zero and below 1", **{flag: value})


@pytest.mark.parametrize("value", ["-0.1", "nan"])
def test_refuses_a_negative_or_nan_weight_decay(refused, value):
    sentence = f"--weight-decay is {value}; it must be a finite number that is not negative"
    refused(sentence, weight_decay=value)


def test_refuses_a_zero_clip_norm(refused):
    refused("--clip-norm is 0.0; it must be a positive finite number", clip_norm=0)


DECAY = {"decay_steps": 2, "decay_shape": "linear", "min_learning_rate": 0.001}


@pytest.mark.parametrize(
    ("changes", "sentence"),
    [
        (
            {**DECAY, "min_learning_rate": None},
            "--decay-steps needs --min-learning-rate, the rate the decay ends at",
        ),
        (
            {**DECAY, "decay_steps": None, "decay_shape": None},
            "--min-learning-rate needs --decay-steps, the updates the rate decays over",
        ),
        (
            {**DECAY, "decay_shape": None},
            "--decay-steps needs --decay-shape, cosine or linear, the way the rate falls",
        ),
        (
            {**DECAY, "decay_steps": None, "min_learning_rate": None},
            "--decay-shape shapes a decay, and no --decay-steps is given",
        ),
        (
            {"stable_steps": 2},
            "--stable-steps holds the rate before a decay, and no --decay-steps is given; "
            "without a decay the rate stays at --learning-rate",
        ),
        (
            {**DECAY, "min_learning_rate": 0.5},
            "--min-learning-rate is 0.5; it must be a finite number from zero up to "
            "--learning-rate 0.01",
        ),
    ],
)
def test_refuses_a_schedule_that_does_not_fit_together(refused, changes, sentence):
    refused(sentence, **changes)


def test_refuses_a_micro_batch_that_does_not_divide_the_batch(refused):
    refused(
        "--micro-batch-size 3 does not divide --batch-size 4; every micro-batch of a step holds "
        "the same number of windows",
        micro_batch_size=3,
    )


def test_refuses_a_context_of_one(refused):
    refused(
        "--context 1 leaves no token to read before the one predicted; it needs two or more",
        context=1,
    )


def test_refuses_a_corpus_shorter_than_one_window(refused, other_data):
    refused(
        "the corpus holds 4 tokens, fewer than one window of --context 9",
        corpus=other_data / "short",
    )


def test_refuses_a_context_beyond_the_model_positions(refused):
    refused(
        "--context 18 makes the model read 17 tokens, more than the 16 positions its "
        "configuration states",
        context=18,
    )


def foreign_sentence(corpus: Path, model: Path) -> str:
    recorded = json.loads((corpus / "corpus.json").read_text())["tokenizer_digest"]
    digest = load_tokenizer(model).digest
    assert recorded != digest
    return (
        f"{corpus} was encoded with another tokenizer than {model}: its corpus.json records "
        f"tokenizer {recorded}, and {model} has digest {digest}; prepare the corpus again with "
        f"{model}"
    )


def test_refuses_a_corpus_of_another_tokenizer(refused, training_data, other_data):
    corpus = other_data / "foreign"
    refused(foreign_sentence(corpus, training_data.model), corpus=corpus)


def test_refuses_a_held_out_corpus_of_another_tokenizer(refused, training_data, other_data):
    corpus = other_data / "foreign"
    refused(foreign_sentence(corpus, training_data.model), eval_corpus=corpus, eval_every=1)


def test_refuses_a_token_outside_the_vocabulary(refused, training_data, other_data):
    largest = int(Corpus.open(training_data.corpus).tokens.max())
    refused(
        f"the corpus holds token {largest}, outside the model's vocab_size 5",
        model=other_data / "small-vocab",
    )


def test_refuses_a_held_out_corpus_without_eval_every(refused, training_data):
    refused(
        "--eval-corpus needs --eval-every, the steps between held-out scores",
        eval_corpus=training_data.held_out,
    )


def test_refuses_eval_every_without_a_held_out_corpus(refused):
    refused("--eval-every needs --eval-corpus, the held-out corpus to score", eval_every=1)


@pytest.mark.parametrize(
    ("changes", "sentence"),
    [
        (
            {"device": "gpu"},
            "invalid value 'gpu' for '--device <DEVICE>' [possible values: cpu, metal, cuda]",
        ),
        ({"device": "metal"}, "--device metal needs --ordinal, the card to train on"),
        ({"device": "cuda"}, "--device cuda needs --ordinal, the card to train on"),
        ({"ordinal": 0}, "--ordinal names a GPU; the cpu device takes none"),
        (
            {"precision": "bf16"},
            "--precision bf16 needs a GPU: the CPU backend has no bfloat16 matrix product; run "
            "with --device metal or --device cuda and --ordinal, or with --precision f32",
        ),
    ],
)
def test_refuses_a_device_it_cannot_use(refused, changes, sentence):
    refused(sentence, **changes)


def test_refuses_a_planned_checkpoint_that_exists(refused, tmp_path):
    (tmp_path / "run" / "step-2").mkdir(parents=True)
    refused(
        f"{tmp_path / 'run' / 'step-2'} already exists; Zrodlo writes a new directory and "
        "overwrites nothing",
        steps=3,
        checkpoint_every=2,
    )


def test_refuses_an_output_that_is_a_file(refused, tmp_path):
    (tmp_path / "run").write_text("mine")
    refused(
        f"{tmp_path / 'run'} exists and is not a directory; a run writes its checkpoints into a "
        "directory"
    )


def test_refuses_an_output_under_a_file(refused, tmp_path):
    (tmp_path / "runs").write_text("mine")
    output = tmp_path / "runs" / "run"
    refused(
        f"{output} cannot be written: {output.parent} is not a directory, so it cannot hold the "
        "output",
        output=output,
    )


# With --keep-checkpoints a run may delete old checkpoints, so it first refuses any it cannot vouch
# for. Each test puts a copy of a real checkpoint, step-2, into the run directory; the new run of 3
# steps plans to write step-3 only.


@pytest.fixture
def old_checkpoint(main_run, tmp_path) -> Path:
    output, _ = main_run
    copy = tmp_path / "run" / "step-2"
    shutil.copytree(output / "step-2", copy)
    return copy


KEEP = {"steps": 3, "keep_checkpoints": 1}


def test_refuses_a_checkpoint_name_without_a_step_count(refused, old_checkpoint, tmp_path):
    (tmp_path / "run" / "step-x").mkdir()
    run = tmp_path / "run"
    refused(f"{run / 'step-x'} is named like a checkpoint, but x is no step count", **KEEP)


def test_refuses_a_checkpoint_whose_record_states_another_step(refused, old_checkpoint):
    rewrite_record(old_checkpoint, step=7)
    assert read_record(old_checkpoint)["step"] == 7  # the record itself is consistent
    refused(f"{old_checkpoint} records 7 steps, not the 2 its directory name states", **KEEP)


def test_refuses_a_checkpoint_whose_config_does_not_load(refused, old_checkpoint):
    config = old_checkpoint / "config.json"
    config.write_text("[]\n")
    files = json.loads((old_checkpoint / "trainer.json").read_text())["files"]
    rewrite_record(old_checkpoint, files={**files, "config.json": file_sha256(config)})
    refused(
        f"{config} does not load as a model configuration: it holds a list, not an object of "
        "named values",
        **KEEP,
    )


def test_refuses_a_checkpoint_holding_a_foreign_file(
    training_data, old_checkpoint, tmp_path, assert_refused
):
    (old_checkpoint / "notes.txt").write_text("mine")
    assert_refused(
        *training_args(training_data, tmp_path / "run", **KEEP),
        sentence=f"{old_checkpoint} holds notes.txt, which Zrodlo does not write into a "
        "checkpoint directory; move it out, then delete the checkpoint again",
    )


@pytest.mark.parametrize(
    "changes",
    [
        {"batch_size": 10**12},  # one micro-batch of 10^12 windows
        {"batch_size": 2 * 10**11, "micro_batch_size": 10**11},
        {"batch_size": 10**12, "lora_rank": 2},  # the weights once, the adapters' state beside
    ],
    ids=["batch", "micro-batch", "adapters"],
)
def test_a_step_whose_activations_cannot_fit_in_memory_is_refused_before_it_runs(
    training_data, tmp_path, snapshot, changes
):
    before = snapshot(tmp_path), snapshot(training_data.root)
    returncode, stdout, stderr = train(
        *training_args(training_data, tmp_path / "run", **changes), cwd=tmp_path
    )
    windows = f"{changes.get('micro_batch_size', changes['batch_size']):,}"
    held = "weights and its adapters' gradients" if "lora_rank" in changes else "weights, gradients"
    assert re.fullmatch(
        rf"Error: a step in micro-batches of {windows} windows at --context 9 keeps at least "
        rf"[\d,.]+ GiB of activations, which with the model's [\d.]+ GiB of {held} and "
        r"AdamW moments is more than the [\d,.]+ GiB of memory this machine has; lower "
        r"--micro-batch-size or --context, or run on a device with more memory\n",
        stderr,
    ), stderr
    assert (returncode, stdout) == (1, "")
    assert (snapshot(tmp_path), snapshot(training_data.root)) == before

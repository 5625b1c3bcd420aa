"""A run continued from its own checkpoint equals the run that was never interrupted, bit for bit.

Library level, in this process: the windows and losses of every step, the lines of steps.csv and
ledger.jsonl, and the bytes of the last checkpoint's weights and AdamW state, for any step the run
was interrupted at, with every feature that draws or schedules something switched on.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from zrodlo.data.corpus import Corpus
from zrodlo.data.tokenizer import load_tokenizer
from zrodlo.draws.chacha import GENERATOR
from zrodlo.model.config import ModelConfig
from zrodlo.model.directory import Model, write_model
from zrodlo.model.weights import initial_weights
from zrodlo.training.checkpoint import (
    CHECKPOINT_FILES,
    read_checkpoint,
    read_model,
    write_checkpoint,
)
from zrodlo.training.loop import fresh_provenance, open_held_out, run_updates
from zrodlo.training.plan import RunPlan
from zrodlo.training.records import LEDGER_FILE, STEPS_FILE, StepRecord, read_ledger
from zrodlo.training.score import check_data
from zrodlo.training.step import Trainer

CPU = torch.device("cpu")
STATE_FILES = ("model.safetensors", "optimizer.safetensors")


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """A tiny model steps many times faster on one thread than on several waiting for each other;
    both runs of every comparison here share the count, as equality requires."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def init_model(directory: Path, tokenizer: Path, dropout: float, attention_dropout: float) -> Path:
    """A model directory written with the library: one block, room for 16 tokens, seed 7."""
    fitted = load_tokenizer(tokenizer)
    config = ModelConfig(
        vocab_size=fitted.vocab_size,
        positions=16,
        d_model=16,
        layers=1,
        heads=2,
        d_ff=32,
        dropout=dropout,
        attention_dropout=attention_dropout,
    )
    directory.mkdir(parents=True)
    write_model(directory, config, fitted, initial_weights(config, 7))
    return directory


@pytest.fixture(scope="module")
def models(training_data, tmp_path_factory) -> dict[tuple[float, float], Path]:
    """A model directory for each (dropout, attention_dropout) the examples draw."""
    root = tmp_path_factory.mktemp("models")
    return {
        (p, q): init_model(root / f"model-{p}-{q}", training_data.tokenizer, p, q)
        for p in (0.0, 0.1)
        for q in (0.0, 0.1)
    }


@pytest.fixture(scope="module")
def corpus(training_data) -> Corpus:
    return Corpus.open(training_data.corpus)


@dataclass(frozen=True)
class Example:
    """A run of `plan.steps` steps, interrupted after each step of `cuts` and resumed."""

    plan: RunPlan
    cuts: tuple[int, ...]
    dropout: float
    attention_dropout: float


@st.composite
def examples(draw) -> Example:
    steps = draw(st.integers(2, 6))
    cuts = draw(st.sets(st.integers(1, steps - 1), min_size=1, max_size=2))
    batch_size = draw(st.sampled_from([1, 2, 3, 4]))
    divisors = [m for m in range(1, batch_size + 1) if batch_size % m == 0]
    decay = draw(st.booleans())
    every = draw(st.sampled_from([None, 1, 2]))
    plan = RunPlan(
        steps=steps,
        context=draw(st.sampled_from([5, 9])),
        batch_size=batch_size,
        learning_rate=0.01,
        beta1=0.9,
        beta2=0.99,
        epsilon=1e-8,
        weight_decay=draw(st.sampled_from([0.0, 0.1])),
        decay_scope=draw(st.sampled_from(["all", "matrices"])),
        seed=draw(st.integers(0, 2**64 - 1)),
        precision="f32",
        micro_batch_size=draw(st.sampled_from([None, *divisors])),
        warmup_steps=draw(st.sampled_from([0, 2])),
        stable_steps=draw(st.sampled_from([None, 1])) if decay else None,
        decay_steps=3 if decay else None,
        decay_shape=draw(st.sampled_from(["cosine", "linear"])) if decay else None,
        min_learning_rate=0.001 if decay else None,
        clip_norm=draw(st.sampled_from([None, 0.05])),
        shuffle=draw(st.booleans()),
        eval_every=(eval_every := draw(st.sampled_from([None, 1, 2]))),
        eval_windows=draw(st.sampled_from([None, 1, 2])) if eval_every else None,
        checkpoint_every=every,
        keep_checkpoints=draw(st.sampled_from([None, 1, 2])),
    )
    return Example(
        plan=plan,
        cuts=tuple(sorted(cuts)),
        dropout=draw(st.sampled_from([0.0, 0.1])),
        attention_dropout=draw(st.sampled_from([0.0, 0.1])),
    )


def provenance(plan: RunPlan, corpus: Corpus, model: Model) -> dict:
    return fresh_provenance(model, corpus.digest, plan)


def run_from_scratch(
    plan: RunPlan, model_dir: Path, corpus: Corpus, held_out: Path, output: Path, on_step=None
) -> None:
    """What `zrodlo model train` does once its flags are checked."""
    model = read_model(model_dir)
    table = check_data(corpus, model, plan.context)
    held = open_held_out(held_out if plan.eval_every else None, model, plan)
    trainer = Trainer.start(plan, model, corpus.tokens, table, CPU)
    extra = {} if on_step is None else {"on_step": on_step}
    run_updates(trainer, plan, 0, output, model, provenance(plan, corpus, model), held, **extra)


def resume(
    checkpoint: Path, steps: int, writes: RunPlan, corpus: Corpus, held_out: Path, output: Path
) -> None:
    """What `zrodlo checkpoint resume` does once its flags are checked: everything from disk, the
    plan from trainer.json; `writes` gives --eval-every, --eval-windows, --checkpoint-every and
    --keep-checkpoints."""
    state = read_checkpoint(checkpoint)
    plan = RunPlan.from_hyperparameters(
        state.record["hyperparameters"],
        steps=steps,
        eval_every=writes.eval_every,
        eval_windows=writes.eval_windows,
        checkpoint_every=writes.checkpoint_every,
        keep_checkpoints=writes.keep_checkpoints,
    )
    table = check_data(corpus, state.model, plan.context)
    held = open_held_out(held_out if plan.eval_every else None, state.model, plan)
    trainer = Trainer.restore(plan, state, corpus.tokens, table, CPU)
    run_updates(
        trainer,
        plan,
        state.step,
        output,
        state.model,
        state.provenance,
        held,
        continues=state.record["files"],
    )


def steps_rows(run: Path) -> dict[int, list[str]]:
    lines = (run / STEPS_FILE).read_text().splitlines()
    return {int(line.split(",")[0]): line.split(",") for line in lines[1:]}


def ledger_steps(run: Path) -> dict[int, dict]:
    return {e["step"]: e for e in read_ledger(run / LEDGER_FILE) if "checkpoint" not in e}


def ledger_checkpoints(run: Path) -> dict[int, dict]:
    return {e["step"]: e["checkpoint"] for e in read_ledger(run / LEDGER_FILE) if "checkpoint" in e}


def assert_same_records(straight: Path, resumed: Path, plan: RunPlan, cuts: tuple[int, ...]):
    """Every step's records equal, save the held-out score a segment takes at its own last step
    (a cut) where the uninterrupted run scores nothing."""
    rows_a, rows_b = steps_rows(straight), steps_rows(resumed)
    entries_a, entries_b = ledger_steps(straight), ledger_steps(resumed)
    assert sorted(rows_a) == sorted(rows_b) == sorted(entries_a) == sorted(entries_b)
    assert sorted(rows_a) == list(range(1, plan.steps + 1))
    for step in rows_a:
        if step in cuts and not plan.scores_at(step):
            assert rows_a[step][:5] == rows_b[step][:5], step
            assert rows_a[step][5] == ""
            entry_b = {**entries_b[step], "eval_loss": None}
            entry_b.pop("eval_windows", None)  # the windows that score read, where not all
            assert entries_a[step] == entry_b, step
        else:
            assert rows_a[step] == rows_b[step], step
            assert entries_a[step] == entries_b[step], step
    saved_a, saved_b = ledger_checkpoints(straight), ledger_checkpoints(resumed)
    assert set(saved_a) <= set(saved_b) <= set(saved_a) | set(cuts)
    for step in saved_a:
        assert saved_a[step] == saved_b[step], step


# A resume of a resume, at the edges: the largest seed, retention, and a schedule of every phase.
PINNED = Example(
    plan=RunPlan(
        steps=9,
        context=9,
        batch_size=4,
        learning_rate=0.01,
        beta1=0.9,
        beta2=0.99,
        epsilon=1e-8,
        weight_decay=0.1,
        decay_scope="matrices",
        seed=2**64 - 1,
        precision="f32",
        micro_batch_size=2,
        warmup_steps=2,
        stable_steps=1,
        decay_steps=4,
        decay_shape="cosine",
        min_learning_rate=0.001,
        clip_norm=0.05,
        shuffle=True,
        eval_every=2,
        checkpoint_every=2,
        keep_checkpoints=2,
    ),
    cuts=(3, 6),
    dropout=0.1,
    attention_dropout=0.1,
)


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(example=examples())
@example(example=PINNED)
def test_a_run_resumed_after_any_step_equals_the_uninterrupted_run(
    example, models, corpus, training_data, tmp_path_factory
):
    plan = example.plan
    model_dir = models[(example.dropout, example.attention_dropout)]
    root = tmp_path_factory.mktemp("example")
    straight, resumed = root / "straight", root / "resumed"
    run_from_scratch(plan, model_dir, corpus, training_data.held_out, straight)

    first, *later = example.cuts
    run_from_scratch(replace(plan, steps=first), model_dir, corpus, training_data.held_out, resumed)
    done = first
    for stop in [*later, plan.steps]:
        resume(resumed / f"step-{done}", stop, plan, corpus, training_data.held_out, resumed)
        done = stop

    assert_same_records(straight, resumed, plan, example.cuts)
    last = f"step-{plan.steps}"
    for name in CHECKPOINT_FILES:
        assert (straight / last / name).read_bytes() == (resumed / last / name).read_bytes(), name


class Interrupted(Exception):
    """Stands for a kill: raised after a step's records are written, before its checkpoint."""


def test_a_run_interrupted_between_checkpoints_continues_in_its_own_directory(
    models, corpus, training_data, tmp_path
):
    plan = RunPlan(
        steps=8,
        context=9,
        batch_size=3,
        learning_rate=0.01,
        beta1=0.9,
        beta2=0.95,
        epsilon=1e-8,
        weight_decay=0.1,
        decay_scope="all",
        seed=5,
        precision="f32",
        micro_batch_size=1,
        warmup_steps=1,
        decay_steps=5,
        decay_shape="linear",
        min_learning_rate=0.002,
        clip_norm=0.05,
        shuffle=True,
        eval_every=2,
        checkpoint_every=3,
        keep_checkpoints=2,
    )
    model_dir = models[(0.1, 0.1)]
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    run_from_scratch(plan, model_dir, corpus, training_data.held_out, straight)

    def interrupt(record: StepRecord) -> None:
        if record.step == 5:
            raise Interrupted

    with pytest.raises(Interrupted):
        run_from_scratch(plan, model_dir, corpus, training_data.held_out, killed, interrupt)
    assert sorted(p.name for p in killed.glob("step-*")) == ["step-3"]
    assert max(steps_rows(killed)) == 5  # records past the checkpoint, as a kill leaves them
    leftover = killed / ".step-6.partial-99999999"
    shutil.copytree(killed / "step-3", leftover)

    resume(killed / "step-3", 8, plan, corpus, training_data.held_out, killed)

    for name in (STEPS_FILE, LEDGER_FILE):
        assert (killed / name).read_text() == (straight / name).read_text(), name
    assert sorted(p.name for p in killed.iterdir()) == sorted(p.name for p in straight.iterdir())
    assert not leftover.exists()
    for name in STATE_FILES:
        assert (killed / "step-8" / name).read_bytes() == (straight / "step-8" / name).read_bytes()


# The textbook's restore test: from one state after 4 steps, branch A goes on in memory and branch
# B goes on from a checkpoint rebuilt from disk; with dropout on, any draw that is not restored
# shows up as a different loss.

TEXTBOOK_PLAN = RunPlan(
    steps=7,
    context=9,
    batch_size=3,
    learning_rate=0.003,
    beta1=0.9,
    beta2=0.99,
    epsilon=1e-8,
    weight_decay=0.01,
    decay_scope="matrices",
    seed=19,
    precision="f32",
    micro_batch_size=1,
    warmup_steps=2,
    decay_steps=4,
    decay_shape="cosine",
    min_learning_rate=0.0003,
    clip_norm=1.0,
    shuffle=True,
)


@dataclass
class Branches:
    in_memory: Trainer
    rebuilt: Trainer
    weights_only: Trainer
    checkpoint_step: int
    a: list[tuple[list[int], StepRecord]]
    b: list[tuple[list[int], StepRecord]]
    c: list[tuple[list[int], StepRecord]]
    torch_rng_untouched: bool


def continue_three(trainer: Trainer) -> list[tuple[list[int], StepRecord]]:
    return [(trainer.stream.indices(n).tolist(), trainer.step(n)) for n in range(4, 7)]


@pytest.fixture(scope="module")
def branches(training_data, tmp_path_factory) -> Branches:
    root = tmp_path_factory.mktemp("branches")
    model = read_model(init_model(root / "model", training_data.tokenizer, 0.2, 0.2))
    data = Corpus.open(training_data.corpus)
    plan = TEXTBOOK_PLAN
    rng_before = torch.get_rng_state()
    trainer = Trainer.start(plan, model, data.tokens, check_data(data, model, plan.context), CPU)
    for n in range(4):
        trainer.step(n)
    checkpoint = root / "step-4"
    checkpoint.mkdir()
    record = {
        "step": 4,
        "generator": GENERATOR,
        **provenance(plan, data, model),
        "hyperparameters": plan.hyperparameters(),
    }
    saved = Model(checkpoint, model.config, model.tokenizer, trainer.weights())
    write_checkpoint(checkpoint, saved, trainer.optimizer_state(), record)
    a = continue_three(trainer)
    untouched = torch.equal(torch.get_rng_state(), rng_before)

    # Branch B shares nothing with A but the checkpoint's directory, and torch's global generator
    # is reseeded first: a run whose draws came from it would part here.
    torch.manual_seed(12345)
    try:
        state = read_checkpoint(checkpoint)
        restored_plan = RunPlan.from_hyperparameters(state.record["hyperparameters"], steps=7)
        reopened = Corpus.open(training_data.corpus)
        table = check_data(reopened, state.model, restored_plan.context)
        rebuilt = Trainer.restore(restored_plan, state, reopened.tokens, table, CPU)
        b = continue_three(rebuilt)
        weights_only = Trainer.start(restored_plan, state.model, reopened.tokens, table, CPU)
        c = continue_three(weights_only)
    finally:
        torch.set_rng_state(rng_before)
    return Branches(trainer, rebuilt, weights_only, state.step, a, b, c, untouched)


def test_a_restored_trainer_reads_the_same_windows_and_makes_the_same_losses(branches):
    assert branches.checkpoint_step == 4
    assert [w for w, _ in branches.a] == [w for w, _ in branches.b]
    assert [r.windows_digest for _, r in branches.a] == [r.windows_digest for _, r in branches.b]
    assert [r.loss for _, r in branches.a] == [r.loss for _, r in branches.b]
    assert [r.learning_rate for _, r in branches.a] == [r.learning_rate for _, r in branches.b]
    assert [r.grad_norm for _, r in branches.a] == [r.grad_norm for _, r in branches.b]
    assert [r.targets for _, r in branches.a] == [r.targets for _, r in branches.b]


def test_a_restored_trainer_ends_with_equal_weights_and_adamw_state(branches):
    a, b = branches.in_memory, branches.rebuilt
    weights_a, weights_b = a.weights(), b.weights()
    assert weights_a.keys() == weights_b.keys()
    assert all(torch.equal(weights_a[name], weights_b[name]) for name in weights_a)
    state_a, state_b = a.optimizer_state(), b.optimizer_state()
    assert state_a.keys() == state_b.keys()
    assert all(torch.equal(state_a[key], state_b[key]) for key in state_a)
    assert all(state_a[key].item() == 7 for key in state_a if key.endswith(".step"))
    groups_a = [{k: v for k, v in g.items() if k != "params"} for g in a.optimizer.param_groups]
    groups_b = [{k: v for k, v in g.items() if k != "params"} for g in b.optimizer.param_groups]
    assert groups_a == groups_b


def test_training_draws_nothing_from_torchs_global_generator(branches):
    assert branches.torch_rng_untouched


def test_restoring_only_the_weights_takes_another_trajectory(branches):
    """The textbook's example 2 on a real model: a fresh AdamW after the same weights moves them
    differently, so the losses part from the second continued step on."""
    a, c = branches.a, branches.c
    # The first continued step reads the same weights, windows and masks: the same loss.
    assert [r.windows_digest for _, r in c] == [r.windows_digest for _, r in a]
    assert c[0][1].loss == a[0][1].loss
    # Its update differs, and so does every loss after it.
    assert c[1][1].loss != a[1][1].loss
    assert c[2][1].loss != a[2][1].loss
    weights_a, weights_c = branches.in_memory.weights(), branches.weights_only.weights()
    assert not all(torch.equal(weights_a[name], weights_c[name]) for name in weights_a)
    steps_c = branches.weights_only.optimizer_state()
    assert all(steps_c[key].item() == 3 for key in steps_c if key.endswith(".step"))

"""The trainer, one update at a time: micro-batches, decay scope, clipping, schedule, window order,
determinism and restoring, on a tiny model and corpus built in memory."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import torch

from zrodlo.data.tokenizer.char import BOS, EOS, CharTokenizer
from zrodlo.data.windows import build_windows
from zrodlo.model.config import ModelConfig
from zrodlo.model.directory import Model
from zrodlo.model.weights import initial_weights
from zrodlo.storage.refusal import Refusal
from zrodlo.training.checkpoint import Checkpoint
from zrodlo.training.plan import RunPlan
from zrodlo.training.records import StepRecord
from zrodlo.training.step import Trainer, windows_digest

TOKENIZER = CharTokenizer.fit(["abcdefghi"])  # vocab_size 12
CONFIG = ModelConfig(
    vocab_size=12,
    positions=8,
    d_model=16,
    layers=2,
    heads=2,
    d_ff=32,
    dropout=0.2,
    attention_dropout=0.1,
)


def _corpus(lengths: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """Documents of the given character counts as BOS c1..cn EOS, characters cycling over 3..11."""
    pieces = [
        np.array([BOS, *(3 + (np.arange(n) * 5 + d) % 9), EOS]) for d, n in enumerate(lengths)
    ]
    offsets = np.concatenate([[0], np.cumsum([len(p) for p in pieces])])
    return np.concatenate(pieces).astype(np.int32), offsets


# 15 windows at --context 5, short ones among them, so micro-batches hold unequal target counts.
TOKENS, OFFSETS = _corpus([9, 4, 13, 6, 2, 11])
TABLE = build_windows(OFFSETS, 5)


@pytest.fixture(autouse=True)
def one_thread():
    # Tiny matrix products wait on idle OpenMP threads of a busy machine; one thread is fast.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def plan(**changes: object) -> RunPlan:
    # epsilon 1e-3 keeps AdamW's first update smooth in the gradient, so gradients equal up to
    # rounding give weights equal up to rounding.
    values: dict[str, object] = {
        "steps": 8,
        "context": 5,
        "batch_size": 8,
        "learning_rate": 0.01,
        "beta1": 0.9,
        "beta2": 0.99,
        "epsilon": 1e-3,
        "weight_decay": 0.1,
        "decay_scope": "all",
        "seed": 5,
        "precision": "f32",
    }
    return RunPlan(**{**values, **changes})


def trainer(
    run: RunPlan, config: ModelConfig = CONFIG, weights: dict[str, torch.Tensor] | None = None
) -> Trainer:
    model = Model(Path("tiny"), config, TOKENIZER, weights or initial_weights(config, 7))
    return Trainer.start(run, model, TOKENS, TABLE, torch.device("cpu"))


def step_seen(run: Trainer, n: int) -> tuple[StepRecord, dict[str, torch.Tensor], list[float]]:
    """Make update n; return its record, and the gradients and rates AdamW stepped with."""
    seen: dict[str, torch.Tensor] = {}
    rates: list[float] = []
    original = run.optimizer.step

    def spy(*args, **kwargs):
        seen.update({name: p.grad.clone() for name, p in run.model.named_parameters()})
        rates.extend(group["lr"] for group in run.optimizer.param_groups)
        return original(*args, **kwargs)

    run.optimizer.step = spy
    try:
        return run.step(n), seen, rates
    finally:
        del run.optimizer.step


def snapshot(run: Trainer) -> dict[str, torch.Tensor]:
    return {name: w.clone() for name, w in run.weights().items()}


def test_micro_batches_give_the_batch_windows_loss_gradients_and_weights() -> None:
    outcomes = {}
    for micro in (None, 2, 4):
        run = trainer(plan(micro_batch_size=micro))
        record, gradients, _ = step_seen(run, 0)
        outcomes[micro] = record, gradients, snapshot(run)
    whole, whole_gradients, whole_weights = outcomes[None]
    for micro in (2, 4):
        record, gradients, weights = outcomes[micro]
        assert (record.windows_digest, record.targets) == (whole.windows_digest, whole.targets)
        assert record.loss == pytest.approx(whole.loss, rel=1e-6)
        for name, gradient in whole_gradients.items():
            torch.testing.assert_close(gradients[name], gradient, rtol=1e-5, atol=1e-7)
            torch.testing.assert_close(weights[name], whole_weights[name])


def test_the_loss_of_a_step_drops_with_the_masks_of_the_seed() -> None:
    dropped = trainer(plan()).step(0).loss
    assert trainer(plan()).step(0).loss == dropped
    assert trainer(plan(seed=6)).step(0).loss != dropped
    without = dataclasses.replace(CONFIG, dropout=0.0, attention_dropout=0.0)
    assert trainer(plan(), without).step(0).loss != dropped


def test_matrices_scope_decays_no_bias_and_no_norm_scale() -> None:
    # Biases start at 0, where decay does nothing: move every 1-D weight away from it first.
    start = {name: w + 0.5 if w.dim() == 1 else w for name, w in initial_weights(CONFIG, 7).items()}
    after = {}
    for scope in ("all", "matrices"):
        run = trainer(plan(weight_decay=0.5, decay_scope=scope), weights=start)
        run.step(0)
        after[scope] = snapshot(run)
    assert any(w.dim() == 1 for w in start.values())
    for name, weight in start.items():
        if weight.dim() >= 2:
            assert torch.equal(after["all"][name], after["matrices"][name]), name
        else:
            # "all" also multiplied these by 1 - lr * weight_decay before the same Adam update.
            undecayed = after["matrices"][name] - after["all"][name]
            torch.testing.assert_close(undecayed, 0.01 * 0.5 * weight)


def test_grad_norm_is_reported_before_clipping_and_clipping_changes_the_step() -> None:
    free, clipped = trainer(plan()), trainer(plan(clip_norm=0.01))
    free_record, free_gradients, _ = step_seen(free, 0)
    clipped_record, clipped_gradients, _ = step_seen(clipped, 0)
    assert clipped_record.grad_norm == free_record.grad_norm > 0.01
    norm = torch.linalg.vector_norm(torch.cat([g.flatten() for g in free_gradients.values()]))
    assert free_record.grad_norm == pytest.approx(norm.item(), rel=1e-5)
    clipped_norm = torch.cat([g.flatten() for g in clipped_gradients.values()]).norm()
    assert clipped_norm.item() == pytest.approx(0.01, rel=1e-4)
    assert not all(torch.equal(free.weights()[n], w) for n, w in clipped.weights().items())


@pytest.mark.parametrize("shape", ["linear", "cosine"])
def test_each_update_runs_at_the_rate_the_schedule_gives_it(shape: str) -> None:
    run = plan(
        warmup_steps=2, stable_steps=1, decay_steps=3, decay_shape=shape, min_learning_rate=0.001
    )
    live = trainer(run)
    rates = []
    for n in range(8):
        record, _, used = step_seen(live, n)
        assert set(used) == {record.learning_rate}
        rates.append(record.learning_rate)
    assert rates == [run.schedule.rate(n) for n in range(8)]
    assert rates[:3] == [0.005, 0.01, 0.01]  # warmup ends at the rate, then the stable update
    assert 0.001 < rates[4] < rates[3] < 0.01
    assert rates[5:] == [0.001, 0.001, 0.001]  # the last decay update and after: the minimum


def test_shuffled_steps_read_every_window_once_a_pass_in_the_seed_order() -> None:
    run = trainer(plan(batch_size=5, shuffle=True))
    passes = [np.concatenate([run.stream.indices(n) for n in range(p, p + 3)]) for p in (0, 3)]
    for order in passes:
        assert sorted(order.tolist()) == list(range(len(TABLE)))
    assert passes[0].tolist() != passes[1].tolist()
    same = trainer(plan(batch_size=5, shuffle=True)).stream
    other = trainer(plan(batch_size=5, shuffle=True, seed=6)).stream
    assert np.array_equal(same.indices(4), run.stream.indices(4))
    assert not np.array_equal(other.indices(0), run.stream.indices(0))
    for n in range(3):
        indices = run.stream.indices(n)
        record = run.step(n)
        assert record.windows_digest == windows_digest(indices)
        assert record.targets == TABLE.targets_of(indices)


def test_corpus_order_without_shuffle() -> None:
    stream = trainer(plan(batch_size=4)).stream
    assert [stream.indices(n).tolist() for n in (0, 3, 4)] == [
        [0, 1, 2, 3],
        [12, 13, 14, 0],
        [1, 2, 3, 4],
    ]


def test_the_same_inputs_give_bit_identical_steps_with_dropout() -> None:
    runs = [trainer(plan(shuffle=True, micro_batch_size=4)) for _ in range(2)]
    records = [[run.step(n) for n in range(3)] for run in runs]
    for first, second in zip(*records, strict=True):
        assert (first.windows_digest, first.loss, first.grad_norm) == (
            second.windows_digest,
            second.loss,
            second.grad_norm,
        )
    for weights in ("weights", "optimizer_state"):
        a, b = (getattr(run, weights)() for run in runs)
        assert a.keys() == b.keys()
        assert all(torch.equal(a[name], b[name]) for name in a), weights


def test_a_restored_trainer_continues_the_uninterrupted_one() -> None:
    run = plan(shuffle=True)
    uninterrupted = trainer(run)
    expected = [uninterrupted.step(n) for n in range(3)]
    first = trainer(run)
    first.step(0)
    saved = Checkpoint(
        Model(Path("tiny"), CONFIG, TOKENIZER, snapshot(first)),
        first.optimizer_state(),
        {"step": 1},
    )
    restored = Trainer.restore(run, saved, TOKENS, TABLE, torch.device("cpu"))
    continued = [restored.step(n) for n in (1, 2)]
    assert [(r.windows_digest, r.loss) for r in continued] == [
        (r.windows_digest, r.loss) for r in expected[1:]
    ]
    final = uninterrupted.weights()
    assert all(torch.equal(w, final[name]) for name, w in restored.weights().items())


def test_a_non_finite_loss_is_refused_before_the_weights_change() -> None:
    run = trainer(plan(learning_rate=1e30))
    run.step(0)
    before = snapshot(run)
    with pytest.raises(Refusal) as refused:
        run.step(1)
    assert refused.value.sentence in {
        f"the step after step 1 produced loss {loss}; lower --learning-rate or check the corpus"
        for loss in ("nan", "inf")
    }
    assert all(torch.equal(w, before[name]) for name, w in run.weights().items())
    assert all(p.grad is None for p in run.model.parameters())


def test_a_learning_rate_that_overflows_float32_is_refused_at_its_update() -> None:
    run = plan(learning_rate=1e38)
    run.validate()  # finite, so the flag check accepts it; float32 cannot take its step size
    with pytest.raises(Refusal) as refused:
        trainer(run).step(0)
    assert refused.value.sentence.startswith(
        "the update after step 0 at learning rate 1e+38 does not fit float32 ("
    )
    assert refused.value.sentence.endswith("); lower --learning-rate")


def test_an_epsilon_that_float32_rounds_to_zero_is_refused() -> None:
    with pytest.raises(Refusal) as refused:
        plan(epsilon=1e-50).validate()
    assert refused.value.sentence == (
        "--epsilon is 1e-50, which float32 cannot hold; it must be at least 1.1754943508222875e-38"
    )


def test_a_model_whose_weights_fit_is_read_and_trains_what_fits(tmp_path):
    """A model whose float32 weights fit in this machine's memory but whose training state of
    every weight (weights, gradients, two AdamW moments: four times as much) does not, as a 1.7B
    model's on 23 GiB: its configuration is taken (imported, scored, sampled, exported), a run of
    every weight is refused before anything is allocated, and a run of adapters is not."""
    from zrodlo.model.config import machine_memory
    from zrodlo.model.parts import parameter_count
    from zrodlo.training.step import _check_step_fits

    width = 256
    # Weights of four tenths of the memory (the embedding and the untied head hold nearly all of
    # them), so that the state of every weight is sixteen tenths.
    rows = machine_memory() * 4 // 10 // (4 * width)
    config = ModelConfig.of(
        vocab_size=rows // 2, positions=16, d_model=width, layers=1, heads=4, d_ff=width,
        dropout=0.0, architecture="llama",
    )  # fmt: skip
    config.validate()
    assert 4 * parameter_count(config) * 4 > machine_memory() > parameter_count(config) * 4
    plan = RunPlan(steps=1, context=9, batch_size=2, learning_rate=0.01, beta1=0.9, beta2=0.99,
                   epsilon=1e-8, weight_decay=0.0, decay_scope="matrices", seed=1,
                   precision="f32", shuffle=True)  # fmt: skip
    with pytest.raises(Refusal) as refused:
        _check_step_fits(config, plan, torch.device("cpu"))
    assert "of weights, gradients and AdamW moments is more than the" in refused.value.sentence
    _check_step_fits(config, dataclasses.replace(plan, lora_rank=4), torch.device("cpu"))

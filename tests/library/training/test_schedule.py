"""The learning-rate schedule: every phase boundary, both decay shapes, and each refusal."""

import itertools
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zrodlo.storage.refusal import Refusal
from zrodlo.training.schedule import Schedule, check_learning_rate


def test_constant_without_warmup_or_decay() -> None:
    schedule = Schedule(learning_rate=0.01)
    assert [schedule.rate(n) for n in (0, 1, 1000)] == [0.01, 0.01, 0.01]


def test_warmup_rises_linearly_and_reaches_the_rate_at_its_last_update() -> None:
    schedule = Schedule(learning_rate=0.4, warmup_steps=4)
    assert [schedule.rate(n) for n in range(6)] == [0.1, 0.2, 0.30000000000000004, 0.4, 0.4, 0.4]


def test_stable_then_linear_decay_boundaries() -> None:
    schedule = Schedule(
        learning_rate=1.0,
        warmup_steps=2,
        stable_steps=3,
        decay_steps=4,
        decay_shape="linear",
        min_learning_rate=0.2,
    )
    rates = [schedule.rate(n) for n in range(12)]
    # warmup: updates 0, 1; stable: 2, 3, 4; decay: 5..8; held after: 9 on
    assert rates[:5] == [0.5, 1.0, 1.0, 1.0, 1.0]
    assert rates[5:9] == pytest.approx([0.8, 0.6, 0.4, 0.2])
    assert rates[8] == 0.2  # the last decay update runs at the minimum exactly
    assert rates[9:] == [0.2, 0.2, 0.2]


def test_cosine_decay_is_half_a_period_ending_at_the_minimum() -> None:
    schedule = Schedule(
        learning_rate=1.0, decay_steps=4, decay_shape="cosine", min_learning_rate=0.0
    )
    rates = [schedule.rate(n) for n in range(6)]
    expected = [0.5 * (1 + math.cos(math.pi * k / 4)) for k in (1, 2, 3)]
    assert rates[:3] == pytest.approx(expected)
    assert rates[1] == pytest.approx(0.5)  # fastest fall at the midpoint
    assert rates[3:] == [0.0, 0.0, 0.0]


def test_decay_without_stable_starts_right_after_warmup() -> None:
    schedule = Schedule(
        learning_rate=1.0,
        warmup_steps=1,
        decay_steps=2,
        decay_shape="linear",
        min_learning_rate=0.5,
    )
    assert [schedule.rate(n) for n in range(4)] == [1.0, 0.75, 0.5, 0.5]


def test_zero_decay_steps_is_a_step_down() -> None:
    schedule = Schedule(
        learning_rate=1.0,
        stable_steps=2,
        decay_steps=0,
        decay_shape="linear",
        min_learning_rate=0.1,
    )
    assert [schedule.rate(n) for n in range(4)] == [1.0, 1.0, 0.1, 0.1]


@given(
    warmup=st.integers(0, 20),
    stable=st.integers(0, 20),
    decay=st.integers(1, 20),
    shape=st.sampled_from(["cosine", "linear"]),
    fraction=st.floats(0.0, 1.0),
)
def test_rate_stays_between_minimum_and_peak_and_never_rises_after_warmup(
    warmup: int, stable: int, decay: int, shape: str, fraction: float
) -> None:
    schedule = Schedule(
        learning_rate=0.3,
        warmup_steps=warmup,
        stable_steps=stable,
        decay_steps=decay,
        decay_shape=shape,
        min_learning_rate=0.3 * fraction,
    )
    schedule.validate()
    rates = [schedule.rate(n) for n in range(warmup + stable + decay + 3)]
    after = rates[warmup:]
    assert all(a >= b for a, b in itertools.pairwise(after))
    assert all(0.3 * fraction <= r <= 0.3 for r in after)
    assert rates[warmup + stable + decay - 1] == 0.3 * fraction
    if warmup:
        assert rates[warmup - 1] == 0.3


def test_rate_is_a_pure_function_of_the_update() -> None:
    schedule = Schedule(
        learning_rate=0.1, warmup_steps=3, decay_steps=5, decay_shape="cosine", min_learning_rate=0
    )
    forward = [schedule.rate(n) for n in range(10)]
    backward = [schedule.rate(n) for n in reversed(range(10))][::-1]
    assert forward == backward


REFUSALS = [
    (
        dict(learning_rate=float("nan")),
        "--learning-rate is nan; it must be a positive finite number",
    ),
    (dict(learning_rate=-0.1), "--learning-rate is -0.1; it must be a positive finite number"),
    (dict(learning_rate=0.0), "--learning-rate is 0.0; it must be a positive finite number"),
    (
        dict(learning_rate=float("inf")),
        "--learning-rate is inf; it must be a positive finite number",
    ),
    (
        dict(learning_rate=0.1, decay_steps=5, decay_shape="cosine"),
        "--decay-steps needs --min-learning-rate, the rate the decay ends at",
    ),
    (
        dict(learning_rate=0.1, min_learning_rate=0.01),
        "--min-learning-rate needs --decay-steps, the updates the rate decays over",
    ),
    (
        dict(learning_rate=0.1, decay_steps=5, min_learning_rate=0.01),
        "--decay-steps needs --decay-shape, cosine or linear, the way the rate falls",
    ),
    (
        dict(learning_rate=0.1, decay_shape="linear"),
        "--decay-shape shapes a decay, and no --decay-steps is given",
    ),
    (
        dict(learning_rate=0.1, stable_steps=3),
        "--stable-steps holds the rate before a decay, and no --decay-steps is given; "
        "without a decay the rate stays at --learning-rate",
    ),
    (
        dict(learning_rate=0.1, decay_steps=5, decay_shape="linear", min_learning_rate=0.2),
        "--min-learning-rate is 0.2; it must be a finite number from zero up to --learning-rate 0.1",
    ),
    (
        dict(learning_rate=0.1, decay_steps=5, decay_shape="linear", min_learning_rate=-1e-05),
        "--min-learning-rate is -1e-05; it must be a finite number from zero up to "
        "--learning-rate 0.1",
    ),
    (
        dict(learning_rate=0.1, decay_steps=5, decay_shape="linear", min_learning_rate=math.nan),
        "--min-learning-rate is nan; it must be a finite number from zero up to --learning-rate 0.1",
    ),
    (
        dict(learning_rate=0.1, warmup_steps=-1),
        "--warmup-steps is -1; it must be a whole number of updates, zero or more",
    ),
    (
        dict(
            learning_rate=0.1,
            stable_steps=-2,
            decay_steps=5,
            decay_shape="linear",
            min_learning_rate=0.0,
        ),
        "--stable-steps is -2; it must be a whole number of updates, zero or more",
    ),
    (
        dict(learning_rate=0.1, decay_steps=-5, decay_shape="linear", min_learning_rate=0.0),
        "--decay-steps is -5; it must be a whole number of updates, zero or more",
    ),
]


@pytest.mark.parametrize(("flags", "sentence"), REFUSALS)
def test_each_refusal_sentence(flags: dict, sentence: str) -> None:
    with pytest.raises(Refusal) as caught:
        Schedule(**flags).validate()
    assert caught.value.sentence == sentence


def test_refusals_follow_the_seed_order() -> None:
    # A bad rate is named before the missing pair, and the pairs before the minimum's range.
    with pytest.raises(Refusal) as caught:
        Schedule(learning_rate=-1.0, decay_steps=3).validate()
    assert caught.value.sentence.startswith("--learning-rate is -1.0;")
    with pytest.raises(Refusal) as caught:
        Schedule(learning_rate=0.1, decay_steps=3, stable_steps=-1).validate()
    assert caught.value.sentence.startswith("--decay-steps needs --min-learning-rate")


def test_check_learning_rate_alone() -> None:
    check_learning_rate(3e-4)
    with pytest.raises(Refusal) as caught:
        check_learning_rate(-0.1)
    assert caught.value.sentence == "--learning-rate is -0.1; it must be a positive finite number"


def test_valid_flag_sets_pass() -> None:
    Schedule(learning_rate=0.1).validate()
    Schedule(learning_rate=0.1, warmup_steps=10).validate()
    Schedule(
        learning_rate=0.1,
        warmup_steps=10,
        stable_steps=0,
        decay_steps=0,
        decay_shape="cosine",
        min_learning_rate=0.1,
    ).validate()

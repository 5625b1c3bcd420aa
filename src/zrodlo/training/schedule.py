"""The learning rate of every update, as a pure function of the update's index.

Update n (0-based) is the optimizer update that turns step n into step n+1. With W warmup, S stable
and D decay updates, peak rate `lr` and final rate `min_lr`:

- warmup, n < W:                 rate = lr * (n + 1) / W, so update W-1 runs at lr exactly;
- stable, W <= n < W + S:        rate = lr;
- decay, W + S <= n < W + S + D: with k = n - W - S and progress t = (k + 1) / D,
  linear: rate = lr + (min_lr - lr) * t; cosine: rate = min_lr + (lr - min_lr) * (1 + cos(pi t)) / 2,
  so the first decay update is already below lr and the last one (t = 1) runs at min_lr exactly;
- after, n >= W + S + D:         rate = min_lr.

Without --decay-steps the rate stays at lr after the warmup (stable updates then mean nothing, so
--stable-steps is refused without a decay). A decay of zero updates is a step down: min_lr from
update W + S on. Because the rate depends on n alone, a resumed run needs only its step count to
continue the same schedule.
"""

import math
from dataclasses import dataclass

from zrodlo.storage.refusal import Refusal, shown

DECAY_SHAPES = ("cosine", "linear")


class ScheduleWarning(UserWarning):
    """A schedule that ends after the run's last step: seed 001 allows it, and the run says so
    before its first step, since the rate then never reaches the end it was given."""


def check_learning_rate(learning_rate: float) -> None:
    """Refuse a peak rate that is not a positive finite number (seed 001's first sentence)."""
    if not (math.isfinite(learning_rate) and learning_rate > 0):
        raise Refusal(
            f"--learning-rate is {shown(learning_rate)}; it must be a positive finite number"
        )


def _check_count(flag: str, value: int | None) -> None:
    if value is not None and value < 0:
        raise Refusal(
            f"{flag} is {shown(value)}; it must be a whole number of updates, zero or more"
        )


@dataclass(frozen=True)
class Schedule:
    """The flags that shape the rate; `None` marks a flag that was not given."""

    learning_rate: float
    warmup_steps: int = 0
    stable_steps: int | None = None
    decay_steps: int | None = None
    decay_shape: str | None = None
    min_learning_rate: float | None = None

    def validate(self) -> None:
        """Raise the first refusal that applies, in the order seed 001 lists them.

        The learning rate comes first; the optimizer's own values (epsilon, betas, weight decay,
        clip norm) come between it and the rest in that listing, so a caller that checks them too
        calls `check_learning_rate`, then those, then this (which repeats the cheap rate check).
        Counts below zero, which the seed does not list, come last.
        """
        check_learning_rate(self.learning_rate)
        if self.decay_steps is not None and self.min_learning_rate is None:
            raise Refusal("--decay-steps needs --min-learning-rate, the rate the decay ends at")
        if self.min_learning_rate is not None and self.decay_steps is None:
            raise Refusal(
                "--min-learning-rate needs --decay-steps, the updates the rate decays over"
            )
        if self.decay_steps is not None and self.decay_shape is None:
            raise Refusal(
                "--decay-steps needs --decay-shape, cosine or linear, the way the rate falls"
            )
        if self.decay_shape is not None and self.decay_steps is None:
            raise Refusal("--decay-shape shapes a decay, and no --decay-steps is given")
        if self.stable_steps is not None and self.decay_steps is None:
            raise Refusal(
                "--stable-steps holds the rate before a decay, and no --decay-steps is given; "
                "without a decay the rate stays at --learning-rate"
            )
        if self.min_learning_rate is not None and not (
            math.isfinite(self.min_learning_rate)
            and 0 <= self.min_learning_rate <= self.learning_rate
        ):
            raise Refusal(
                f"--min-learning-rate is {shown(self.min_learning_rate)}; it must be a finite "
                f"number from zero up to --learning-rate {shown(self.learning_rate)}"
            )
        if self.decay_shape is not None and self.decay_shape not in DECAY_SHAPES:
            # The command line passes the value as typed, so an unknown name is refused here.
            raise Refusal(
                f"--decay-shape is '{self.decay_shape}'; a decay falls along a cosine or a linear"
            )
        _check_count("--warmup-steps", self.warmup_steps)
        _check_count("--stable-steps", self.stable_steps)
        _check_count("--decay-steps", self.decay_steps)

    def unfinished(self, steps: int) -> str | None:
        """What a run of `steps` updates should hear when this schedule ends after its last
        update (None when it ends within it)."""
        given = [("--warmup-steps", self.warmup_steps)]
        if self.decay_steps is None:
            end, target = self.warmup_steps, ("--learning-rate", self.learning_rate)
        else:
            given += [("--stable-steps", self.stable_steps), ("--decay-steps", self.decay_steps)]
            end = self.warmup_steps + (self.stable_steps or 0) + self.decay_steps
            target = ("--min-learning-rate", self.min_learning_rate)
        if end <= steps:
            return None
        flags = ", ".join(f"{flag} {value}" for flag, value in given if value is not None)
        return (
            f"the learning-rate schedule ends after update {end} ({flags}), and --steps is "
            f"{steps}: the rate never reaches {target[0]} {shown(target[1])}; the run goes on"
        )

    def rate(self, update: int) -> float:
        """The learning rate of 0-based update `update` (the one that produces step update+1)."""
        if update < 0:
            raise ValueError(f"update index {update} is negative")
        lr = self.learning_rate
        if update < self.warmup_steps:
            return lr * (update + 1) / self.warmup_steps
        if self.decay_steps is None:
            return lr
        after_warmup = update - self.warmup_steps
        stable = self.stable_steps or 0
        if after_warmup < stable:
            return lr
        k = after_warmup - stable
        min_lr = self.min_learning_rate
        assert min_lr is not None, "validate() pairs --decay-steps with --min-learning-rate"
        if k >= self.decay_steps - 1:
            # The last decay update and every one after run at min_lr exactly, not at a value
            # a rounding away from it.
            return min_lr
        t = (k + 1) / self.decay_steps
        if self.decay_shape == "linear":
            return lr + (min_lr - lr) * t
        return min_lr + (lr - min_lr) * 0.5 * (1.0 + math.cos(math.pi * t))

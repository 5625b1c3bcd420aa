"""The train stage's learning-rate schedule: params.yaml gives its warmup and decay as shares of
train.steps, and model train takes them, as seed 001 does, in whole updates.
"""

from __future__ import annotations

import math
from fractions import Fraction

from zrodlo.storage.refusal import Refusal


def schedule_steps(train: dict) -> dict[str, int]:
    """The train stage's schedule as model train's flags: params.yaml gives the warmup and the
    decay as shares of train.steps (`train.warmup`, `train.decay`), rounded down to whole updates,
    and the stable updates fill the rest, so that the decay ends at train.steps for any steps."""
    steps = train.get("steps")
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise Refusal(f"train.steps is {steps}; it must be a whole number of 1 or more")
    shares = {}
    for name in ("warmup", "decay"):
        share = train.get(name)
        if isinstance(share, bool) or not isinstance(share, int | float) or not 0 <= share <= 1:
            raise Refusal(
                f"train.{name} is {share}; it is a share of train.steps, a number from 0 to 1"
            )
        # The decimal the params hold, not the binary float nearest it: 0.1 of 1000 is 100.
        shares[name] = math.floor(Fraction(str(share)) * steps)
    if Fraction(str(train["warmup"])) + Fraction(str(train["decay"])) > 1:
        raise Refusal(
            f"train.warmup {train['warmup']} and train.decay {train['decay']} add up to more "
            "than train.steps; the decay ends at the last step"
        )
    return {
        "warmup_steps": shares["warmup"],
        "stable_steps": steps - shares["warmup"] - shares["decay"],
        "decay_steps": shares["decay"],
    }

"""The optimizers' settings besides the learning rate, each checked with seed 001's sentences.

AdamW (`AdamWSettings`) trains every weight of a run by default; Muon (`MuonSettings`) trains a
run's hidden matrices with AdamW beside it for the embeddings, the head and the vectors, each of
those groups at its own rate. Nothing here needs torch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from zrodlo.storage.refusal import Refusal, shown

DECAY_SCOPES = ("all", "matrices")
SMALLEST_NORMAL_F32 = float(np.finfo(np.float32).tiny)


def positive_finite(value: float) -> bool:
    return math.isfinite(value) and value > 0


@dataclass(frozen=True)
class AdamWSettings:
    """AdamW's values besides the learning rate, which the schedule sets every update."""

    beta1: float
    beta2: float
    epsilon: float
    weight_decay: float
    decay_scope: str = "all"

    def validate(self) -> None:
        """Raise the first refusal that applies, in seed 001's order: epsilon, betas, decay."""
        if not positive_finite(self.epsilon):
            raise Refusal(
                f"--epsilon is {shown(self.epsilon)}; it must be a positive finite number"
            )
        if float(np.float32(self.epsilon)) < SMALLEST_NORMAL_F32:
            # AdamW adds epsilon to float32 moments: below float32's normal range it rounds to
            # zero (or loses its precision), and a weight whose gradient is zero turns into 0/0.
            raise Refusal(
                f"--epsilon is {shown(self.epsilon)}, which float32 cannot hold; it must be at "
                f"least {SMALLEST_NORMAL_F32!r}"
            )
        for flag, beta in (("--beta1", self.beta1), ("--beta2", self.beta2)):
            # A NaN fails both comparisons, so it is refused too.
            if not (0 < beta < 1):
                raise Refusal(
                    f"{flag} is {shown(beta)}; a moment decay lies above zero and below 1"
                )
        if not (math.isfinite(self.weight_decay) and self.weight_decay >= 0):
            raise Refusal(
                f"--weight-decay is {shown(self.weight_decay)}; "
                "it must be a finite number that is not negative"
            )
        if self.decay_scope not in DECAY_SCOPES:
            # The command line passes the value as typed, so an unknown name is refused here.
            raise Refusal(
                f"--decay-scope is '{self.decay_scope}'; the weights that decay are all or matrices"
            )


def check_clip_norm(value: float | None) -> None:
    """Refuse a clip norm that is given and is not a positive finite number."""
    if value is not None and not positive_finite(value):
        raise Refusal(f"--clip-norm is {shown(value)}; it must be a positive finite number")


OPTIMIZERS = ("adamw", "muon")
# The momentum a Muon run starts at; it moves linearly to --muon-momentum over the warmup, as the
# references warm it (a lower momentum early, while the gradients change fast).
MUON_FIRST_MOMENTUM = 0.85
MUON_MOMENTUM = 0.95
MUON_MOMENTUM_WARMUP = 300


@dataclass(frozen=True)
class MuonSettings:
    """Muon's momentum and its warmup, and the AdamW rates of the weights Muon does not train:
    the embeddings, the head, and the vectors (norm scales and biases). Each rate is the group's
    peak; the schedule scales every group alike, by its rate over --learning-rate."""

    momentum: float
    momentum_warmup: int
    embedding_rate: float
    head_rate: float
    vector_rate: float

    def validate(self) -> None:
        """Raise the first refusal that applies: the momentum, its warmup, then the rates."""
        if not (0 <= self.momentum < 1):
            raise Refusal(
                f"--muon-momentum is {shown(self.momentum)}; a momentum lies from zero up to, "
                "and not at, 1"
            )
        warmup = self.momentum_warmup
        if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
            raise Refusal(
                f"--muon-momentum-warmup is {warmup}; it must be a whole number of updates, "
                "zero or more"
            )
        for flag, rate in (
            ("--embedding-rate", self.embedding_rate),
            ("--head-rate", self.head_rate),
            ("--vector-rate", self.vector_rate),
        ):
            if isinstance(rate, bool) or not positive_finite(rate):
                raise Refusal(f"{flag} is {shown(rate)}; it must be a positive finite number")

    def momentum_at(self, update: int) -> float:
        """The momentum of 0-based update `update`: from MUON_FIRST_MOMENTUM at update 0 linearly
        to `momentum` at update `momentum_warmup` and after, a function of the update alone."""
        if update >= self.momentum_warmup:
            return self.momentum
        share = update / self.momentum_warmup
        return MUON_FIRST_MOMENTUM + (self.momentum - MUON_FIRST_MOMENTUM) * share


# The plan's fields that set Muon, in MuonSettings' order, and their flags.
MUON_KEYS = (
    "muon_momentum",
    "muon_momentum_warmup",
    "embedding_rate",
    "head_rate",
    "vector_rate",
)
MUON_FLAGS = tuple("--" + key.replace("_", "-") for key in MUON_KEYS)


def resolved_muon(
    optimizer: str, learning_rate: float, values: tuple[float | int | None, ...]
) -> MuonSettings | None:
    """The settings MUON_KEYS' `values` give a run of `optimizer`, each None resolved: the
    references' momentum and warmup, and --learning-rate for a rate. None unless it is muon."""
    if optimizer != "muon":
        return None
    momentum, warmup, *rates = values
    return MuonSettings(
        MUON_MOMENTUM if momentum is None else momentum,
        MUON_MOMENTUM_WARMUP if warmup is None else warmup,
        *(learning_rate if rate is None else rate for rate in rates),
    )


def check_optimizer(
    optimizer: str, lora_rank: int | None, values: tuple[float | int | None, ...]
) -> None:
    """Refuse an unknown optimizer, Muon's settings given to AdamW, and Muon over adapters."""
    if optimizer not in OPTIMIZERS:
        raise Refusal(f"--optimizer is {optimizer!r}; it takes adamw or muon")
    if optimizer != "muon":
        for flag, value in zip(MUON_FLAGS, values, strict=True):
            if value is not None:
                raise Refusal(f"{flag} needs --optimizer muon, whose setting it is")
    elif lora_rank is not None:
        raise Refusal(
            "--optimizer muon trains whole matrices, and --lora-rank trains adapters; "
            "adapters train with --optimizer adamw"
        )

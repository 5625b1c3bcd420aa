"""The plan of a training run: every hyperparameter, checked, recorded and read back.

A plan is what trainer.json records and what a resume continues with; a run's outcome is a function
of its plan, its starting weights and its corpus. The checks raise seed 001's sentences in the order
the seed lists them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from zrodlo.data.windows import check_context
from zrodlo.draws.chacha import check_seed
from zrodlo.model.precision import PRECISIONS
from zrodlo.storage.refusal import Refusal
from zrodlo.training.optimizer import AdamWSettings, check_clip_norm
from zrodlo.training.schedule import Schedule, check_learning_rate


def _check_whole(flag: str, value: int | None, least: int = 1) -> None:
    if value is not None and (
        isinstance(value, bool) or not isinstance(value, int) or value < least
    ):
        raise Refusal(f"{flag} is {value}; it must be a whole number of {least} or more")


@dataclass(frozen=True)
class RunPlan:
    """Every value that shapes a run's updates, plus when it scores and writes checkpoints."""

    steps: int
    context: int
    batch_size: int
    learning_rate: float
    beta1: float
    beta2: float
    epsilon: float
    weight_decay: float
    decay_scope: str
    seed: int
    precision: str
    micro_batch_size: int | None = None
    warmup_steps: int = 0
    stable_steps: int | None = None
    decay_steps: int | None = None
    decay_shape: str | None = None
    min_learning_rate: float | None = None
    clip_norm: float | None = None
    shuffle: bool = False
    eval_every: int | None = None
    checkpoint_every: int | None = None
    keep_checkpoints: int | None = None

    @property
    def schedule(self) -> Schedule:
        return Schedule(
            self.learning_rate,
            self.warmup_steps,
            self.stable_steps,
            self.decay_steps,
            self.decay_shape,
            self.min_learning_rate,
        )

    @property
    def adamw(self) -> AdamWSettings:
        return AdamWSettings(
            self.beta1, self.beta2, self.epsilon, self.weight_decay, self.decay_scope
        )

    @property
    def micro_batch(self) -> int:
        return self.micro_batch_size or self.batch_size

    def validate(self) -> None:
        """Refuse the first flag value that cannot make a run, in seed 001's order."""
        check_learning_rate(self.learning_rate)
        self.adamw.validate()
        check_clip_norm(self.clip_norm)
        self.schedule.validate()
        _check_whole("--steps", self.steps)
        _check_whole("--batch-size", self.batch_size)
        _check_whole("--micro-batch-size", self.micro_batch_size)
        if self.micro_batch_size is not None and self.batch_size % self.micro_batch_size:
            raise Refusal(
                f"--micro-batch-size {self.micro_batch_size} does not divide --batch-size "
                f"{self.batch_size}; every micro-batch of a step holds the same number of windows"
            )
        check_context(self.context)
        check_seed(self.seed)
        if not isinstance(self.shuffle, bool):  # a flag is a switch; a record may say anything
            raise Refusal(f"--shuffle is {self.shuffle!r}; it is a switch, on or off")
        if self.precision not in PRECISIONS:
            raise Refusal(f"--precision is {self.precision!r}; it takes f32 or bf16")
        _check_whole("--eval-every", self.eval_every)
        _check_whole("--checkpoint-every", self.checkpoint_every)
        _check_whole("--keep-checkpoints", self.keep_checkpoints)

    def checkpoint_steps(self, done: int) -> list[int]:
        """The steps after `done` that write a checkpoint: the multiples of --checkpoint-every
        (counted from step 0, so a resume keeps the same ones) and always the last."""
        steps = {self.steps}
        if self.checkpoint_every is not None:
            every = self.checkpoint_every
            steps.update(range((done // every + 1) * every, self.steps + 1, every))
        return sorted(steps)

    def scores_at(self, step: int) -> bool:
        """Whether the held-out corpus is scored after `step` updates."""
        if self.eval_every is None:
            return False
        return step % self.eval_every == 0 or step == self.steps

    def hyperparameters(self) -> dict[str, Any]:
        """The values trainer.json records; the run's outcome depends on these alone."""
        data = asdict(self)
        for key in ("steps", "eval_every", "checkpoint_every", "keep_checkpoints"):
            data.pop(key)
        return data

    @classmethod
    def from_hyperparameters(cls, data: dict[str, Any], **rest: Any) -> RunPlan:
        """The plan recorded by `hyperparameters`, with the run's own steps and schedule of writes."""
        return cls(**data, **rest)

"""The plan of a training run: every hyperparameter, declared once, checked, recorded and read back.

A plan is what trainer.json records and what a resume continues with; a run's outcome is a function
of its plan, its starting weights and its corpus. Each field carries the help its command-line
option shows (the command line, the Python API and params.yaml all follow these declarations), and
`validate` raises seed 001's sentences in the order the seed lists them. Nothing here needs torch,
so the command line reads the declarations without loading it.
"""

from __future__ import annotations

from dataclasses import asdict, astuple, dataclass
from typing import Any

from zrodlo.data.windows import check_context
from zrodlo.draws.chacha import check_seed
from zrodlo.model.adapter_spec import DEFAULT_TARGETS, AdapterSpec, check_adapter_flags
from zrodlo.model.declared import option
from zrodlo.storage.refusal import Refusal
from zrodlo.training.optimizer_settings import (
    MUON_FIRST_MOMENTUM,
    MUON_KEYS,
    MUON_MOMENTUM,
    MUON_MOMENTUM_WARMUP,
    AdamWSettings,
    MuonSettings,
    check_clip_norm,
    check_optimizer,
    resolved_muon,
)
from zrodlo.training.schedule import Schedule, check_learning_rate

PRECISIONS = ("f32", "bf16")


# The most steps a run makes: a step's dropout masks are drawn from the ChaCha20 nonce that holds
# its index in 32 bits.
MAX_STEPS = 2**32


def _check_whole(flag: str, value: int | None, least: int = 1, most: int | None = None) -> None:
    if value is not None and (
        isinstance(value, bool) or not isinstance(value, int) or value < least
    ):
        raise Refusal(f"{flag} is {value}; it must be a whole number of {least} or more")
    if value is not None and most is not None and value > most:
        raise Refusal(f"{flag} is {value}; it must be a whole number from {least} to {most:,}")


@dataclass(frozen=True, kw_only=True)
class RunPlan:
    """Every value that shapes a run's updates, plus when it scores and writes checkpoints.

    The fields stay in this order: trainer.json records them in it."""

    steps: int = option(
        "How many optimizer updates the run makes. With --params, the warmup and the decay follow "
        "it: the shares train.warmup and train.decay are taken of these steps."
    )
    context: int = option("Tokens per training window; the model reads all but the last.")
    batch_size: int = option("Windows per optimizer update.")
    learning_rate: float = option("AdamW's step size: a positive finite number.")
    beta1: float = option("AdamW's decay of the gradient's running mean, between 0 and 1.")
    beta2: float = option("AdamW's decay of the squared gradient's running mean, between 0 and 1.")
    epsilon: float = option("AdamW's term added to the denominator: a positive finite number.")
    weight_decay: float = option("AdamW's decoupled weight decay: a finite number, zero or more.")
    decay_scope: str = option(
        "The weights --weight-decay pulls toward zero: all, or matrices only (no biases or norm "
        "scales).",
        metavar="[all|matrices]",
    )
    seed: int = option(
        "Keys the dropout masks and the shuffled window order; a resumed run keeps it."
    )
    precision: str = option(
        "f32, or bf16 for mixed precision on a GPU; a resumed run keeps it.", metavar="[f32|bf16]"
    )
    micro_batch_size: int | None = option(
        "Windows per forward pass, dividing --batch-size; the step's gradient is the sum over its "
        "micro-batches.",
        None,
    )
    warmup_steps: int = option(
        "Updates over which the learning rate rises linearly to --learning-rate.", 0
    )
    stable_steps: int | None = option(
        "Updates after the warmup at the full rate before the decay starts; needs --decay-steps.",
        None,
    )
    decay_steps: int | None = option(
        "Updates over which the rate falls in --decay-shape to --min-learning-rate.", None
    )
    decay_shape: str | None = option(
        "How the rate falls over --decay-steps: cosine or linear; required with it.",
        None,
        metavar="[cosine|linear]",
    )
    min_learning_rate: float | None = option(
        "The rate the decay ends at and keeps; required with --decay-steps.", None
    )
    clip_norm: float | None = option(
        "The largest global L2 norm a step's gradient keeps; a larger one is scaled down to it.",
        None,
    )
    shuffle: bool = option(
        "Read each pass over the corpus in an order drawn from --seed and the pass.", False
    )
    eval_every: int | None = option(
        "Steps between held-out scores, and the last step; needs --eval-corpus.", None
    )
    eval_windows: int | None = option(
        "Score the held-out corpus on this many of its windows, drawn once from --seed: the same "
        "ones at every score and on resume. Every window if left out.",
        None,
    )
    checkpoint_every: int | None = option(
        "Steps between checkpoints written under --output; the last step is always written.", None
    )
    keep_checkpoints: int | None = option(
        "Keep only the newest this many checkpoints under --output, removing older ones as new "
        "ones are written.",
        None,
    )
    lora_rank: int | None = option(
        "Train low-rank adapters (LoRA) of this rank beside the frozen weights instead of every "
        "weight: the checkpoints hold the adapters, and name the model they adapt by digest.",
        None,
    )
    lora_alpha: float | None = option(
        "The adapters' output is scaled by --lora-alpha / --lora-rank; by default --lora-rank "
        "(a scale of 1). Needs --lora-rank.",
        None,
    )
    lora_targets: str | None = option(
        "The projections that take adapters, comma-separated: q, k, v, o, up, down, and gate "
        "where the family gates its feed-forward; by default q,v. Needs --lora-rank.",
        None,
    )
    lora_base: str | None = option(
        "The format the frozen weights are held in under adapters: f32 (the default), or bf16 "
        "for half their memory (the base rounded to bfloat16; every product, the adapters and "
        "their AdamW state stay float32). Needs --lora-rank.", None, metavar="[f32|bf16]"
    )  # fmt: skip
    optimizer: str = option(
        "adamw: AdamW on every weight; muon: Muon on the blocks' matrices (momentum orthogonalised "
        "in float32) at --learning-rate, AdamW on the embeddings, the head and the vectors at "
        "their own rates (docs/training.md).",
        "adamw",
        metavar="[adamw|muon]",
    )
    muon_momentum: float | None = option(
        f"Muon's momentum after its warmup; {MUON_MOMENTUM} where left out. Needs --optimizer muon.",
        None,
    )
    muon_momentum_warmup: int | None = option(
        f"Updates over which Muon's momentum moves linearly from {MUON_FIRST_MOMENTUM} to "
        f"--muon-momentum; {MUON_MOMENTUM_WARMUP} where left out. Needs --optimizer muon.",
        None,
    )
    embedding_rate: float | None = option(
        "AdamW's peak rate for the embeddings under --optimizer muon; --learning-rate where left "
        "out. The schedule scales it as it scales --learning-rate.",
        None,
    )
    head_rate: float | None = option(
        "AdamW's peak rate for an untied head under --optimizer muon; --learning-rate where left "
        "out.",
        None,
    )
    vector_rate: float | None = option(
        "AdamW's peak rate for norm scales and biases under --optimizer muon; --learning-rate "
        "where left out.",
        None,
    )

    @property
    def adapters(self) -> AdapterSpec | None:
        """The adapters the run trains, None where it trains every weight."""
        if self.lora_rank is None:
            return None
        alpha = self.lora_rank if self.lora_alpha is None else self.lora_alpha
        targets = DEFAULT_TARGETS if self.lora_targets is None else self.lora_targets.split(",")
        base = "f32" if self.lora_base is None else self.lora_base
        return AdapterSpec(self.lora_rank, float(alpha), tuple(targets), base)

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
    def muon(self) -> MuonSettings | None:
        """Muon's settings, each default resolved; None for a run of AdamW alone."""
        return resolved_muon(self.optimizer, self.learning_rate, self._muon_values())

    @property
    def micro_batch(self) -> int:
        return self.micro_batch_size or self.batch_size

    def validate(self) -> None:
        """Refuse the first flag value that cannot make a run, in seed 001's order."""
        check_learning_rate(self.learning_rate)
        self.adamw.validate()
        check_clip_norm(self.clip_norm)
        self.schedule.validate()
        _check_whole("--steps", self.steps, most=MAX_STEPS)
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
        _check_whole("--eval-windows", self.eval_windows)
        if self.eval_windows is not None and self.eval_every is None:
            raise Refusal("--eval-windows needs --eval-every, the steps between held-out scores")
        _check_whole("--checkpoint-every", self.checkpoint_every)
        _check_whole("--keep-checkpoints", self.keep_checkpoints)
        self._check_adapters()
        self._check_optimizer()

    def _check_adapters(self) -> None:
        _check_whole("--lora-rank", self.lora_rank)
        check_adapter_flags(self.lora_rank, self.lora_alpha, self.lora_targets, self.lora_base)

    def _check_optimizer(self) -> None:
        check_optimizer(self.optimizer, self.lora_rank, self._muon_values())
        if self.muon is not None:
            self.muon.validate()

    def _muon_values(self) -> tuple:
        return (
            self.muon_momentum,
            self.muon_momentum_warmup,
            self.embedding_rate,
            self.head_rate,
            self.vector_rate,
        )

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
        for key in ("steps", "eval_every", "eval_windows", "checkpoint_every", "keep_checkpoints"):
            data.pop(key)
        spec = self.adapters
        if spec is None:  # a run of every weight records what it recorded before adapters were
            for key in ("lora_rank", "lora_alpha", "lora_targets", "lora_base"):
                data.pop(key)
        else:  # recorded resolved, so that a later default cannot change what a run trained
            data |= {"lora_alpha": spec.alpha, "lora_targets": ",".join(spec.targets)}
            if spec.base == "f32":  # as a run of adapters recorded before bf16 bases; read so
                data.pop("lora_base")
        muon = self.muon
        if muon is None:  # an AdamW run records what it recorded before Muon was
            for key in ("optimizer", *MUON_KEYS):
                data.pop(key)
        else:  # resolved, so that a later default cannot change what a run trained
            data |= dict(zip(MUON_KEYS, astuple(muon), strict=True))
        return data

    @classmethod
    def from_hyperparameters(cls, data: dict[str, Any], **rest: Any) -> RunPlan:
        """The plan recorded by `hyperparameters`, with the run's own steps and schedule of writes."""
        return cls(**data, **rest)

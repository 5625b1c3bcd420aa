"""One optimizer update at a time: the model, its optimizer and the windows of a run, advanced by step index.

The state of a run is its step count: update n reads the windows the stream assigns to n, drops
with the masks of (seed, n) and runs at the rate the schedule gives n, so a trainer rebuilt from a
checkpoint at step n continues exactly where the uninterrupted one would be. In a data-parallel run
each process computes its share of a step's micro-batches and `parallel` adds their gradients in
the one-process order, so every process makes the same update.
"""

from __future__ import annotations

import hashlib
import math
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from zrodlo.data.batches import collate
from zrodlo.data.windows import WindowStream, WindowTable
from zrodlo.model.adapters import trained_parameters
from zrodlo.model.config import ModelConfig
from zrodlo.model.decoder import Decoder, build_model
from zrodlo.model.device import memory_of
from zrodlo.model.directory import Model
from zrodlo.model.dropout import StepMasks
from zrodlo.model.held_base import DTYPES
from zrodlo.model.parts import step_activation_bytes, training_state_bytes
from zrodlo.model.precision import autocast
from zrodlo.storage.refusal import Refusal
from zrodlo.training.checkpoint import Checkpoint
from zrodlo.training.loss import micro_batch_loss
from zrodlo.training.optimizer import (
    Optimizer,
    build_optimizer,
    clip_gradients,
    set_learning_rate,
    set_momentum,
)
from zrodlo.training.optimizer_state import load_optimizer_state, optimizer_state_tensors
from zrodlo.training.plan import RunPlan
from zrodlo.training.ranks import Ranks, check_share
from zrodlo.training.records import StepRecord


def windows_digest(indices: np.ndarray) -> str:
    """sha256 of a step's window indices as int64 little-endian: the ledger's record of its data."""
    return hashlib.sha256(np.ascontiguousarray(indices, dtype="<i8").tobytes()).hexdigest()


class Trainer:
    """A model, its optimizer and the windows of its corpus, advanced one update at a time."""

    def __init__(
        self,
        plan: RunPlan,
        model: Decoder,
        optimizer: Optimizer,
        tokens: np.ndarray,
        table: WindowTable,
        device: torch.device,
        ranks: Ranks | None = None,
    ) -> None:
        self.plan = plan
        self.model = model.train()
        self.trained = trained_parameters(model)  # every weight, or the adapters alone
        self.parameters = list(self.trained.values())
        self.optimizer = optimizer
        self.tokens = tokens
        self.table = table
        self.device = device
        self.ranks = ranks or Ranks(device=device)
        check_share(self.ranks.world, plan.batch_size, plan.micro_batch)
        self.stream = WindowStream(len(table), plan.batch_size, plan.seed, plan.shuffle)
        self.schedule = plan.schedule
        self.muon = plan.muon

    @classmethod
    def start(
        cls,
        plan: RunPlan,
        model: Model,
        tokens: np.ndarray,
        table: WindowTable,
        device: torch.device,
        ranks: Ranks | None = None,
    ) -> Trainer:
        """A fresh run from a model's weights (and its adapters, which are then what it trains): a
        new AdamW, the schedule from its first update. With `ranks`, this process computes its
        share of each step of a data-parallel run."""
        _check_step_fits(model.config, plan, device)
        network = build_model(model, device)
        trained = trained_parameters(network)
        optimizer = build_optimizer(
            trained.items(), network.config, plan.adamw, plan.learning_rate, plan.muon
        )
        return cls(plan, network, optimizer, tokens, table, device, ranks)

    @classmethod
    def restore(
        cls,
        plan: RunPlan,
        checkpoint: Checkpoint,
        tokens: np.ndarray,
        table: WindowTable,
        device: torch.device,
        ranks: Ranks | None = None,
    ) -> Trainer:
        """The run a checkpoint was written by, with its weights and AdamW state restored."""
        trainer = cls.start(plan, checkpoint.model, tokens, table, device, ranks)
        try:
            load_optimizer_state(
                trainer.optimizer,
                trainer.trained,
                checkpoint.optimizer_state,
                checkpoint.step,
            )
        except ValueError as error:
            raise Refusal(
                f"{checkpoint.model.path} holds optimizer state that does not fit its model: {error}"
            ) from None
        return trainer

    def step(self, n: int) -> StepRecord:
        """Make update n (0-based), turning step n into step n+1."""
        started = time.perf_counter()
        indices = self.stream.indices(n)  # (B,)
        step_targets = self.table.targets_of(indices)
        masks = StepMasks(self.plan.seed, n)
        micro = self.plan.micro_batch
        micro_batches = self.plan.batch_size // micro
        mine = self.ranks.block(micro_batches)
        parts, gradients = [], []
        for first in (i * micro for i in mine):
            inputs, targets = collate(
                self.tokens,
                self.table,
                indices[first : first + micro],
                self.device,
                self.model.config.vocab_size,
            )  # (m, C-1) each
            with autocast(self.device, self.plan.precision):
                logits = self.model(inputs, masks.rows(first))  # (m, C-1, vocab) float32
            share, part = micro_batch_loss(logits, targets, step_targets)
            share.backward()
            parts.append(float(part.item()))
            if self.ranks.world > 1:  # alone, autograd's accumulation is already the ordered sum
                gradients.append(_take_gradient(self.parameters))
        if self.ranks.world > 1:
            _give_gradient(self.parameters, self.ranks.ordered_sum(gradients))
        summed = 0.0
        for part in self.ranks.gather(parts, micro_batches):  # micro-batch order on every rank
            summed += part
        loss = summed / step_targets
        if not math.isfinite(loss):
            self.optimizer.zero_grad(set_to_none=True)
            raise Refusal(
                f"the step after step {n} produced loss {loss}; lower --learning-rate or check "
                "the corpus"
            )
        norm = clip_gradients(self.parameters, self.plan.clip_norm)
        rate = self.schedule.rate(n)
        set_learning_rate(self.optimizer, rate, self.plan.learning_rate)
        if self.muon is not None:
            set_momentum(self.optimizer, self.muon.momentum_at(n))
        try:
            self.optimizer.step()
        except RuntimeError as error:  # torch's scalar step size overflowing float32
            raise Refusal(
                f"the update after step {n} at learning rate {rate!r} does not fit float32 "
                f"({error}); lower --learning-rate"
            ) from None
        self.optimizer.zero_grad(set_to_none=True)
        seconds = time.perf_counter() - started
        return StepRecord(n + 1, loss, rate, norm, step_targets, windows_digest(indices), seconds)

    def weights(self) -> dict[str, torch.Tensor]:
        """What the run trains, by name: every weight, or the adapters."""
        return {name: p.detach() for name, p in self.trained.items()}

    def current(self, path: Path, start: Model) -> Model:
        """The model the run has made so far, as its checkpoint at `path` holds it."""
        if start.adapters is None:
            return Model(path, start.config, start.tokenizer, self.weights())
        return replace(start, path=path, adapters=replace(start.adapters, tensors=self.weights()))

    def check_finite(self, step: int) -> None:
        """Refuse weights that are no longer finite numbers, before they reach a checkpoint."""
        for name, weight in self.weights().items():
            if not bool(torch.isfinite(weight).all()):
                raise Refusal(
                    f"the update to step {step} left {name} with values that are not finite "
                    "numbers; lower --learning-rate or check the corpus"
                )

    def optimizer_state(self) -> dict[str, torch.Tensor]:
        return optimizer_state_tensors(self.optimizer, self.trained)


def _check_step_fits(config: ModelConfig, plan: RunPlan, device: torch.device) -> None:
    """Refuse a run whose step cannot fit in the device's memory, before anything is allocated."""
    spec = plan.adapters
    adapted = None if spec is None else sum(r * c for r, c in spec.shapes(config).values())
    base_bytes = 4 if spec is None else DTYPES[spec.base].itemsize
    state = training_state_bytes(config, adapted, base_bytes)
    held = "weights, gradients" if spec is None else "weights and its adapters' gradients"
    activations = step_activation_bytes(config, plan.micro_batch, plan.context, plan.precision)
    memory = memory_of(device)
    if state + activations > memory:
        holder = f"{device.type}:{device.index}" if device.type == "cuda" else "this machine"
        raise Refusal(
            f"a step in micro-batches of {plan.micro_batch:,} windows at --context "
            f"{plan.context} keeps at least {activations / 2**30:,.1f} GiB of activations, which "
            f"with the model's {state / 2**30:,.1f} GiB of {held} and AdamW moments "
            f"is more than the {memory / 2**30:,.1f} GiB of memory {holder} has; lower "
            "--micro-batch-size or --context, or run on a device with more memory"
        )
    indices = plan.batch_size * 8  # (B,) int64: the step's window indices, drawn at once
    host = memory_of(torch.device("cpu"))
    if indices > host:
        raise Refusal(
            f"a step of {plan.batch_size:,} windows draws {indices / 2**30:,.1f} GiB of window "
            f"indices at once, more than the {host / 2**30:,.1f} GiB of memory this machine has; "
            "lower --batch-size"
        )


def _take_gradient(parameters: list[torch.nn.Parameter]) -> torch.Tensor:
    """The parameters' gradients as one flat (P,) float32 copy, in parameter order; each
    parameter's own is dropped, so the next backward computes a micro-batch's gradient alone."""
    flat = torch.cat([p.grad.reshape(-1) for p in parameters])  # (P,)
    for parameter in parameters:
        parameter.grad = None
    return flat


def _give_gradient(parameters: list[torch.nn.Parameter], flat: torch.Tensor) -> None:
    """Set each parameter's gradient to its slice of the flat (P,) gradient."""
    offset = 0
    for parameter in parameters:
        count = parameter.numel()
        parameter.grad = flat[offset : offset + count].view_as(parameter)
        offset += count

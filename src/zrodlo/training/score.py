"""Scoring a model on a corpus: the target-weighted loss over every window, in corpus order.

Every target of the corpus is scored exactly once (windows per `zrodlo.data.windows`), padding never, so
the loss is the mean negative log-likelihood per target and perplexity is its exponential.
Scoring switches dropout off and records no gradient, and leaves the model in the mode it found it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from zrodlo.data.corpus import release_pages
from zrodlo.data.windows import WindowTable, collate
from zrodlo.model.gpt import GPT
from zrodlo.model.precision import autocast
from zrodlo.training.loss import summed_nll, valid_targets
from zrodlo.training.ranks import Ranks


@dataclass(frozen=True)
class Score:
    """A corpus's summed NLL (nats) over its targets and windows."""

    summed: float
    targets: int
    windows: int

    @property
    def loss(self) -> float:
        return self.summed / self.targets

    @property
    def perplexity(self) -> float:
        return math.exp(self.loss)

    @property
    def bits_per_character(self) -> float:
        return self.loss / math.log(2)


def score(
    model: GPT,
    tokens: np.ndarray,
    table: WindowTable,
    batch_size: int,
    device: torch.device,
    precision: str = "f32",
    ranks: Ranks | None = None,
) -> Score:
    """Score every window of `table` in order, `batch_size` windows a forward pass.

    With `ranks`, each process of a data-parallel run scores its contiguous share of the batches
    and the batch sums are added in batch order on every process: the one-process score, exactly.
    """
    ranks = ranks or Ranks(device=device)
    batches = -(-len(table) // batch_size)
    was_training = model.training
    model.eval()
    sums, counts = [], []
    try:
        with torch.no_grad():
            for first in (batch * batch_size for batch in ranks.block(batches)):
                indices = np.arange(first, min(first + batch_size, len(table)))
                inputs, expected = collate(
                    tokens, table, indices, device, model.config.vocab_size
                )  # (b, C-1) each
                with autocast(device, precision):
                    logits = model(inputs)  # (b, C-1, vocab) float32
                sums.append(float(summed_nll(logits, expected).item()))
                counts.append(float(valid_targets(expected)))
                release_pages(tokens)  # a held-out corpus larger than memory streams through
    finally:
        model.train(was_training)
    summed = 0.0
    for part in ranks.gather(sums, batches):
        summed += part
    targets = sum(int(count) for count in ranks.gather(counts, batches))
    return Score(summed, targets, len(table))

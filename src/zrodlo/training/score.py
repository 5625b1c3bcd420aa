"""Scoring a model on a corpus: which corpora a model can be scored on at a context, and the
target-weighted loss over every window, in corpus order. Training scores held-out corpora with it,
and `zrodlo model evaluate` scores saved models.

Every target of the corpus is scored exactly once (windows per `zrodlo.data.windows`), padding never, so
the loss is the mean negative log-likelihood per target and perplexity is its exponential.
Scoring switches dropout off and records no gradient, and leaves the model in the mode it found it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from zrodlo.data.batches import collate
from zrodlo.data.corpus import Corpus, release_pages
from zrodlo.data.windows import WindowTable, build_windows
from zrodlo.model.decoder import Decoder
from zrodlo.model.directory import Model
from zrodlo.model.precision import autocast
from zrodlo.storage.refusal import Refusal
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


def score(
    model: Decoder,
    tokens: np.ndarray,
    table: WindowTable,
    batch_size: int,
    device: torch.device,
    precision: str = "f32",
    ranks: Ranks | None = None,
    windows: np.ndarray | None = None,
    on_batch: Callable[[int, int], None] | None = None,
) -> Score:
    """Score the windows `windows` of `table` ((k,) int64, in order; every window where None),
    `batch_size` windows a forward pass, calling `on_batch(batches done, batches)` after each.

    With `ranks`, each process of a data-parallel run scores its contiguous share of the batches
    and the batch sums are added in batch order on every process: the one-process score, exactly.
    """
    ranks = ranks or Ranks(device=device)
    chosen = np.arange(len(table), dtype=np.int64) if windows is None else windows  # (k,)
    batches = -(-len(chosen) // batch_size)
    was_training = model.training
    model.eval()
    sums, counts = [], []
    try:
        with torch.no_grad():
            for done, first in enumerate(batch * batch_size for batch in ranks.block(batches)):
                indices = chosen[first : first + batch_size]  # (b,)
                inputs, expected = collate(
                    tokens, table, indices, device, model.config.vocab_size
                )  # (b, C-1) each
                with autocast(device, precision):
                    logits = model(inputs)  # (b, C-1, vocab) float32
                sums.append(float(summed_nll(logits, expected).item()))
                counts.append(float(valid_targets(expected)))
                release_pages(tokens)  # a held-out corpus larger than memory streams through
                if on_batch is not None:
                    on_batch(done + 1, len(ranks.block(batches)))
    finally:
        model.train(was_training)
    summed = 0.0
    for part in ranks.gather(sums, batches):
        summed += part
    targets = sum(int(count) for count in ranks.gather(counts, batches))
    return Score(summed, targets, len(chosen))


def check_data(corpus: Corpus, model: Model, context: int) -> WindowTable:
    """The windows of a corpus a model can train or be scored on, or the refusal that says why not."""
    table = build_windows(corpus.offsets, context, corpus.weights)
    if context - 1 > model.config.positions:
        raise Refusal(
            f"--context {context} makes the model read {context - 1} tokens, more than the "
            f"{model.config.positions} positions its configuration states"
        )
    if corpus.tokenizer_digest != model.tokenizer.digest:
        raise Refusal(
            f"{corpus.path} was encoded with another tokenizer than {model.path}: its corpus.json "
            f"records tokenizer {corpus.tokenizer_digest}, and {model.path} has digest "
            f"{model.tokenizer.digest}; prepare the corpus again with {model.path}"
        )
    largest = corpus.manifest["largest_token"]  # checked by the corpus's verifying pass
    if largest >= model.config.vocab_size:
        raise Refusal(
            f"the corpus holds token {largest}, outside the model's vocab_size "
            f"{model.config.vocab_size}"
        )
    return table

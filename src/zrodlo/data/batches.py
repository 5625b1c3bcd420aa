"""A step's windows as tensors: inputs and targets, padded on the right to the same width.

A window's last targets may run out before the context does; the batch pads it with PADDING as
input and IGNORED as target, which causal attention cannot see from the real positions before it
and the loss does not count.
"""

from __future__ import annotations

import numpy as np
import torch

from zrodlo.data.windows import WindowTable
from zrodlo.storage.refusal import Refusal

IGNORED = -100  # the target of a padded position, which no loss counts
# The input of a padded position, which no real position sees: 2, the id it has always been (the
# character tokenizer's EOS), whatever the tokenizer.
PADDING = 2


def collate(
    tokens: np.ndarray,
    table: WindowTable,
    indices: np.ndarray,
    device: torch.device | str | None = None,
    vocab_size: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The batch of windows `indices`: inputs and targets, each (B, C-1) int64.

    inputs[i, j] = tokens[start + j] and targets[i, j] = tokens[start + j + 1] for j below the
    window's target count; beyond it inputs are PADDING and targets IGNORED, as are the targets of
    weight 0 of a weighted corpus (their inputs stay: the model reads the question). The width is
    always C-1, so every batch has the same shape whatever its windows. With `vocab_size`, a token
    outside the vocabulary is refused: a run reads a corpus before its digests are all checked.
    """
    context = table.context
    starts, counts = table.locate(indices)  # (B,) each
    offset = np.arange(context, dtype=np.int64)  # (C,)
    # Clamp each position to the window's last target so the gather never reads past its
    # document (nor past the corpus); the clamped positions are overwritten below.
    positions = starts[:, None] + np.minimum(offset[None, :], counts[:, None])  # (B, C)
    window = np.asarray(tokens[positions], dtype=np.int64)  # (B, C)
    if vocab_size is not None and window.size and int(window.max()) >= vocab_size:
        raise Refusal(
            f"the corpus holds token {int(window.max())}, outside the model's vocab_size "
            f"{vocab_size}"
        )
    present = offset[None, : context - 1] < counts[:, None]  # (B, C-1)
    scored = present
    if table.weights is not None:  # a weighted corpus scores its targets of weight 1 only
        scored = present & (table.weights[positions[:, 1:]] > 0)
    inputs = np.where(present, window[:, :-1], PADDING)  # (B, C-1)
    targets = np.where(scored, window[:, 1:], IGNORED)  # (B, C-1)
    inputs_t, targets_t = torch.from_numpy(inputs), torch.from_numpy(targets)
    if device is not None:
        inputs_t, targets_t = inputs_t.to(device), targets_t.to(device)
    return inputs_t, targets_t

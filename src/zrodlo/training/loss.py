"""Next-token cross-entropy weighted by valid targets, so micro-batches add up to the batch.

A step's loss is the sum of its targets' negative log-likelihoods over the number of valid targets
in the whole step, never a mean of per-batch means: a short padded window must not weigh as much as
a full one, and padding (target -100) is neither scored nor counted. Each micro-batch backpropagates
`summed_nll / step_targets`, so the gradients it adds sum to the gradient of the step's loss whatever
the micro-batch size.
"""

import torch
import torch.nn.functional as F

from zrodlo.data.batches import IGNORED


def summed_nll(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """The float32 sum of -log p(target) over the valid targets.

    logits (B, T, V) of any float type, targets (B, T) int64 with IGNORED at padding; returns a
    float32 scalar (0 when no target is valid). The softmax runs in float32 even for bfloat16
    logits, because a bfloat16 log-sum-exp loses the small differences the loss is made of.
    """
    vocab = logits.shape[-1]
    return F.cross_entropy(
        logits.float().reshape(-1, vocab),  # (B*T, V)
        targets.reshape(-1),  # (B*T,)
        ignore_index=IGNORED,
        reduction="sum",
    )


def valid_targets(targets: torch.Tensor) -> int:
    """How many positions of targets (B, T) are scored, i.e. are not IGNORED."""
    return int((targets != IGNORED).sum().item())


def micro_batch_loss(
    logits: torch.Tensor, targets: torch.Tensor, step_targets: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The micro-batch's share of the step loss, to backpropagate, and its summed NLL.

    step_targets is the number of valid targets in the whole step (every micro-batch together).
    Returns (share, summed): share = summed / step_targets carries the gradient; summed, detached,
    is what the step adds up to report its loss.
    """
    if step_targets <= 0:
        raise ValueError(f"a step with {step_targets} valid targets has no loss")
    summed = summed_nll(logits, targets)
    return summed / step_targets, summed.detach()

"""The target-weighted loss: the textbook's 0.875, padding ignored, micro-batches adding up."""

import math

import pytest
import torch

from zrodlo.data.batches import IGNORED
from zrodlo.training.loss import micro_batch_loss, summed_nll, valid_targets


def _scoring(nll: float, targets: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(1, targets, 2) logits and (1, targets) targets whose every target scores `nll` nats."""
    # Class 0 at logit a against class 1 at 0 scores log(1 + e^-a); solve for a in float64.
    a = -math.log(math.expm1(nll))
    logits = torch.tensor([a, 0.0], dtype=torch.float64).repeat(1, targets, 1)
    return logits, torch.zeros(1, targets, dtype=torch.long)


def test_textbook_weighted_loss_is_not_the_batch_mean() -> None:
    # Six targets at mean 0.5 and two at mean 2.0 (textbook Example 1), as two micro-batches of
    # one step: their shares add up to the step's loss 7 / 8, to float32 rounding.
    shares = [
        micro_batch_loss(*_scoring(nll, n), step_targets=8) for nll, n in ((0.5, 6), (2.0, 2))
    ]
    assert sum(share.item() for share, _ in shares) == pytest.approx(0.875, abs=1e-6)
    assert sum(summed.item() for _, summed in shares) / 8 == pytest.approx(0.875, abs=1e-6)
    assert (0.5 + 2.0) / 2 == 1.25  # the wrong answer the weighting avoids


def test_zero_logits_score_log_vocab_per_target() -> None:
    vocab = 8
    targets = torch.tensor([[3, 4, 5], [6, 7, 2], [3, 2, IGNORED]])
    logits = torch.zeros(3, 3, vocab)
    summed = summed_nll(logits, targets)
    assert summed.dtype == torch.float32
    assert valid_targets(targets) == 8
    assert summed.item() / 8 == pytest.approx(math.log(vocab))


def test_padding_is_neither_scored_nor_counted() -> None:
    logits = torch.randn(2, 4, 6, generator=torch.Generator().manual_seed(0))
    targets = torch.tensor([[1, 2, 3, 4], [5, IGNORED, IGNORED, IGNORED]])
    other = targets.clone()
    other[1, 1:] = IGNORED
    changed = logits.clone()
    changed[1, 1:] = 100.0  # whatever the model says at padding does not matter
    assert summed_nll(changed, other) == summed_nll(logits, targets)
    assert valid_targets(targets) == 5
    by_hand = -sum(
        torch.log_softmax(logits[b, t], -1)[targets[b, t]].item()
        for b in range(2)
        for t in range(4)
        if targets[b, t] != IGNORED
    )
    assert summed_nll(logits, targets).item() == pytest.approx(by_hand, rel=1e-6)


def test_all_padding_sums_to_zero() -> None:
    targets = torch.full((1, 3), IGNORED)
    assert summed_nll(torch.randn(1, 3, 5), targets).item() == 0.0
    assert valid_targets(targets) == 0


def test_bfloat16_logits_are_scored_in_float32() -> None:
    logits = torch.randn(2, 3, 7).to(torch.bfloat16)
    targets = torch.tensor([[1, 2, 3], [4, 5, 6]])
    summed = summed_nll(logits, targets)
    assert summed.dtype == torch.float32
    assert summed == summed_nll(logits.float(), targets)


def test_micro_batch_gradients_add_up_to_the_batch_gradient() -> None:
    generator = torch.Generator().manual_seed(1)
    weight = torch.randn(5, 9, generator=generator, dtype=torch.float64)
    features = torch.randn(4, 3, 5, generator=generator, dtype=torch.float64)
    targets = torch.tensor([[1, 2, 3], [4, IGNORED, IGNORED], [5, 6, IGNORED], [7, 8, 0]])
    total = valid_targets(targets)

    whole = weight.clone().requires_grad_()
    share, summed = micro_batch_loss(features @ whole, targets, total)
    share.backward()
    assert share.item() == pytest.approx(summed.item() / total)

    parts = weight.clone().requires_grad_()
    sums = []
    for half in (slice(0, 2), slice(2, 4)):
        share, summed = micro_batch_loss(features[half] @ parts, targets[half], total)
        share.backward()
        sums.append((summed.item(), valid_targets(targets[half])))
    assert parts.grad is not None and whole.grad is not None
    torch.testing.assert_close(parts.grad, whole.grad)
    expected = summed_nll(features @ weight, targets).item() / total
    assert sum(summed for summed, _ in sums) / sum(count for _, count in sums) == pytest.approx(
        expected
    )


def test_empty_step_has_no_loss() -> None:
    with pytest.raises(ValueError):
        micro_batch_loss(torch.zeros(1, 1, 3), torch.full((1, 1), IGNORED), 0)

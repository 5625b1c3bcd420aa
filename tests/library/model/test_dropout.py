"""Dropout keep-masks: addressed by batch row, so micro-batches never change which elements drop."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from zrodlo.draws.chacha import Purpose, Stream
from zrodlo.draws.masks import keep_mask
from zrodlo.model.dropout import Site, StepMasks, apply_dropout
from zrodlo.storage.refusal import Refusal

CPU = torch.device("cpu")


@pytest.mark.parametrize(
    ("shape", "splits"),
    [
        ((8, 5, 7), [2, 2, 2, 2]),
        ((8, 5, 7), [1, 7]),
        ((6, 3, 9, 9), [3, 3]),  # (rows, heads, T, T) attention probabilities
        ((5, 33), [1, 1, 1, 1, 1]),  # odd elements per row: micro-batches start at odd elements
        ((4,), [3, 1]),
    ],
)
def test_micro_batches_take_slices_of_the_whole_batch(
    shape: tuple[int, ...], splits: list[int]
) -> None:
    masks = StepMasks(seed=42, step=17)
    whole = masks.keep(2, Site.ATTENTION_PROBS, shape, 0.3, CPU)
    assert whole.shape == shape and whole.dtype == torch.bool
    parts, first = [], 0
    for rows in splits:
        parts.append(masks.rows(first).keep(2, Site.ATTENTION_PROBS, (rows, *shape[1:]), 0.3, CPU))
        first += rows
    assert torch.equal(torch.cat(parts), whole)


def test_rows_keeps_seed_and_step() -> None:
    masks = StepMasks(seed=3, step=9, first_row=4)
    assert masks.rows(6) == StepMasks(seed=3, step=9, first_row=6)


def test_keep_is_the_stream_of_step_layer_and_site() -> None:
    masks = StepMasks(seed=7, step=11, first_row=3)
    shape = (2, 4, 5)
    got = masks.keep(5, Site.MLP_OUTPUT, shape, 0.2, CPU)
    stream = Stream(7, Purpose.DROPOUT, a=11, b=5 * 256 + 3)
    assert masks.stream(5, Site.MLP_OUTPUT) == stream
    expected = keep_mask(stream, 3 * 20, 2 * 20, 0.2).reshape(shape)
    np.testing.assert_array_equal(got.numpy(), expected)


def test_masks_differ_across_layers_sites_steps_and_seeds() -> None:
    shape = (4, 64)

    def mask(seed: int, step: int, layer: int, site: Site) -> bytes:
        return StepMasks(seed, step).keep(layer, site, shape, 0.5, CPU).numpy().tobytes()

    variants = [
        mask(1, 0, 0, Site.EMBEDDING),
        mask(1, 0, 0, Site.ATTENTION_PROBS),
        mask(1, 0, 0, Site.ATTENTION_OUTPUT),
        mask(1, 0, 0, Site.MLP_OUTPUT),
        mask(1, 0, 1, Site.EMBEDDING),
        mask(1, 0, 1, Site.ATTENTION_PROBS),
        mask(1, 1, 0, Site.EMBEDDING),
        mask(1, 1, 1, Site.ATTENTION_PROBS),
        mask(2, 0, 0, Site.EMBEDDING),
    ]
    assert len(set(variants)) == len(variants)


def test_keep_rate_of_a_large_mask() -> None:
    p = 0.1
    mask = StepMasks(5, 0).keep(3, Site.ATTENTION_OUTPUT, (16, 128, 256), p, CPU)
    n = mask.numel()
    rate = 1.0 - round(p * 65536) / 65536
    assert abs(mask.float().mean().item() - rate) < 5 * math.sqrt(rate * (1 - rate) / n)


def test_step_masks_check_their_fields() -> None:
    with pytest.raises(Refusal):
        StepMasks(seed=-1, step=0)
    with pytest.raises(ValueError):
        StepMasks(seed=1, step=-1)
    with pytest.raises(ValueError):
        StepMasks(seed=1, step=2**32)
    with pytest.raises(ValueError):
        StepMasks(seed=1, step=0, first_row=-1)
    with pytest.raises(ValueError):
        StepMasks(seed=1, step=0).keep(2**24, Site.EMBEDDING, (1, 1), 0.5, CPU)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_apply_dropout_zeroes_and_scales_in_the_input_dtype(dtype: torch.dtype) -> None:
    p = 0.25
    x = torch.linspace(-3, 3, 96, dtype=dtype).reshape(4, 24)
    keep = StepMasks(9, 2).keep(0, Site.EMBEDDING, (4, 24), p, CPU)
    y = apply_dropout(x, keep, p)
    assert y.dtype == dtype and y.shape == x.shape
    assert torch.equal(y[~keep], torch.zeros_like(y[~keep]))
    assert torch.equal(y[keep], x[keep] * (1 / (1 - p)))


def test_apply_dropout_gradient_is_the_scaled_mask() -> None:
    p = 0.5
    x = torch.randn(3, 10, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    x.requires_grad_(True)
    keep = StepMasks(9, 3).keep(1, Site.MLP_OUTPUT, (3, 10), p, CPU)
    apply_dropout(x, keep, p).sum().backward()
    assert torch.equal(x.grad, keep.double() * 2.0)


def test_apply_dropout_extremes() -> None:
    x = torch.arange(1.0, 9.0).reshape(2, 4)
    all_kept = StepMasks(1, 0).keep(0, Site.EMBEDDING, (2, 4), 0.0, CPU)
    assert all_kept.all()
    assert torch.equal(apply_dropout(x, all_kept, 0.0), x)
    none_kept = StepMasks(1, 0).keep(0, Site.EMBEDDING, (2, 4), 1.0, CPU)
    assert not none_kept.any()
    out = apply_dropout(x, none_kept, 1.0)
    assert torch.equal(out, torch.zeros_like(x)) and torch.isfinite(out).all()
    with pytest.raises(ValueError):
        apply_dropout(x, all_kept, 1.5)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_masks_on_cuda_equal_masks_on_cpu() -> None:
    masks = StepMasks(seed=4, step=123, first_row=2)
    shape = (3, 4, 64, 64)
    on_gpu = masks.keep(1, Site.ATTENTION_PROBS, shape, 0.1, torch.device("cuda"))
    assert on_gpu.device.type == "cuda"
    assert torch.equal(on_gpu.cpu(), masks.keep(1, Site.ATTENTION_PROBS, shape, 0.1, CPU))


def test_kept_values_are_scaled_by_the_rate_the_mask_was_drawn_with() -> None:
    """0.1 is no multiple of 2^-16: masks drop at round(0.1 * 65536) / 65536 = 6554 / 65536, and
    a scale of 1 / (1 - 0.1) would shift the mean by about 7e-6 of itself."""
    p = 0.1
    x = torch.ones(64, 64, dtype=torch.float64)
    keep = StepMasks(3, 1).keep(0, Site.EMBEDDING, (64, 64), p, CPU)
    y = apply_dropout(x, keep, p)
    assert torch.equal(y[keep], torch.full_like(y[keep], 1 / (1 - 6554 / 65536)))

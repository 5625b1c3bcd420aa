"""The dropout keep-masks of one optimizer step, drawn from ChaCha20 and addressed by batch row.

Each (step, layer, site) owns one stream; its elements are laid out as if the mask were drawn for
the step's whole batch in row-major order, so a micro-batch of rows r0..r1 reads exactly the
elements r0*prod(rest) .. r1*prod(rest)-1 and splitting a batch never changes which elements drop.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

import torch

from zrodlo.draws.chacha import Purpose, Stream, check_seed
from zrodlo.draws.masks import drop_rate, keep_mask_tensor


class Site(enum.IntEnum):
    """Where in the model a mask applies; the low byte of the stream's second index."""

    EMBEDDING = 0
    ATTENTION_PROBS = 1
    ATTENTION_OUTPUT = 2
    MLP_OUTPUT = 3


# Sites take the low byte of the stream index b = layer * 256 + site, leaving room for new sites.
_SITES_PER_LAYER = 256
_MAX_LAYER = 2**32 // _SITES_PER_LAYER - 1


@dataclass(frozen=True)
class StepMasks:
    """Keep-masks for one optimizer step, addressed as if drawn for the whole step's batch.

    A micro-batch holding rows first_row.. of the step's batch takes its slice of the same masks, so
    splitting a batch into micro-batches never changes which elements drop.

    `step` is the 0-based index of the update. The embedding site has no block of its own; it is
    drawn with layer 0 by convention, which no other site shares since the site is part of the index.
    """

    seed: int
    step: int
    first_row: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "seed", check_seed(self.seed))
        if not 0 <= self.step < 2**32:
            raise ValueError(f"step is {self.step}; it must lie in [0, 2**32)")
        if self.first_row < 0:
            raise ValueError(f"first_row is {self.first_row}; it must not be negative")

    def stream(self, layer: int, site: Site) -> Stream:
        """The stream of (step, layer, site): nonce (DROPOUT, step, layer*256 + site)."""
        if not 0 <= layer <= _MAX_LAYER:
            raise ValueError(f"layer is {layer}; it must lie in [0, {_MAX_LAYER}]")
        return Stream(
            self.seed, Purpose.DROPOUT, a=self.step, b=layer * _SITES_PER_LAYER + int(Site(site))
        )

    def keep(
        self, layer: int, site: Site, shape: tuple[int, ...], p: float, device: torch.device
    ) -> torch.Tensor:
        """bool keep-mask of `shape` = (rows, *rest) on `device`, for this micro-batch's rows.

        It is elements first_row*prod(rest) .. (first_row+rows)*prod(rest)-1 of the stream.
        """
        rows, per_row = shape[0], math.prod(shape[1:])
        mask = keep_mask_tensor(
            self.stream(layer, site), self.first_row * per_row, rows * per_row, p, device
        )  # (rows*prod(rest),)
        return mask.reshape(shape)

    def rows(self, first_row: int) -> StepMasks:
        """The same step's masks for a micro-batch whose first row is `first_row` of the batch."""
        return StepMasks(self.seed, self.step, first_row)


def apply_dropout(x: torch.Tensor, keep: torch.Tensor, p: float) -> torch.Tensor:
    """x with dropped elements zeroed and kept ones scaled by 1/(1-q), in x's dtype, where q is
    the rate the mask was drawn with: p quantised to 16 bits (`drop_rate`), so the mean is kept.

    A rate of 1 drops everything (returns zeros, like torch's dropout) rather than divide by zero.
    """
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout p is {p!r}; it must be a number from 0 to 1")
    rate = drop_rate(p)
    if rate == 0.0 or rate == 1.0:  # nothing to scale, or a scale of infinity on zeros
        return x * keep
    # A Python scalar keeps x's dtype; the product by a bool mask does too.
    return x * keep * (1.0 / (1.0 - rate))

"""The frozen base of a run of adapters held in bfloat16: half the bytes of its float32 weights,
every product still computed in float32.

Such a run adapts the base rounded to bfloat16 (to nearest, ties to even): that is the model it
trains, scores, samples and merges into an export. Each weight is upcast to float32 where it is
used, one linear at a time, so no float32 copy of the whole base is ever held; a linear's backward
pass keeps the bfloat16 weight it already holds and upcasts it again. The forward pass therefore
gives, bit for bit, what the float32 decoder gives holding the rounded weights. A base imported
from a bfloat16 checkpoint (most on the hub) loses nothing in the rounding.

Under bf16 autocast on a GPU a product computes in bfloat16 anyway, and the weight is used as held.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from zrodlo.model.adapter_spec import BASE_FORMATS

# The dtype of each number format a frozen base may be held in, by the names --lora-base takes.
DTYPES = dict(zip(BASE_FORMATS, (torch.float32, torch.bfloat16), strict=True))


class _UpcastLinear(torch.autograd.Function):
    """x (..., in) times a frozen low-precision weight (out, in) upcast to float32, plus its bias;
    the gradient flows to x alone, from the weight as held, upcast again."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None):
        ctx.save_for_backward(weight)
        return F.linear(x, weight.float(), None if bias is None else bias.float())  # (..., out)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        (weight,) = ctx.saved_tensors
        return grad @ weight.float(), None, None  # (..., in)


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """F.linear, with a weight held in bfloat16 computed in float32 (outside autocast)."""
    if weight.dtype == torch.float32 or torch.is_autocast_enabled(x.device.type):
        return F.linear(x, weight, bias)
    return _UpcastLinear.apply(x, weight, bias)


class HeldLinear(nn.Module):
    """A frozen linear whose weight (out, in) and bias are held as they came, used by `linear`."""

    def __init__(self, held: nn.Linear) -> None:
        super().__init__()
        self.weight, self.bias = held.weight, held.bias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return linear(x, self.weight, self.bias)


def hold_linears(model: nn.Module) -> None:
    """Put a `HeldLinear` in place of every linear of `model`, keeping its parameters and names."""
    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            if type(child) is nn.Linear:
                setattr(module, name, HeldLinear(child))


def rounded(weights: dict[str, torch.Tensor], base: str) -> dict[str, torch.Tensor]:
    """Float32 copies of `weights` as a base held in `base` computes with them."""
    dtype = DTYPES[base]
    return {name: w.to(dtype).to(torch.float32, copy=True) for name, w in weights.items()}

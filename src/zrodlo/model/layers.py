"""The simple layers of a decoder: its norms, its feed-forward branches and dropout at a site, with
masks from `zrodlo.model.dropout`. Norms compute in float32 even under bf16 autocast, so their
statistics stay exact.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from zrodlo.model.dropout import Site, StepMasks, apply_dropout
from zrodlo.model.parts import FeedForward, Norm


def gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    """GELU by its tanh approximation, written as GPT-2 and transformers' "gelu_new" write it, so
    that a model trained with it computes here what it computed there, to the last bit."""
    return (
        0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))
    )


def gelu_pytorch_tanh(x: torch.Tensor) -> torch.Tensor:
    """GELU by torch's own tanh approximation, as Gemma's "gelu_pytorch_tanh" computes it."""
    return F.gelu(x, approximate="tanh")


def relu_squared(x: torch.Tensor) -> torch.Tensor:
    """ReLU squared, as transformers' "relu2" computes it: square(relu(x))."""
    return torch.square(F.relu(x))


# By the names transformers' config.json gives them.
ACTIVATIONS = {
    "gelu": F.gelu, "gelu_new": gelu_tanh, "gelu_pytorch_tanh": gelu_pytorch_tanh, "silu": F.silu,
    "relu2": relu_squared,
}  # fmt: skip


class LayerNorm(nn.Module):
    """LayerNorm with a scale and a bias."""

    def __init__(self, width: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.empty(width))
        self.bias = nn.Parameter(torch.empty(width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weight, bias = self.weight.float(), self.bias.float()
        return F.layer_norm(x.float(), weight.shape, weight, bias, self.eps)  # float32


class RMSNorm(nn.Module):
    """RMSNorm: a scale, no bias, no mean taken out."""

    def __init__(self, width: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.empty(width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weight = self.weight.float()
        return F.rms_norm(x.float(), weight.shape, weight, self.eps)  # float32


class PlusOneRMSNorm(RMSNorm):
    """RMSNorm scaled by (1 + w), w held centred on zero, computed as Gemma computes it: the
    normed input times (1 + w), in float32."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.float()
        normed = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return normed * (1.0 + self.weight.float())  # float32


class UnscaledRMSNorm(nn.Module):
    """RMSNorm without a learned scale: no parameters at all."""

    def __init__(self, width: int, eps: float) -> None:
        super().__init__()
        self.width, self.eps = width, eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(x.float(), (self.width,), None, self.eps)  # float32


_NORMS = {
    "layer": LayerNorm, "rms": RMSNorm, "rms_plus_one": PlusOneRMSNorm,
    "rms_unscaled": UnscaledRMSNorm,
}  # fmt: skip


def norm(spec: Norm, width: int) -> nn.Module:
    """The norm `spec` states, over `width` features."""
    return _NORMS[spec.kind](width, spec.eps)


class MLP(nn.Module):
    """The position-wise branch d_model -> d_ff -> activation -> d_model."""

    def __init__(self, spec: FeedForward, d_model: int, d_ff: int, layer: int, p: float) -> None:
        super().__init__()
        self.layer, self.dropout, self.activation = layer, p, ACTIVATIONS[spec.activation]
        self.up = nn.Linear(d_model, d_ff, bias=spec.bias)
        self.down = nn.Linear(d_ff, d_model, bias=spec.bias)

    def forward(self, x: torch.Tensor, masks: StepMasks | None) -> torch.Tensor:
        y = self.down(self.activation(self.up(x)))  # (B, T, d_model)
        return dropped(y, masks, self.layer, Site.MLP_OUTPUT, self.dropout)


class GatedMLP(nn.Module):
    """The gated branch down(activation(gate x) * up x), gate and up in one projection (SwiGLU
    with silu)."""

    def __init__(self, spec: FeedForward, d_model: int, d_ff: int, layer: int, p: float) -> None:
        super().__init__()
        self.layer, self.dropout, self.activation = layer, p, ACTIVATIONS[spec.activation]
        self.gate_up = nn.Linear(d_model, 2 * d_ff, bias=spec.bias)
        self.down = nn.Linear(d_ff, d_model, bias=spec.bias)

    def forward(self, x: torch.Tensor, masks: StepMasks | None) -> torch.Tensor:
        gate, up = self.gate_up(x).chunk(2, dim=-1)  # (B, T, d_ff) each
        y = self.down(self.activation(gate) * up)  # (B, T, d_model)
        return dropped(y, masks, self.layer, Site.MLP_OUTPUT, self.dropout)


def feed_forward(spec: FeedForward, d_model: int, d_ff: int, layer: int, p: float) -> nn.Module:
    """The feed-forward branch `spec` states, dropping its output at rate `p` in training."""
    return (GatedMLP if spec.gated else MLP)(spec, d_model, d_ff, layer, p)


def dropped(
    x: torch.Tensor, masks: StepMasks | None, layer: int, site: Site, p: float
) -> torch.Tensor:
    """x with dropout at (layer, site) where a step's masks are given and p > 0, else x."""
    if masks is None or p == 0:
        return x
    return apply_dropout(x, masks.keep(layer, site, tuple(x.shape), p, x.device), p)

"""What every decoder architecture shares: building from checked weights, the length it may read,
attention (torch's fused kernel, or spelled out where dropout masks its probabilities) and dropout
at a site, with masks from `zrodlo.model.dropout`.
"""

from __future__ import annotations

import math
from typing import Self

import torch
import torch.nn.functional as F
from torch import nn

from zrodlo.model.config import ModelConfig
from zrodlo.model.dropout import Site, StepMasks, apply_dropout
from zrodlo.model.weights import check_weights


class Decoder(nn.Module):
    """A decoder-only language model over `config`; `cls(config)` holds placeholders only, so
    build one with `from_weights`."""

    config: ModelConfig

    @classmethod
    def from_weights(
        cls,
        config: ModelConfig,
        weights: dict[str, torch.Tensor],
        device: str | torch.device = "cpu",
        source: str = "the weights",
    ) -> Self:
        """A model holding copies of `weights`, after `check_weights` has accepted them."""
        check_weights(config, weights, source)
        model = cls(config)
        copies = {
            name: w.detach().to(device, torch.float32, copy=True) for name, w in weights.items()
        }
        model.load_state_dict(copies, strict=True, assign=True)
        return model

    def check_length(self, tokens: torch.Tensor, cache: KVCache | None) -> int:
        """Refuse more tokens (B, T), after those the cache holds, than the model's positions;
        return the position of the first."""
        start = 0 if cache is None else cache.length
        if start + tokens.size(1) > self.config.positions:
            raise ValueError(
                f"{start + tokens.size(1)} tokens exceed the model's {self.config.positions} "
                "positions"
            )
        return start


class KVCache:
    """The keys and values of the positions a model has read so far, each block's (B, KV, t, D),
    so that reading one more token costs one position's work (sampling)."""

    def __init__(self) -> None:
        self.keys: dict[int, torch.Tensor] = {}
        self.values: dict[int, torch.Tensor] = {}
        self.length = 0  # positions read, advanced once a forward pass is through every block

    def extend(
        self, layer: int, k: torch.Tensor, v: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Append a block's new keys and values (B, KV, T, D); return all it holds."""
        if layer in self.keys:
            k = torch.cat((self.keys[layer], k), dim=2)
            v = torch.cat((self.values[layer], v), dim=2)
        self.keys[layer], self.values[layer] = k, v
        return k, v


def dropped(
    x: torch.Tensor, masks: StepMasks | None, layer: int, site: Site, p: float
) -> torch.Tensor:
    """x with dropout at (layer, site) where a step's masks are given and p > 0, else x."""
    if masks is None or p == 0:
        return x
    return apply_dropout(x, masks.keep(layer, site, tuple(x.shape), p, x.device), p)


def attend(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, masks: StepMasks | None, layer: int, p: float
) -> torch.Tensor:
    """Causal attention of q (B, H, T, D) over k and v (B, KV, S, D), KV dividing H (query head h
    reads key and value head h // (H / KV)): (B, H, T, D). S is T, or with a cache the positions
    before a single query (T 1), which sees them all. The fused kernel, unless dropout masks the
    probabilities."""
    grouped = q.size(1) != k.size(1)
    causal = q.size(2) == k.size(2)
    if not causal and q.size(2) != 1:
        raise ValueError("a cache that holds positions is extended one token at a time")
    if masks is None or p == 0:
        if grouped:
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    if grouped:
        share = q.size(1) // k.size(1)
        k, v = k.repeat_interleave(share, dim=1), v.repeat_interleave(share, dim=1)  # (B, H, T, D)
    B, H, T, D = q.shape
    scores = (q @ k.transpose(-2, -1)).float() / math.sqrt(D)  # (B, H, T, T) float32
    future = torch.ones(T, T, dtype=torch.bool, device=q.device).triu(1)  # (T, T)
    probs = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)  # float32
    probs = apply_dropout(
        probs, masks.keep(layer, Site.ATTENTION_PROBS, (B, H, T, T), p, q.device), p
    )
    return probs.to(v.dtype) @ v  # (B, H, T, D)

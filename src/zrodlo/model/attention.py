"""Causal self-attention, as every family's parts state it: a fused query, key and value
projection with `kv_heads` key and value heads (grouped-query attention where they are fewer than
the query heads), rotary positions where the family has them, torch's fused kernel (or the product
spelled out where dropout masks the probabilities), and the key-value cache sampling reads from.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from zrodlo.model.dropout import Site, StepMasks, apply_dropout
from zrodlo.model.layers import dropped, norm
from zrodlo.model.parts import Attention as AttentionSpec
from zrodlo.model.parts import Rotary, RotaryScaling

Angles = tuple[torch.Tensor, torch.Tensor]  # cos and sin, (T, head_width) float32 each


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


def rotary_angles(rotary: Rotary, head_width: int, length: int, device: torch.device) -> Angles:
    """cos and sin of each position's angles, (length, head_width) float32 each: position t turns
    the pair (i, i + head_width/2) by t / theta^(2i / head_width), the frequency 1 / theta^(...)
    scaled where `rotary` says."""
    half = head_width // 2
    exponents = torch.arange(half, dtype=torch.float32, device=device) * 2 / head_width
    frequencies = 1.0 / (rotary.theta**exponents)  # (half,)
    if rotary.scaling is not None:
        frequencies = scaled_frequencies(frequencies, rotary.scaling)
    positions = torch.arange(length, dtype=torch.float32, device=device)  # (length,)
    angles = torch.outer(positions, frequencies)  # (length, half)
    angles = torch.cat((angles, angles), dim=-1)  # (length, head_width)
    return angles.cos(), angles.sin()


def scaled_frequencies(frequencies: torch.Tensor, scaling: RotaryScaling) -> torch.Tensor:
    """Llama 3's scaled frequencies (half,) float32, computed in the order transformers computes
    them, so that the angles are its angles to the last bit."""
    original = scaling.original_positions
    slow, fast = original / scaling.low_frequency_factor, original / scaling.high_frequency_factor
    wavelength = 2 * math.pi / frequencies  # (half,)
    stretched = torch.where(wavelength > slow, frequencies / scaling.factor, frequencies)
    blend = (original / wavelength - scaling.low_frequency_factor) / (
        scaling.high_frequency_factor - scaling.low_frequency_factor
    )
    blended = (1 - blend) * stretched / scaling.factor + blend * stretched
    between = ~(wavelength < fast) * ~(wavelength > slow)
    return torch.where(between, blended, stretched)


def rotated(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x (B, heads, T, D) with each position's pairs turned by its angles (T, D)."""
    first, second = x.chunk(2, dim=-1)  # (B, heads, T, D/2) each
    turned = torch.cat((-second, first), dim=-1)  # (B, heads, T, D)
    return (x * cos + turned * sin).to(x.dtype)


class Attention(nn.Module):
    """Causal self-attention of one block; each head's query and key normalized where the spec
    says (QK-norm), then turned by rotary positions where `angles` are given."""

    def __init__(
        self,
        spec: AttentionSpec,
        d_model: int,
        heads: int,
        layer: int,
        p: float,
        p_attention: float,
    ) -> None:
        super().__init__()
        self.layer, self.heads, self.kv_heads = layer, heads, spec.kv_heads
        self.width = spec.head_width
        self.dropout, self.attention_dropout = p, p_attention
        heads_width, kv_width = heads * self.width, spec.kv_heads * self.width
        self.qkv = nn.Linear(d_model, heads_width + 2 * kv_width, bias=spec.qkv_bias)
        self.head_norms = spec.qk_norm is not None
        if spec.qk_norm is not None:
            self.q_norm, self.k_norm = (
                norm(spec.qk_norm, self.width),
                norm(spec.qk_norm, self.width),
            )
        self.out = nn.Linear(heads_width, d_model, bias=spec.out_bias)

    def forward(
        self,
        x: torch.Tensor,
        angles: Angles | None,
        masks: StepMasks | None,
        cache: KVCache | None,
    ) -> torch.Tensor:
        B, T, _ = x.shape  # batch, time, d_model
        heads_width, kv_width = self.heads * self.width, self.kv_heads * self.width
        q, k, v = self.qkv(x).split((heads_width, kv_width, kv_width), dim=2)
        q = q.view(B, T, self.heads, self.width).transpose(1, 2)  # (B, heads, T, D)
        k = k.view(B, T, self.kv_heads, self.width).transpose(1, 2)  # (B, kv_heads, T, D)
        v = v.view(B, T, self.kv_heads, self.width).transpose(1, 2)  # (B, kv_heads, T, D)
        if self.head_norms:  # over each head's width, in float32, back in the projection's dtype
            q, k = self.q_norm(q).to(v.dtype), self.k_norm(k).to(v.dtype)
        if angles is not None:
            q, k = rotated(q, *angles), rotated(k, *angles)
        if cache is not None:
            k, v = cache.extend(self.layer, k, v)  # (B, kv_heads, S, D) each, turned as read
        y = attend(q, k, v, masks, self.layer, self.attention_dropout)  # (B, heads, T, D)
        y = self.out(y.transpose(1, 2).reshape(B, T, heads_width))  # (B, T, d_model)
        return dropped(y, masks, self.layer, Site.ATTENTION_OUTPUT, self.dropout)


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

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
        self, layer: int, k: torch.Tensor, v: torch.Tensor, window: int | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Append a block's new keys and values (B, KV, T, D); return the ones held before and
        these. Where the layer attends within a `window`, only the last window - 1 are kept: all
        that the next position's query sees beside its own key."""
        if layer in self.keys:
            k = torch.cat((self.keys[layer], k), dim=2)
            v = torch.cat((self.values[layer], v), dim=2)
        first = 0 if window is None else max(0, k.size(2) - (window - 1))
        self.keys[layer], self.values[layer] = k[:, :, first:], v[:, :, first:]
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
    says (QK-norm), then turned by rotary positions where `angles` are given; where the layer has
    value embeddings (`gate_channels` set), its values take them, gated per key-value head."""

    def __init__(
        self,
        spec: AttentionSpec,
        d_model: int,
        heads: int,
        layer: int,
        p: float,
        p_attention: float,
        gate_channels: int | None = None,
    ) -> None:
        super().__init__()
        self.layer, self.heads, self.kv_heads = layer, heads, spec.kv_heads
        self.width, self.window = spec.head_width, spec.layers[layer].window
        self.scale = spec.scale
        self.dropout, self.attention_dropout = p, p_attention
        heads_width, kv_width = heads * self.width, spec.kv_heads * self.width
        self.qkv = nn.Linear(d_model, heads_width + 2 * kv_width, bias=spec.qkv_bias)
        self.head_norms = spec.qk_norm is not None
        if spec.qk_norm is not None:
            self.q_norm, self.k_norm = (
                norm(spec.qk_norm, self.width),
                norm(spec.qk_norm, self.width),
            )
        if gate_channels is not None:
            self.value_gate = nn.Linear(gate_channels, spec.kv_heads, bias=False)
        self.out = nn.Linear(heads_width, d_model, bias=spec.out_bias)

    def forward(
        self,
        x: torch.Tensor,
        angles: Angles | None,
        masks: StepMasks | None,
        cache: KVCache | None,
        value_embedding: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """The attention's output (B, T, d_model) for the normed input x (B, T, d_model); the
        layer's value embeddings of the tokens, (B, T, kv_heads x head_width) float32, where it
        has them."""
        B, T, _ = x.shape  # batch, time, d_model
        heads_width, kv_width = self.heads * self.width, self.kv_heads * self.width
        q, k, v = self.qkv(x).split((heads_width, kv_width, kv_width), dim=2)
        q = q.view(B, T, self.heads, self.width).transpose(1, 2)  # (B, heads, T, D)
        k = k.view(B, T, self.kv_heads, self.width).transpose(1, 2)  # (B, kv_heads, T, D)
        if value_embedding is not None:  # 2 sigmoid(0) = 1: a fresh gate adds them whole
            channels = self.value_gate.in_features
            gate = 2 * torch.sigmoid(self.value_gate(x[..., :channels]))  # (B, T, kv_heads)
            added = gate.unsqueeze(-1) * value_embedding.view(B, T, self.kv_heads, self.width)
            v = v + added.flatten(2).to(v.dtype)  # (B, T, kv_heads x D)
        v = v.view(B, T, self.kv_heads, self.width).transpose(1, 2)  # (B, kv_heads, T, D)
        if self.head_norms:  # over each head's width, in float32, back in the projection's dtype
            q, k = self.q_norm(q).to(v.dtype), self.k_norm(k).to(v.dtype)
        if angles is not None:
            q, k = rotated(q, *angles), rotated(k, *angles)
        if cache is not None:  # (B, kv_heads, S, D) each, turned as read
            k, v = cache.extend(self.layer, k, v, self.window)
        y = attend(q, k, v, masks, self.layer, self.attention_dropout, self.scale, self.window)
        y = self.out(y.transpose(1, 2).reshape(B, T, heads_width))  # (B, T, d_model)
        return dropped(y, masks, self.layer, Site.ATTENTION_OUTPUT, self.dropout)


def attend(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    masks: StepMasks | None,
    layer: int,
    p: float,
    scale: float | None = None,
    window: int | None = None,
) -> torch.Tensor:
    """Causal attention of q (B, H, T, D) over k and v (B, KV, S, D), KV dividing H (query head h
    reads key and value head h // (H / KV)), the scores scaled by `scale` (1/sqrt(D) where None):
    (B, H, T, D). Within a `window`, a query sees its own key and the window - 1 before it. S is
    T, or with a cache the keys a single query (T 1) sees, all of them (the cache keeps a
    window's). The fused kernel, unless dropout masks the probabilities."""
    grouped = q.size(1) != k.size(1)
    causal = q.size(2) == k.size(2)
    if not causal and q.size(2) != 1:
        raise ValueError("a cache that holds positions is extended one token at a time")
    T = q.size(2)
    hidden = _hidden(T, window, q.device) if causal else None  # (T, T) True: not seen
    if masks is None or p == 0:
        if hidden is None:
            return F.scaled_dot_product_attention(
                q, k, v, is_causal=causal, scale=scale, enable_gqa=grouped
            )
        return F.scaled_dot_product_attention(
            q, k, v, attn_mask=~hidden, scale=scale, enable_gqa=grouped
        )
    if grouped:
        share = q.size(1) // k.size(1)
        k, v = k.repeat_interleave(share, dim=1), v.repeat_interleave(share, dim=1)  # (B, H, T, D)
    B, H, T, D = q.shape
    scores = (q @ k.transpose(-2, -1)).float()  # (B, H, T, T) float32
    scores = scores / math.sqrt(D) if scale is None else scores * scale
    future = hidden if hidden is not None else _future(T, q.device)  # (T, T)
    probs = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)  # float32
    probs = apply_dropout(
        probs, masks.keep(layer, Site.ATTENTION_PROBS, (B, H, T, T), p, q.device), p
    )
    return probs.to(v.dtype) @ v  # (B, H, T, D)


def _hidden(length: int, window: int | None, device: torch.device) -> torch.Tensor | None:
    """(T, T) bool for T `length`, True where query i does not see key j: a later key, or one
    `window` or more before it; None where no window hides more than causality does."""
    if window is None or window >= length:
        return None
    earlier = torch.ones(length, length, dtype=torch.bool, device=device).tril(-window)
    return _future(length, device) | earlier


def _future(length: int, device: torch.device) -> torch.Tensor:
    """(T, T) bool for T `length`, True where key j comes after query i."""
    return torch.ones(length, length, dtype=torch.bool, device=device).triu(1)

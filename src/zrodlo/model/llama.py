"""The llama decoder (`--architecture llama`): what today's small models use.

Pre-RMSNorm blocks of causal self-attention with rotary position embeddings and grouped-query
attention (`kv_heads` key and value heads shared by the query heads), a SwiGLU MLP
(down(silu(gate x) * up x)), no biases, a final RMSNorm and an LM head, its own or the token
embedding's. Rotary positions turn the two halves of each head's width against each other (the
layout transformers' Llama uses, so its weights export as they are). Dropout takes its masks at the
same sites as GPT's, from `zrodlo.model.dropout`; every weight comes from `zrodlo.model.weights` or
a checkpoint, so nothing here reads torch's random state.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from zrodlo.model.config import ModelConfig
from zrodlo.model.dropout import Site, StepMasks
from zrodlo.model.layers import Decoder, KVCache, attend, dropped

RMS_EPS = 1e-5


class RMSNorm(nn.Module):
    """RMSNorm computed in float32 even under bf16 autocast."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weight = self.weight.float()
        return F.rms_norm(x.float(), weight.shape, weight, RMS_EPS)  # float32


def rotary_angles(
    config: ModelConfig, length: int, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of each position's angles, (length, head_width) float32 each: position t turns
    the pair (i, i + head_width/2) by t / theta^(2i / head_width)."""
    half = config.head_width // 2
    exponents = torch.arange(half, dtype=torch.float32, device=device) * 2 / config.head_width
    frequencies = 1.0 / (float(config.rope_theta) ** exponents)  # (half,)
    positions = torch.arange(length, dtype=torch.float32, device=device)  # (length,)
    angles = torch.outer(positions, frequencies)  # (length, half)
    angles = torch.cat((angles, angles), dim=-1)  # (length, head_width)
    return angles.cos(), angles.sin()


def rotated(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x (B, heads, T, D) with each position's pairs turned by its angles (T, D)."""
    first, second = x.chunk(2, dim=-1)  # (B, heads, T, D/2) each
    turned = torch.cat((-second, first), dim=-1)  # (B, heads, T, D)
    return (x * cos + turned * sin).to(x.dtype)


class Attention(nn.Module):
    """Causal grouped-query self-attention with rotary positions."""

    def __init__(self, config: ModelConfig, layer: int) -> None:
        super().__init__()
        self.layer, self.heads, self.kv_heads = layer, config.heads, config.kv_heads
        self.width = config.head_width
        self.dropout, self.attention_dropout = config.dropout, config.attention_dropout
        kv_width = config.kv_heads * config.head_width
        self.qkv = nn.Linear(config.d_model, config.d_model + 2 * kv_width, bias=False)
        self.out = nn.Linear(config.d_model, config.d_model, bias=False)

    def forward(
        self,
        x: torch.Tensor,
        angles: tuple[torch.Tensor, torch.Tensor],
        masks: StepMasks | None,
        cache: KVCache | None,
    ) -> torch.Tensor:
        B, T, C = x.shape  # batch, time, d_model
        kv_width = self.kv_heads * self.width
        q, k, v = self.qkv(x).split((C, kv_width, kv_width), dim=2)
        q = q.view(B, T, self.heads, self.width).transpose(1, 2)  # (B, heads, T, D)
        k = k.view(B, T, self.kv_heads, self.width).transpose(1, 2)  # (B, kv_heads, T, D)
        v = v.view(B, T, self.kv_heads, self.width).transpose(1, 2)  # (B, kv_heads, T, D)
        q, k = rotated(q, *angles), rotated(k, *angles)
        if cache is not None:
            k, v = cache.extend(self.layer, k, v)  # (B, kv_heads, S, D) each, turned as read
        y = attend(q, k, v, masks, self.layer, self.attention_dropout)  # (B, heads, T, D)
        y = self.out(y.transpose(1, 2).reshape(B, T, C))  # (B, T, C)
        return dropped(y, masks, self.layer, Site.ATTENTION_OUTPUT, self.dropout)


class SwiGLU(nn.Module):
    """The gated MLP: down(silu(gate x) * up x), gate and up in one projection."""

    def __init__(self, config: ModelConfig, layer: int) -> None:
        super().__init__()
        self.layer, self.dropout = layer, config.dropout
        self.gate_up = nn.Linear(config.d_model, 2 * config.d_ff, bias=False)
        self.down = nn.Linear(config.d_ff, config.d_model, bias=False)

    def forward(self, x: torch.Tensor, masks: StepMasks | None) -> torch.Tensor:
        gate, up = self.gate_up(x).chunk(2, dim=-1)  # (B, T, d_ff) each
        y = self.down(F.silu(gate) * up)  # (B, T, d_model)
        return dropped(y, masks, self.layer, Site.MLP_OUTPUT, self.dropout)


class Block(nn.Module):
    """One pre-RMSNorm block; the residual stream stays float32 under autocast."""

    def __init__(self, config: ModelConfig, layer: int) -> None:
        super().__init__()
        self.attention_norm = RMSNorm(config.d_model)
        self.attention = Attention(config, layer)
        self.mlp_norm = RMSNorm(config.d_model)
        self.mlp = SwiGLU(config, layer)

    def forward(
        self,
        x: torch.Tensor,
        angles: tuple[torch.Tensor, torch.Tensor],
        masks: StepMasks | None,
        cache: KVCache | None,
    ) -> torch.Tensor:
        x = x + self.attention(self.attention_norm(x), angles, masks, cache)  # (B, T, d_model)
        return x + self.mlp(self.mlp_norm(x), masks)


class Llama(Decoder):
    """The llama decoder. `Llama(config)` holds placeholders only; build one with `from_weights`."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        with torch.device("meta"):  # every real weight comes from `initial_weights` or a file
            self.token_embedding = nn.Embedding(config.vocab_size, config.d_model)
            self.blocks = nn.ModuleList(Block(config, layer) for layer in range(config.layers))
            self.final_norm = RMSNorm(config.d_model)
            if not config.tie_embeddings:
                self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)

    def forward(
        self, tokens: torch.Tensor, masks: StepMasks | None = None, cache: KVCache | None = None
    ) -> torch.Tensor:
        """Logits (B, T, vocab_size) in float32 for tokens (B, T) that follow the positions
        `cache` holds (extending it); `masks` drop only in training."""
        start = self.check_length(tokens, cache)
        T = tokens.size(1)
        masks = masks if self.training else None
        cos, sin = rotary_angles(self.config, start + T, tokens.device)  # (start+T, D) each
        angles = (cos[start:], sin[start:])  # (T, D) each
        x = self.token_embedding(tokens)  # (B, T, d_model)
        x = dropped(x, masks, 0, Site.EMBEDDING, self.config.dropout)
        for block in self.blocks:
            x = block(x, angles, masks, cache)
        if cache is not None:
            cache.length += T
        x = self.final_norm(x)  # (B, T, d_model) float32
        head = self.token_embedding.weight if self.config.tie_embeddings else self.lm_head.weight
        return F.linear(x, head).float()  # (B, T, vocab_size)

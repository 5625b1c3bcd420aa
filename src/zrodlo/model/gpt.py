"""The transformer language model: a GPT-style decoder.

Token and learned position embeddings, pre-LayerNorm blocks of causal multi-head self-attention
and a GELU MLP, a final LayerNorm and an untied LM head. Dropout takes its masks from
`zrodlo.model.dropout` (ChaCha20, drawn for the whole step), and every weight comes from
`zrodlo.model.weights` or a checkpoint, so nothing here reads torch's random state.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from zrodlo.model.config import ModelConfig
from zrodlo.model.dropout import Site, StepMasks
from zrodlo.model.layers import Decoder, KVCache, attend, dropped

NORM_EPS = 1e-5


class LayerNorm(nn.Module):
    """LayerNorm that computes in float32 even under bf16 autocast, so the statistics stay exact."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(width))
        self.bias = nn.Parameter(torch.empty(width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weight, bias = self.weight.float(), self.bias.float()
        return F.layer_norm(x.float(), weight.shape, weight, bias, NORM_EPS)  # float32


class CausalSelfAttention(nn.Module):
    """Multi-head self-attention in which position t sees positions 0..t only."""

    def __init__(self, config: ModelConfig, layer: int) -> None:
        super().__init__()
        self.layer, self.heads = layer, config.heads
        self.dropout, self.attention_dropout = config.dropout, config.attention_dropout
        self.qkv = nn.Linear(config.d_model, 3 * config.d_model)
        self.out = nn.Linear(config.d_model, config.d_model)

    def forward(
        self, x: torch.Tensor, masks: StepMasks | None, cache: KVCache | None = None
    ) -> torch.Tensor:
        B, T, C = x.shape  # batch, time, d_model
        q, k, v = self.qkv(x).split(C, dim=2)  # each (B, T, C)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        if cache is not None:
            k, v = cache.extend(self.layer, k, v)  # (B, heads, S, head_dim) each
        y = attend(q, k, v, masks, self.layer, self.attention_dropout)  # (B, heads, T, head_dim)
        y = self.out(y.transpose(1, 2).reshape(B, T, C))  # (B, T, C)
        return dropped(y, masks, self.layer, Site.ATTENTION_OUTPUT, self.dropout)


class MLP(nn.Module):
    """The position-wise feed-forward branch: d_model -> d_ff -> GELU -> d_model."""

    def __init__(self, config: ModelConfig, layer: int) -> None:
        super().__init__()
        self.layer, self.dropout = layer, config.dropout
        self.up = nn.Linear(config.d_model, config.d_ff)
        self.down = nn.Linear(config.d_ff, config.d_model)

    def forward(self, x: torch.Tensor, masks: StepMasks | None) -> torch.Tensor:
        y = self.down(F.gelu(self.up(x)))  # (B, T, d_model)
        return dropped(y, masks, self.layer, Site.MLP_OUTPUT, self.dropout)


class Block(nn.Module):
    """One pre-LayerNorm transformer block; the residual stream stays float32 under autocast."""

    def __init__(self, config: ModelConfig, layer: int) -> None:
        super().__init__()
        self.attention_norm = LayerNorm(config.d_model)
        self.attention = CausalSelfAttention(config, layer)
        self.mlp_norm = LayerNorm(config.d_model)
        self.mlp = MLP(config, layer)

    def forward(
        self, x: torch.Tensor, masks: StepMasks | None, cache: KVCache | None = None
    ) -> torch.Tensor:
        x = x + self.attention(self.attention_norm(x), masks, cache)  # (B, T, d_model)
        return x + self.mlp(self.mlp_norm(x), masks)


class GPT(Decoder):
    """The language model. `GPT(config)` holds placeholders only; build one with `from_weights`."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        # Built on the meta device: torch's own initialisation would read torch's random state,
        # and every real weight comes from `initial_weights` or a checkpoint anyway.
        with torch.device("meta"):
            self.token_embedding = nn.Embedding(config.vocab_size, config.d_model)
            self.position_embedding = nn.Embedding(config.positions, config.d_model)
            self.blocks = nn.ModuleList(Block(config, layer) for layer in range(config.layers))
            self.final_norm = LayerNorm(config.d_model)
            self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)

    def forward(
        self, tokens: torch.Tensor, masks: StepMasks | None = None, cache: KVCache | None = None
    ) -> torch.Tensor:
        """Logits (B, T, vocab_size) in float32 for tokens (B, T) that follow the positions
        `cache` holds (extending it); `masks` drop only in training."""
        start = self.check_length(tokens, cache)
        T = tokens.size(1)  # tokens: (B, T)
        masks = masks if self.training else None
        positions = torch.arange(start, start + T, device=tokens.device)  # (T,)
        x = self.token_embedding(tokens) + self.position_embedding(positions)  # (B, T, d_model)
        x = dropped(x, masks, 0, Site.EMBEDDING, self.config.dropout)
        for block in self.blocks:
            x = block(x, masks, cache)
        if cache is not None:
            cache.length += T
        return self.lm_head(self.final_norm(x)).float()  # (B, T, vocab_size)

"""The plain PyTorch model the benchmarks compare zrodlo's GPT against.

`TorchGPT` is zrodlo's architecture op for op (token and position embeddings, pre-LayerNorm blocks
of causal attention and a GELU MLP, final norm, untied head), with the same parameter names, so it
loads a zrodlo GPT's weights; only its dropout differs: torch's own F.dropout at the embedding, the
attention output, the MLP output and, when attention_dropout > 0, the attention probabilities
(through the same explicit attention zrodlo then uses). Not a script: the benchmarks import it.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from zrodlo.model.config import ModelConfig
from zrodlo.model.decoder import Decoder


class Attention(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.heads = config.heads
        self.dropout, self.attention_dropout = config.dropout, config.attention_dropout
        self.qkv = nn.Linear(config.d_model, 3 * config.d_model)
        self.out = nn.Linear(config.d_model, config.d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape  # batch, time, d_model
        q, k, v = self.qkv(x).split(C, dim=2)  # each (B, T, C)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        if self.training and self.attention_dropout > 0:
            D = q.size(-1)
            scores = (q @ k.transpose(-2, -1)).float() / math.sqrt(D)  # (B, H, T, T)
            future = torch.ones(T, T, dtype=torch.bool, device=q.device).triu(1)  # (T, T)
            probs = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)
            probs = F.dropout(probs, self.attention_dropout, training=True)
            y = probs.to(v.dtype) @ v  # (B, H, T, D)
        else:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # fused kernel
        y = self.out(y.transpose(1, 2).reshape(B, T, C))  # (B, T, C)
        return F.dropout(y, self.dropout, training=self.training)


class MLP(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.dropout = config.dropout
        self.up = nn.Linear(config.d_model, config.d_ff)
        self.down = nn.Linear(config.d_ff, config.d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.down(F.gelu(self.up(x)))  # (B, T, d_model)
        return F.dropout(y, self.dropout, training=self.training)


class Block(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.attention_norm = nn.LayerNorm(config.d_model, eps=1e-5)
        self.attention = Attention(config)
        self.mlp_norm = nn.LayerNorm(config.d_model, eps=1e-5)
        self.mlp = MLP(config)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.attention_norm(x))  # (B, T, d_model)
        return x + self.mlp(self.mlp_norm(x))


class TorchGPT(nn.Module):
    """zrodlo's GPT with torch's dropout; build one with `from_gpt`."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        with torch.device("meta"):  # every weight is copied in by from_gpt
            self.token_embedding = nn.Embedding(config.vocab_size, config.d_model)
            self.position_embedding = nn.Embedding(config.positions, config.d_model)
            self.blocks = nn.ModuleList(Block(config) for _ in range(config.layers))
            self.final_norm = nn.LayerNorm(config.d_model, eps=1e-5)
            self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)

    @classmethod
    def from_gpt(cls, gpt: Decoder) -> TorchGPT:
        """A model holding copies of a zrodlo GPT's weights."""
        model = cls(gpt.config)
        copies = {name: t.detach().clone() for name, t in gpt.state_dict().items()}
        model.load_state_dict(copies, strict=True, assign=True)
        return model

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        T = tokens.size(1)  # tokens: (B, T)
        positions = torch.arange(T, device=tokens.device)  # (T,)
        x = self.token_embedding(tokens) + self.position_embedding(positions)  # (B, T, d_model)
        x = F.dropout(x, self.config.dropout, training=self.training)
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.final_norm(x)).float()  # (B, T, vocab_size)


def check_same_function(gpt: Decoder, reference: TorchGPT, tokens: torch.Tensor) -> float:
    """The largest difference of the two models' logits without dropout; raise if not tiny."""
    was = gpt.training, reference.training
    gpt.eval()
    reference.eval()
    with torch.no_grad():
        difference = float((gpt(tokens) - reference(tokens)).abs().max())
    gpt.train(was[0])
    reference.train(was[1])
    if difference > 1e-4:
        raise SystemExit(f"the reference model differs from zrodlo's GPT by {difference}")
    return difference

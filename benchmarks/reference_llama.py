"""The plain PyTorch llama the benchmarks compare zrodlo's against, written as a user of torch
would: torch's RMSNorm, rotary angles computed once, fused attention with its grouped-query path,
separate gate and up projections, torch's own dropout. It loads a zrodlo llama's weights (the
fused projections split). Not a script: the benchmarks import it.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from zrodlo.model.config import ModelConfig
from zrodlo.model.decoder import Decoder
from zrodlo.model.families.llama import RMS_EPS


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    first, second = x.chunk(2, dim=-1)  # (B, H, T, D/2) each
    return x * cos + torch.cat((-second, first), dim=-1) * sin


class Attention(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.heads, self.kv_heads = config.heads, config.settings.kv_heads
        self.width = config.head_width
        self.dropout = config.dropout
        self.q = nn.Linear(config.d_model, config.d_model, bias=False)
        self.k = nn.Linear(config.d_model, self.kv_heads * self.width, bias=False)
        self.v = nn.Linear(config.d_model, self.kv_heads * self.width, bias=False)
        self.out = nn.Linear(config.d_model, config.d_model, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q = self.q(x).view(B, T, self.heads, self.width).transpose(1, 2)  # (B, H, T, D)
        k = self.k(x).view(B, T, self.kv_heads, self.width).transpose(1, 2)  # (B, KV, T, D)
        v = self.v(x).view(B, T, self.kv_heads, self.width).transpose(1, 2)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        grouped = self.kv_heads != self.heads
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=grouped)
        y = self.out(y.transpose(1, 2).reshape(B, T, C))  # (B, T, C)
        return F.dropout(y, self.dropout, training=self.training)


class MLP(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.dropout = config.dropout
        self.gate = nn.Linear(config.d_model, config.d_ff, bias=False)
        self.up = nn.Linear(config.d_model, config.d_ff, bias=False)
        self.down = nn.Linear(config.d_ff, config.d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.down(F.silu(self.gate(x)) * self.up(x))  # (B, T, d_model)
        return F.dropout(y, self.dropout, training=self.training)


class Block(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.attention_norm = nn.RMSNorm(config.d_model, eps=RMS_EPS)
        self.attention = Attention(config)
        self.mlp_norm = nn.RMSNorm(config.d_model, eps=RMS_EPS)
        self.mlp = MLP(config)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.attention_norm(x), cos, sin)
        return x + self.mlp(self.mlp_norm(x))


class TorchLlama(nn.Module):
    """zrodlo's llama with torch's dropout; build one with `from_llama`."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        with torch.device("meta"):
            self.token_embedding = nn.Embedding(config.vocab_size, config.d_model)
            self.blocks = nn.ModuleList(Block(config) for _ in range(config.layers))
            self.final_norm = nn.RMSNorm(config.d_model, eps=RMS_EPS)
            self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        half = config.head_width // 2
        frequencies = 1.0 / config.settings.rope_theta ** (
            torch.arange(half) * 2 / config.head_width
        )
        angles = torch.outer(torch.arange(config.positions, dtype=torch.float32), frequencies)
        angles = torch.cat((angles, angles), dim=-1)  # (positions, D)
        self.cos, self.sin = angles.cos(), angles.sin()

    @classmethod
    def from_llama(cls, llama: Decoder) -> TorchLlama:
        """A model holding copies of a zrodlo llama's weights (untied)."""
        model, config = cls(llama.config), llama.config
        kv = config.settings.kv_heads * config.head_width
        copies = {}
        for name, tensor in llama.state_dict().items():
            tensor = tensor.detach().clone()
            if name.endswith("attention.qkv.weight"):
                base = name.removesuffix("qkv.weight")
                for part, rows in zip("qkv", tensor.split((config.d_model, kv, kv)), strict=True):
                    copies[f"{base}{part}.weight"] = rows.clone()
            elif name.endswith("mlp.gate_up.weight"):
                base = name.removesuffix("gate_up.weight")
                copies[f"{base}gate.weight"], copies[f"{base}up.weight"] = tensor.chunk(2)
            else:
                copies[name] = tensor
        model.load_state_dict(copies, strict=True, assign=True)
        return model

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        T = tokens.size(1)  # tokens: (B, T)
        cos, sin = self.cos[:T], self.sin[:T]  # (T, D) each
        x = F.dropout(self.token_embedding(tokens), self.config.dropout, training=self.training)
        for block in self.blocks:
            x = block(x, cos, sin)
        return self.lm_head(self.final_norm(x)).float()  # (B, T, vocab_size)

"""The decoder every family builds, from the parts its configuration states (`zrodlo.model.parts`):
token embeddings (and learned positions where the family has them), pre-norm blocks of attention
and a feed-forward branch, each adding to a residual stream that stays float32 under autocast, a
final norm and an LM head, its own or the token embedding's.

Dropout takes its masks from `zrodlo.model.dropout` (ChaCha20, drawn for the whole step), and
every weight comes from `zrodlo.model.weights` or a checkpoint, so nothing here reads torch's
random state.
"""

from __future__ import annotations

import torch
from torch import nn

from zrodlo.model.adapters import attach
from zrodlo.model.attention import Angles, Attention, KVCache, rotary_angles
from zrodlo.model.config import ModelConfig
from zrodlo.model.directory import Model
from zrodlo.model.dropout import Site, StepMasks
from zrodlo.model.held_base import DTYPES, hold_linears, linear
from zrodlo.model.layers import dropped, feed_forward, norm
from zrodlo.model.parts import Rotary, gate_channels
from zrodlo.model.weights import check_weights


class Block(nn.Module):
    """One pre-norm block: x + attention(norm(x)), then + feed_forward(norm(x)); with sandwich
    norms each branch's output is normed again before it is added."""

    def __init__(self, config: ModelConfig, layer: int) -> None:
        super().__init__()
        parts, d = config.parts, config.d_model
        self.attention_norm = norm(parts.norm, d)
        gated = layer in parts.value_embedding_layers
        self.attention = Attention(
            parts.attention, d, config.heads, layer, config.dropout, config.attention_dropout,
            gate_channels(config) if gated else None,
        )  # fmt: skip
        self.sandwich = parts.sandwich_norms
        if self.sandwich:
            self.attention_post_norm = norm(parts.norm, d)
        self.mlp_norm = norm(parts.norm, d)
        self.mlp = feed_forward(parts.feed_forward, d, config.d_ff, layer, config.dropout)
        if self.sandwich:
            self.mlp_post_norm = norm(parts.norm, d)

    def forward(
        self,
        x: torch.Tensor,
        angles: Angles | None,
        masks: StepMasks | None,
        cache: KVCache | None,
        value_embedding: torch.Tensor | None = None,
    ) -> torch.Tensor:
        y = self.attention(self.attention_norm(x), angles, masks, cache, value_embedding)
        x = x + (self.attention_post_norm(y) if self.sandwich else y)
        y = self.mlp(self.mlp_norm(x), masks)  # (B, T, d_model)
        return x + (self.mlp_post_norm(y) if self.sandwich else y)


class Decoder(nn.Module):
    """A decoder-only language model over `config`. `Decoder(config)` holds placeholders only;
    build one with `build_decoder`."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        parts, d = config.parts, config.d_model
        # Built on the meta device: torch's own initialisation would read torch's random state,
        # and every real weight comes from `initial_weights` or a checkpoint anyway.
        with torch.device("meta"):
            if parts.x0_mix is not None:  # (layers,) each
                self.residual_scales = nn.Parameter(torch.empty(config.layers))
                self.x0_scales = nn.Parameter(torch.empty(config.layers))
            self.token_embedding = nn.Embedding(config.vocab_size, d)
            if parts.learned_positions:
                self.position_embedding = nn.Embedding(config.positions, d)
            kv_width = parts.attention.kv_heads * config.head_width
            self.value_embeddings = nn.ModuleDict(
                {
                    str(i): nn.Embedding(config.vocab_size, kv_width)
                    for i in parts.value_embedding_layers
                }
            )
            self.blocks = nn.ModuleList(Block(config, layer) for layer in range(config.layers))
            self.final_norm = norm(parts.norm, d)
            if not parts.tied_head:
                self.lm_head = nn.Linear(d, config.vocab_size, bias=False)

    def forward(
        self, tokens: torch.Tensor, masks: StepMasks | None = None, cache: KVCache | None = None
    ) -> torch.Tensor:
        """Logits (B, T, vocab_size) in float32 for tokens (B, T) that follow the positions
        `cache` holds (extending it); `masks` drop only in training."""
        start = self.check_length(tokens, cache)
        T = tokens.size(1)
        masks = masks if self.training else None
        parts = self.config.parts
        x = self.token_embedding(tokens).float()  # (B, T, d_model); a held base's rows upcast
        if parts.embedding_scale is not None:  # a float32 scale in the weights' dtype, as Gemma's
            x = x * torch.tensor(parts.embedding_scale, dtype=torch.float32).to(x.dtype)
        if parts.learned_positions:
            positions = torch.arange(start, start + T, device=tokens.device)  # (T,)
            x = x + self.position_embedding(positions).float()
        x = dropped(x, masks, 0, Site.EMBEDDING, self.config.dropout)
        angles: dict[Rotary, Angles] = {}  # each rotary the layers take, computed once
        for rotary in {spec.rotary for spec in parts.attention.layers} - {None}:
            cos, sin = rotary_angles(rotary, self.config.head_width, start + T, tokens.device)
            angles[rotary] = (cos[start:], sin[start:])  # (T, head_width) each
        x0 = x if parts.x0_mix is not None else None  # (B, T, d_model), read again by every block
        for layer, block in enumerate(self.blocks):
            if x0 is not None:
                x = self.residual_scales[layer] * x + self.x0_scales[layer] * x0
            values = None  # (B, T, kv_width) where the layer has value embeddings
            if str(layer) in self.value_embeddings:
                values = self.value_embeddings[str(layer)](tokens).float()
            x = block(x, angles.get(parts.attention.layers[layer].rotary), masks, cache, values)
        if cache is not None:
            cache.length += T
        head = self.token_embedding.weight if parts.tied_head else self.lm_head.weight
        logits = linear(self.final_norm(x), head).float()  # (B, T, vocab_size)
        if parts.logit_cap is not None:
            logits = torch.tanh(logits / parts.logit_cap) * parts.logit_cap
        return logits

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


def build_decoder(
    config: ModelConfig,
    weights: dict[str, torch.Tensor],
    device: str | torch.device = "cpu",
    source: str = "the weights",
    held: str = "f32",
) -> Decoder:
    """The decoder of `config` holding copies of `weights` on `device` in the format `held` (a
    frozen base's, `zrodlo.model.held_base`), after `check_weights` has accepted them; `source`
    names where they were read from."""
    check_weights(config, weights, source)
    model = Decoder(config)
    dtype = DTYPES[held]
    copies = {name: w.detach().to(device, dtype, copy=True) for name, w in weights.items()}
    model.load_state_dict(copies, strict=True, assign=True)
    if dtype != torch.float32:
        hold_linears(model)
    return model


def build_model(model: Model, device: str | torch.device = "cpu") -> Decoder:
    """The decoder of a model read from disk on `device`: its weights, and where it has adapters,
    those beside the frozen weights they adapt (held as the run held them), computed as training
    computed them."""
    held = "f32" if model.adapters is None else model.adapters.spec.base
    network = build_decoder(model.config, model.weights, device, str(model.path), held)
    if model.adapters is not None:
        attach(network, model.config, model.adapters.spec, model.adapters.tensors)
    return network

"""The parts a decoder is built from, as its family states them (`zrodlo.model.families`): the norm,
how attention projects and where positions enter, the feed-forward branch, and whether the head
reads the token embedding. The network (`zrodlo.model.decoder`) is built from these, and so, here,
are the names and shapes of its parameters, their count and what a step keeps in memory, from the
configuration alone: building the modules, even on the meta device, costs milliseconds that every
checked read of a model would pay (a test holds the two equal).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the configuration states its parts: only its fields are read here
    from zrodlo.model.config import ModelConfig

# The scalars of the x0 mix, (layers,) each: what every block's input takes of the residual stream,
# and of the embeddings' output.
MIX_SCALES = ("residual_scales", "x0_scales")
# The channels of a block's input that its value-embedding gate reads (nanochat's, at the least).
GATE_CHANNELS = 12


@dataclass(frozen=True)
class Norm:
    """ "layer": LayerNorm, a scale and a bias; "rms": RMSNorm, a scale alone; "rms_plus_one":
    RMSNorm scaled by (1 + w), its weight w held centred on zero (Gemma's); "rms_unscaled":
    RMSNorm without a scale, no parameters."""

    kind: str
    eps: float

    @property
    def unit(self) -> float:
        """The weight that scales by one: what a fresh norm holds."""
        return 0.0 if self.kind == "rms_plus_one" else 1.0


@dataclass(frozen=True)
class RotaryScaling:
    """Llama 3's stretch of the rotary frequencies for a longer context than the model was first
    trained on (`original_positions`): a frequency whose wavelength is longer than
    original_positions / `low_frequency_factor` is divided by `factor`, one shorter than
    original_positions / `high_frequency_factor` is kept, and those between are blended."""

    factor: float
    low_frequency_factor: float
    high_frequency_factor: float
    original_positions: int


@dataclass(frozen=True)
class Rotary:
    """Rotary positions: each head's halves turned by angles of base `theta`, scaled or not."""

    theta: float
    scaling: RotaryScaling | None = None


@dataclass(frozen=True)
class LayerAttention:
    """What one layer's attention sets apart: its rotary positions (None: none, as GPT-2's or
    SmolLM3's every 4th layer), and its window, the keys a query sees: itself and the `window` - 1
    before it (Gemma's local layers), or every key before it where None."""

    rotary: Rotary | None
    window: int | None = None


@dataclass(frozen=True)
class Attention:
    """Causal self-attention: query heads of `head_width` (d_model over the heads, unless the
    family sets it apart), `kv_heads` key and value heads shared by the query heads, biases on
    the fused query, key and value projection and on the output's, and each layer's rotary
    positions and window (`layers`, one a layer). `qk_norm` normalizes each head's query and key
    over its width before rotary positions turn them (QK-norm: a scale of head_width for each);
    the scores are scaled by `scale`, 1/sqrt(head_width) where None."""

    kv_heads: int
    head_width: int
    qkv_bias: bool
    out_bias: bool
    layers: tuple[LayerAttention, ...]
    qk_norm: Norm | None = None
    scale: float | None = None


@dataclass(frozen=True)
class FeedForward:
    """The position-wise branch: down(act(up x)), or when `gated` down(act(gate x) * up x) with
    gate and up in one projection; `activation` is "gelu" (exact), "gelu_new" (its tanh
    approximation, GPT-2's), "silu" or "relu2" (ReLU squared)."""

    gated: bool
    activation: str
    bias: bool


@dataclass(frozen=True)
class Parts:
    """A decoder: token embeddings (multiplied by `embedding_scale` where it is set, Gemma's square
    root of the width), a table of positions added to them where `learned_positions`, pre-norm
    blocks of attention and feed-forward (each branch's output normed again before it joins the
    residual stream where `sandwich_norms`), a final norm and an LM head, its own or the token
    embedding's (`tied_head`), whose logits are capped by `logit_cap` * tanh(logits / logit_cap)
    where it is set. Where `x0_mix` is set, each block reads the residual stream and the
    embeddings' output mixed by two scalars of its layer, learned from 1 and `x0_mix`. Each layer
    of `value_embedding_layers` has a table of its own, (vocab, kv_heads x head_width), whose row
    for each token is added to that layer's values, each key-value head's share scaled by a gate,
    2 sigmoid(w . x[:GATE_CHANNELS]), read off the block's normed input (nanochat's value
    embeddings)."""

    norm: Norm
    attention: Attention
    feed_forward: FeedForward
    learned_positions: bool
    tied_head: bool
    sandwich_norms: bool = False
    embedding_scale: float | None = None
    logit_cap: float | None = None
    x0_mix: float | None = None
    value_embedding_layers: tuple[int, ...] = ()
    # How a fresh model draws its weights: each block's output projections (attention's and the
    # feed-forward's) at zero where `zero_projections`, and the head's with `head_std`.
    zero_projections: bool = False
    head_std: float | None = None


def block_shapes(config: ModelConfig, layer: int) -> dict[str, tuple[int, ...]]:
    """Each parameter of block `layer`, by its name after "blocks.<i>.", in the order it
    registers."""
    parts, d, ff = config.parts, config.d_model, config.d_ff
    heads_width = config.heads * config.head_width  # the queries' width, d unless set apart
    projected = heads_width + 2 * parts.attention.kv_heads * config.head_width  # q, k and v
    up_rows = 2 * ff if parts.feed_forward.gated else ff
    up = "mlp.gate_up" if parts.feed_forward.gated else "mlp.up"
    sandwich = parts.sandwich_norms
    return {
        **_norm("attention_norm", parts.norm, d),
        **_linear("attention.qkv", projected, d, parts.attention.qkv_bias),
        **_head_norms(parts.attention.qk_norm, config.head_width),
        **_value_gate(config, layer),
        **_linear("attention.out", d, heads_width, parts.attention.out_bias),
        **(_norm("attention_post_norm", parts.norm, d) if sandwich else {}),
        **_norm("mlp_norm", parts.norm, d),
        **_linear(up, up_rows, d, parts.feed_forward.bias),
        **_linear("mlp.down", d, ff, parts.feed_forward.bias),
        **(_norm("mlp_post_norm", parts.norm, d) if sandwich else {}),
    }


def outer_shapes(config: ModelConfig) -> tuple[dict, dict]:
    """The parameters before the blocks (the embeddings) and after them (the final norm and the
    head), by name, each in the order it registers."""
    parts, d, vocab = config.parts, config.d_model, config.vocab_size
    # The decoder's own parameters register before its modules': the mix's scalars first.
    before = {name: (config.layers,) for name in MIX_SCALES} if parts.x0_mix is not None else {}
    before["token_embedding.weight"] = (vocab, d)
    if parts.learned_positions:
        before["position_embedding.weight"] = (config.positions, d)
    kv_width = parts.attention.kv_heads * config.head_width
    for layer in parts.value_embedding_layers:
        before[f"value_embeddings.{layer}.weight"] = (vocab, kv_width)
    after = _norm("final_norm", parts.norm, d)
    if not parts.tied_head:
        after["lm_head.weight"] = (vocab, d)
    return before, after


def parameter_shapes(config: ModelConfig) -> dict[str, tuple[int, ...]]:
    """Every parameter's name and shape, in the order the model registers them."""
    before, after = outer_shapes(config)
    shapes = dict(before)
    for layer in range(config.layers):
        shapes |= {
            f"blocks.{layer}.{name}": shape for name, shape in block_shapes(config, layer).items()
        }
    return shapes | after


def parameter_count(config: ModelConfig) -> int:
    """How many numbers the model's parameters hold, counted from the shapes alone, so it is
    cheap for a configuration too large to build."""
    before, after = outer_shapes(config)
    outer = sum(math.prod(shape) for shape in (*before.values(), *after.values()))
    blocks = (block_shapes(config, layer).values() for layer in range(config.layers))
    return outer + sum(math.prod(shape) for shapes in blocks for shape in shapes)


def training_state_bytes(
    config: ModelConfig, adapter_numbers: int | None = None, base_bytes: int = 4
) -> int:
    """Bytes of the numbers training holds: for each weight it trains, the float32 weight, its
    gradient and AdamW's two moments; where it trains `adapter_numbers` adapter numbers alone,
    each weight once in `base_bytes` bytes (2 for a bfloat16 base) and those four float32 numbers
    for each adapter number."""
    if adapter_numbers is None:
        return parameter_count(config) * 4 * 4
    return parameter_count(config) * base_bytes + 4 * adapter_numbers * 4


def step_activation_bytes(config: ModelConfig, windows: int, context: int, precision: str) -> int:
    """A lower bound on the bytes one forward pass of `windows` windows at `context` keeps for its
    backward pass: what it needs at the least, so a pass this bound does not fit cannot run.

    Each of the context-1 positions of a window keeps, in every block, the normed input of its two
    branches, the query, key and value, the attention's output (6 d_model numbers) and the
    feed-forward's hidden layer before and after its activation (2 d_ff; a gated one's gate, up
    and their product, 3), and the attention probabilities of every head (heads x positions) when
    they are masked by dropout; then the last norm's output and two copies of the logits, the
    logits and their log-softmax. Under bf16 no number takes under 2 bytes.
    """
    positions = context - 1
    hidden = 3 if config.parts.feed_forward.gated else 2
    per_block = 6 * config.d_model + hidden * config.d_ff
    if config.attention_dropout > 0:
        per_block += config.heads * positions
    per_position = config.layers * per_block + config.d_model + 2 * config.vocab_size
    return windows * positions * per_position * (4 if precision == "f32" else 2)


def _norm(name: str, norm: Norm, width: int) -> dict[str, tuple[int, ...]]:
    if norm.kind == "rms_unscaled":
        return {}
    scale = {f"{name}.weight": (width,)}
    return scale | {f"{name}.bias": (width,)} if norm.kind == "layer" else scale


def _head_norms(spec: Norm | None, width: int) -> dict[str, tuple[int, ...]]:
    if spec is None:
        return {}
    return _norm("attention.q_norm", spec, width) | _norm("attention.k_norm", spec, width)


def _value_gate(config: ModelConfig, layer: int) -> dict[str, tuple[int, ...]]:
    if layer not in config.parts.value_embedding_layers:
        return {}
    return {"attention.value_gate.weight": (config.parts.attention.kv_heads, gate_channels(config))}


def gate_channels(config: ModelConfig) -> int:
    """The channels of a block's normed input a value-embedding gate reads."""
    return min(GATE_CHANNELS, config.d_model)


def _linear(name: str, rows: int, columns: int, bias: bool) -> dict[str, tuple[int, ...]]:
    weight = {f"{name}.weight": (rows, columns)}
    return weight | {f"{name}.bias": (rows,)} if bias else weight

"""The decoder a configuration names, built from checked weights: GPT-2's (`zrodlo.model.gpt`) or
llama's (`zrodlo.model.llama`)."""

from __future__ import annotations

import torch

from zrodlo.model.config import ModelConfig
from zrodlo.model.gpt import GPT
from zrodlo.model.layers import Decoder
from zrodlo.model.llama import Llama


def build_decoder(
    config: ModelConfig,
    weights: dict[str, torch.Tensor],
    device: str | torch.device = "cpu",
    source: str = "the weights",
) -> Decoder:
    """The model of `config`'s architecture holding copies of `weights` on `device`."""
    architecture = Llama if config.architecture == "llama" else GPT
    return architecture.from_weights(config, weights, device, source)

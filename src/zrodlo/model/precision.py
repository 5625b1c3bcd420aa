"""The number formats a run computes in: f32 throughout, or bf16 mixed precision on a GPU.

Under bf16 only the matrix products run in bfloat16; norms, softmax and the loss stay float32, and
the weights, gradients and AdamW moments are float32 whatever the precision.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext

import torch


def autocast(device: torch.device, precision: str) -> AbstractContextManager:
    """The context a forward pass runs in: torch's bf16 autocast for `bf16`, nothing for `f32`."""
    if precision == "bf16":
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
    return nullcontext()

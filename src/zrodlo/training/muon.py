"""Muon, written in float32: each hidden matrix moves along its momentum orthogonalised.

For a matrix parameter W (rows, columns) with gradient G at update n, momentum mu(n):

    M = mu M + (1 - mu) G                       the momentum buffer (zeros before update 0)
    U = (1 - mu) G + mu M                       Nesterov's look-ahead
    W = W (1 - lr wd)                           decoupled weight decay
    W = W - lr sqrt(max(1, rows / columns)) NS5(U)

NS5 is five Newton-Schulz iterations of the quintic X = a X + (b A + c A A) X with A = X X^T and
(a, b, c) = (3.4445, -4.7750, 2.0315), started from U divided by its Frobenius norm: it pushes every
singular value of U toward 1 (to within about 0.3) while keeping its singular vectors, so the
update moves every direction the momentum holds by about the same amount. Every product is
float32: torch's own Muon and the references iterate in bfloat16, which rounds each update at 8
bits of precision and differs between devices.

The scale sqrt(max(1, rows / columns)) gives each update a spectral norm of sqrt(fan_out / fan_in)
when the matrix widens and 1 when it narrows: the size of step that moves a layer's output by the
same amount at every width (the spectral condition of feature learning), so one --learning-rate
serves every matrix of the model and carries over from a narrow model to a wider one. A fused
projection (llama's query, key and value rows; its gate and up rows) is orthogonalised and scaled
per logical matrix, as if each were its own parameter.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

from zrodlo.model.config import ModelConfig

NEWTON_SCHULZ = (3.4445, -4.7750, 2.0315)
NEWTON_SCHULZ_STEPS = 5


def orthogonalized(update: torch.Tensor, steps: int = NEWTON_SCHULZ_STEPS) -> torch.Tensor:
    """(r, c) float32 -> (r, c) float32: `update` with its singular values pushed toward 1."""
    a, b, c = NEWTON_SCHULZ
    x = update / (torch.linalg.matrix_norm(update) + 1e-7)  # every singular value at most 1
    wide = x.shape[0] <= x.shape[1]
    if not wide:  # iterate on the smaller Gram matrix: (min(r, c), min(r, c))
        x = x.mT
    for _ in range(steps):
        gram = x @ x.mT  # (s, s)
        x = a * x + (b * gram + c * (gram @ gram)) @ x
    return x if wide else x.mT


def shape_scale(rows: int, columns: int) -> float:
    """The factor of a (rows, columns) matrix's orthogonalised update: sqrt(max(1, rows/columns))."""
    return max(1.0, rows / columns) ** 0.5


def logical_rows(name: str, rows: int, config: ModelConfig) -> tuple[int, ...]:
    """The row counts of the logical matrices that parameter `name` of `rows` rows stacks: a
    fused query, key and value projection holds three, a fused gate and up projection two, any
    other matrix one."""
    if name.endswith("attention.qkv.weight"):
        keys = config.parts.attention.kv_heads * config.head_width
        return (config.heads * config.head_width, keys, keys)
    if name.endswith("mlp.gate_up.weight"):
        return (config.d_ff, config.d_ff)
    return (rows,)


def is_hidden_matrix(name: str, parameter: torch.Tensor) -> bool:
    """Whether Muon trains this parameter: a block's two-dimensional projection weight. The
    embeddings and the head are not hidden (they map tokens, not features) and vectors are not
    matrices: AdamW trains those."""
    return name.startswith("blocks.") and parameter.ndim == 2


class Muon(torch.optim.Optimizer):
    """Muon over named matrices, each split into its logical matrices by row counts; the rate,
    momentum and weight decay of its one group are set before every update."""

    def __init__(
        self,
        matrices: Iterable[tuple[torch.nn.Parameter, tuple[int, ...]]],
        learning_rate: float,
        momentum: float,
        weight_decay: float,
    ) -> None:
        matrices = list(matrices)
        self.rows = {parameter: rows for parameter, rows in matrices}
        for parameter, rows in matrices:
            if parameter.dtype != torch.float32 or sum(rows) != parameter.shape[0]:
                raise ValueError(f"a {parameter.dtype} {tuple(parameter.shape)} matrix in {rows}")
        defaults = {"lr": learning_rate, "momentum": momentum, "weight_decay": weight_decay}
        super().__init__([parameter for parameter, _ in matrices], defaults)

    @torch.no_grad()
    def step(self, closure: None = None) -> None:
        for group in self.param_groups:
            rate, momentum, decay = group["lr"], group["momentum"], group["weight_decay"]
            for parameter in group["params"]:
                if parameter.grad is None:
                    continue
                state = self.state[parameter]
                if not state:
                    state["momentum_buffer"] = torch.zeros_like(parameter)
                    state["step"] = torch.tensor(0.0, dtype=torch.float32)
                buffer = state["momentum_buffer"]  # (r, c)
                buffer.lerp_(parameter.grad, 1 - momentum)
                update = parameter.grad.lerp(buffer, momentum)  # (r, c)
                if decay:
                    parameter.mul_(1 - rate * decay)
                first = 0
                for rows in self.rows[parameter]:
                    block = slice(first, first + rows)
                    scale = shape_scale(rows, parameter.shape[1])
                    parameter[block].add_(orthogonalized(update[block]), alpha=-rate * scale)
                    first += rows
                state["step"] += 1

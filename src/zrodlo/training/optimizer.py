"""The optimizer a run steps: AdamW on every weight, or Muon on the blocks' matrices beside AdamW
on the rest; their parameter groups, the rate and momentum set before each update, and clipping.
Their state is exported and restored by parameter name (`zrodlo.training.optimizer_state`).
"""

from collections.abc import Iterable

import torch

from zrodlo.model.config import ModelConfig
from zrodlo.training.muon import Muon, is_hidden_matrix, logical_rows
from zrodlo.training.optimizer_settings import AdamWSettings, MuonSettings


def decays(parameter: torch.Tensor, scope: str) -> bool:
    """Whether weight decay pulls this parameter toward zero under --decay-scope `scope`.

    With `matrices`, only tensors of two or more dimensions decay: embeddings and projections do,
    biases and norm scales (one dimension) do not.
    """
    return scope == "all" or parameter.ndim >= 2


def build_adamw(
    named_parameters: Iterable[tuple[str, torch.nn.Parameter]],
    settings: AdamWSettings,
    learning_rate: float,
    peaks: dict[str, float | None] | None = None,
) -> torch.optim.AdamW:
    """AdamW over the parameters, in groups: those that decay and those that do not, and with
    `peaks` apart by their own peak rate, `peaks[name]` (None: the schedule's rate itself).

    The single-tensor implementation is chosen explicitly (foreach=False, fused=False): torch
    otherwise picks the foreach or fused kernels by device and tensor layout, which group and
    order the arithmetic differently, so the same run could round differently on another call
    path. One fixed implementation keeps every update's arithmetic the same on every run.
    """
    grouped: dict[tuple[bool, float | None], list[torch.nn.Parameter]] = {}
    for name, parameter in named_parameters:
        key = (decays(parameter, settings.decay_scope), None if peaks is None else peaks[name])
        grouped.setdefault(key, []).append(parameter)
    groups = [
        {"params": grouped[key], "weight_decay": settings.weight_decay if key[0] else 0.0}
        | ({} if key[1] is None else {"peak": key[1]})
        for key in sorted(grouped, key=lambda key: (not key[0], key[1] or 0.0))
    ]
    return torch.optim.AdamW(
        groups,
        lr=learning_rate,
        betas=(settings.beta1, settings.beta2),
        eps=settings.epsilon,
        amsgrad=False,
        maximize=False,
        foreach=False,
        capturable=False,
        differentiable=False,
        fused=False,
    )


class MuonAndAdamW:
    """Muon on the blocks' matrices and AdamW on every other weight, stepped as one optimizer."""

    def __init__(self, muon: Muon, adamw: torch.optim.AdamW) -> None:
        self.muon = muon
        self.adamw = adamw

    @property
    def param_groups(self) -> list[dict]:
        return [*self.muon.param_groups, *self.adamw.param_groups]

    @property
    def state(self) -> dict:
        return {**self.adamw.state, **self.muon.state}

    def step(self) -> None:
        self.muon.step()
        self.adamw.step()

    def zero_grad(self, set_to_none: bool = True) -> None:
        self.muon.zero_grad(set_to_none)
        self.adamw.zero_grad(set_to_none)


Optimizer = torch.optim.AdamW | MuonAndAdamW


def build_optimizer(
    named_parameters: Iterable[tuple[str, torch.nn.Parameter]],
    config: ModelConfig,
    adamw: AdamWSettings,
    learning_rate: float,
    muon: MuonSettings | None,
) -> Optimizer:
    """AdamW over every parameter where `muon` is None; else Muon over the blocks' matrices at
    `learning_rate` and AdamW over the embeddings, the head and the vectors at their own peaks."""
    named = list(named_parameters)
    if muon is None:
        return build_adamw(named, adamw, learning_rate)
    matrices = [
        (p, logical_rows(n, p.shape[0], config)) for n, p in named if is_hidden_matrix(n, p)
    ]
    rest = [(name, p) for name, p in named if not is_hidden_matrix(name, p)]
    peaks = {name: _peak(name, p, muon, learning_rate) for name, p in rest}
    hidden = Muon(matrices, learning_rate, muon.momentum_at(0), adamw.weight_decay)
    return MuonAndAdamW(hidden, build_adamw(rest, adamw, learning_rate, peaks))


def _peak(
    name: str, parameter: torch.Tensor, muon: MuonSettings, learning_rate: float
) -> float | None:
    """The group's own peak rate; None where it is --learning-rate, so it runs at the schedule's
    rate itself."""
    if parameter.ndim < 2:
        peak = muon.vector_rate
    else:
        peak = muon.head_rate if name == "lm_head.weight" else muon.embedding_rate
    return None if peak == learning_rate else peak


def set_learning_rate(optimizer: Optimizer, rate: float, learning_rate: float) -> None:
    """Give every parameter group the rate of the coming update (a Python float, not a tensor):
    `rate` itself, or for a group with a peak of its own, that peak scaled as the schedule scales
    `learning_rate` to `rate` (so it is its peak exactly wherever the schedule is at its peak)."""
    for group in optimizer.param_groups:
        peak = group.get("peak")
        group["lr"] = float(rate) if peak is None else peak * (float(rate) / learning_rate)


def set_momentum(optimizer: Optimizer, momentum: float) -> None:
    """Give Muon the momentum of the coming update; AdamW's betas stay as they are."""
    if isinstance(optimizer, MuonAndAdamW):
        optimizer.muon.param_groups[0]["momentum"] = momentum


def clip_gradients(parameters: Iterable[torch.Tensor], clip_norm: float | None) -> float:
    """Scale the gradients down to global L2 norm `clip_norm` when larger; return the norm before.

    Parameters without a gradient are skipped. The norm is returned even without clipping, for
    the progress line, and may be inf or nan when a gradient is. torch divides by norm + 1e-6, so a
    clipped gradient ends just under clip_norm. foreach=False for the same reason as the optimizer.
    """
    with_grad = [p for p in parameters if p.grad is not None]
    if not with_grad:
        return 0.0
    if clip_norm is None:
        norm = torch.nn.utils.get_total_norm([p.grad for p in with_grad], foreach=False)
    else:
        norm = torch.nn.utils.clip_grad_norm_(with_grad, clip_norm, foreach=False)
    return float(norm.item())

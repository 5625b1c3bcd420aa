"""AdamW as a run uses it: its settings, its parameter groups, its state by name, and clipping.

The state (both moments and the step count of every parameter) is exported and restored by
parameter name, so a checkpoint holds it as plain tensors in safetensors and a resumed optimizer
continues the very same arithmetic: restoring weights alone would restart the moments and change
the next update (the textbook's 0.9 + 0.1/19 against 1.0).
"""

import math
from collections.abc import Iterable, Mapping

import torch

from zrodlo.training.plan import AdamWSettings

STATE_KEYS = ("exp_avg", "exp_avg_sq", "step")


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
) -> torch.optim.AdamW:
    """AdamW over the parameters, in two groups: those that decay and those that do not.

    The single-tensor implementation is chosen explicitly (foreach=False, fused=False): torch
    otherwise picks the foreach or fused kernels by device and tensor layout, which group and
    order the arithmetic differently, so the same run could round differently on another call
    path. One fixed implementation keeps every update's arithmetic the same on every run.
    """
    decaying: list[torch.nn.Parameter] = []
    fixed: list[torch.nn.Parameter] = []
    for _, parameter in named_parameters:
        (decaying if decays(parameter, settings.decay_scope) else fixed).append(parameter)
    groups = [
        {"params": params, "weight_decay": decay}
        for params, decay in ((decaying, settings.weight_decay), (fixed, 0.0))
        if params
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


def set_learning_rate(optimizer: torch.optim.Optimizer, rate: float) -> None:
    """Give every parameter group the rate of the coming update (a Python float, not a tensor)."""
    for group in optimizer.param_groups:
        group["lr"] = float(rate)


def _by_name(
    named_parameters: Mapping[str, torch.Tensor] | Iterable[tuple[str, torch.Tensor]],
) -> dict[str, torch.Tensor]:
    return dict(
        named_parameters.items() if isinstance(named_parameters, Mapping) else named_parameters
    )


def optimizer_state_tensors(
    optimizer: torch.optim.AdamW,
    named_parameters: Mapping[str, torch.Tensor] | Iterable[tuple[str, torch.Tensor]],
) -> dict[str, torch.Tensor]:
    """AdamW's state as `<name>.exp_avg`, `<name>.exp_avg_sq` and `<name>.step` CPU tensors.

    A parameter AdamW has not stepped yet (no gradient so far) is written as zero moments and step
    0, which is exactly the state AdamW would create for it, so every file has the same keys.
    The step count keeps torch's own dtype (a float32 scalar) so it round-trips bit for bit.
    """
    tensors: dict[str, torch.Tensor] = {}
    for name, parameter in _by_name(named_parameters).items():
        state = optimizer.state.get(parameter, {})
        if state:
            exp_avg, exp_avg_sq, step = state["exp_avg"], state["exp_avg_sq"], state["step"]
        else:
            exp_avg = torch.zeros_like(parameter, memory_format=torch.contiguous_format)
            exp_avg_sq = torch.zeros_like(parameter, memory_format=torch.contiguous_format)
            step = torch.tensor(0.0, dtype=torch.float32)
        # clone(): safetensors wants contiguous tensors that own their storage.
        tensors[f"{name}.exp_avg"] = exp_avg.detach().to("cpu").contiguous().clone()
        tensors[f"{name}.exp_avg_sq"] = exp_avg_sq.detach().to("cpu").contiguous().clone()
        tensors[f"{name}.step"] = step.detach().to("cpu").reshape(()).clone()
    return tensors


def load_optimizer_state(
    optimizer: torch.optim.AdamW,
    named_parameters: Mapping[str, torch.Tensor] | Iterable[tuple[str, torch.Tensor]],
    tensors: Mapping[str, torch.Tensor],
    updates: int,
) -> None:
    """Restore what `optimizer_state_tensors` wrote after `updates` updates; ValueError names the
    first key that is wrong.

    Every parameter needs its three keys, finite moments of its own shape and dtype (the second
    0 or more), and a step count of `updates`, or 0 for a parameter never updated, whose moments
    are zeros; a key that names no parameter is wrong too.
    Nothing is changed unless every key is right.
    """
    by_name = _by_name(named_parameters)
    index = {id(p): i for i, p in enumerate(p for g in optimizer.param_groups for p in g["params"])}
    expected = {f"{name}.{key}" for name in by_name for key in STATE_KEYS}
    extra = sorted(set(tensors) - expected)
    if extra:
        raise ValueError(f"{extra[0]} names no parameter of the model")
    state: dict[int, dict[str, torch.Tensor]] = {}
    for name, parameter in by_name.items():
        if id(parameter) not in index:
            raise ValueError(f"{name} is not a parameter of the optimizer")
        entry: dict[str, torch.Tensor] = {}
        for key in ("exp_avg", "exp_avg_sq"):
            tensor = _get(tensors, f"{name}.{key}")
            if tensor.shape != parameter.shape or tensor.dtype != parameter.dtype:
                raise ValueError(
                    f"{name}.{key} is {tensor.dtype} {tuple(tensor.shape)}, the parameter "
                    f"{parameter.dtype} {tuple(parameter.shape)}"
                )
            if not bool(torch.isfinite(tensor).all()):
                raise ValueError(f"{name}.{key} holds a value that is not finite")
            if key == "exp_avg_sq" and bool((tensor < 0).any()):
                raise ValueError(f"{name}.exp_avg_sq holds a negative second moment")
            entry[key] = tensor.to(parameter.device).clone()
        step = _get(tensors, f"{name}.step")
        if (
            step.shape != ()
            or not step.is_floating_point()
            or not (math.isfinite(step.item()) and step.item() >= 0)
            or step.item() != math.floor(step.item())
        ):
            raise ValueError(f"{name}.step is not a whole number of updates in a scalar")
        if step.item() not in (0, updates):
            raise ValueError(
                f"{name}.step counts {int(step.item())} updates, and the checkpoint records "
                f"{updates}"
            )
        if step.item() == 0 and any(bool(entry[key].any()) for key in ("exp_avg", "exp_avg_sq")):
            raise ValueError(f"{name}.step counts 0 updates, and its moments are not zero")
        entry["step"] = step.clone()
        # Step 0 is a parameter never updated: AdamW keeps no state for it, and creates the
        # same zeros when it first gets a gradient.
        if step.item() > 0:
            state[index[id(parameter)]] = entry
    saved = optimizer.state_dict()
    # load_state_dict rather than writing optimizer.state: it keys the state to the live
    # parameters and keeps the float32 step as torch's own load path does.
    optimizer.load_state_dict({"state": state, "param_groups": saved["param_groups"]})


def _get(tensors: Mapping[str, torch.Tensor], key: str) -> torch.Tensor:
    if key not in tensors:
        raise ValueError(f"{key} is missing")
    return tensors[key]


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

"""An optimizer's state by parameter name, as a checkpoint holds it and a resume restores it.

AdamW keeps both moments and the step count of every parameter it trains; Muon keeps its momentum
buffer and the step count of every matrix. Each is exported and restored by parameter name, so a
checkpoint holds it as plain tensors in safetensors and a resumed optimizer continues the very same
arithmetic: restoring weights alone would restart the moments and change the next update (the
textbook's 0.9 + 0.1/19 against 1.0).
"""

import math
from collections.abc import Iterable, Mapping

import torch

from zrodlo.training.optimizer import MuonAndAdamW, Optimizer

ADAMW_STATE = ("exp_avg", "exp_avg_sq", "step")
MUON_STATE = ("momentum", "step")
# The name each kept tensor has in torch's own state dictionary of the optimizer.
TORCH_NAMES = {"momentum": "momentum_buffer"}

Named = Mapping[str, torch.Tensor] | Iterable[tuple[str, torch.Tensor]]


def _by_name(named_parameters: Named) -> dict[str, torch.Tensor]:
    return dict(
        named_parameters.items() if isinstance(named_parameters, Mapping) else named_parameters
    )


def _kept(optimizer: Optimizer, parameter: torch.Tensor) -> tuple[str, ...]:
    """The names of what `optimizer` keeps for `parameter`."""
    muon = isinstance(optimizer, MuonAndAdamW) and parameter in optimizer.muon.rows
    return MUON_STATE if muon else ADAMW_STATE


def optimizer_state_tensors(
    optimizer: Optimizer, named_parameters: Named
) -> dict[str, torch.Tensor]:
    """The state as `<name>.exp_avg`, `<name>.exp_avg_sq` and `<name>.step` CPU tensors for an
    AdamW parameter, `<name>.momentum` and `<name>.step` for a Muon matrix.

    A parameter not stepped yet (no gradient so far) is written as zeros and step 0, which is
    exactly the state the optimizer would create for it, so every file has the same keys.
    The step count keeps torch's own dtype (a float32 scalar) so it round-trips bit for bit.
    """
    tensors: dict[str, torch.Tensor] = {}
    for name, parameter in _by_name(named_parameters).items():
        state = optimizer.state.get(parameter, {})
        for key in _kept(optimizer, parameter):
            if key == "step":
                value = state["step"] if state else torch.tensor(0.0, dtype=torch.float32)
                tensors[f"{name}.step"] = value.detach().to("cpu").reshape(()).clone()
                continue
            value = state.get(TORCH_NAMES.get(key, key)) if state else None
            if value is None:
                value = torch.zeros_like(parameter, memory_format=torch.contiguous_format)
            # clone(): safetensors wants contiguous tensors that own their storage.
            tensors[f"{name}.{key}"] = value.detach().to("cpu").contiguous().clone()
    return tensors


def load_optimizer_state(
    optimizer: Optimizer, named_parameters: Named, tensors: Mapping[str, torch.Tensor], updates: int
) -> None:
    """Restore what `optimizer_state_tensors` wrote after `updates` updates; ValueError names the
    first key that is wrong.

    Every parameter needs its keys, finite tensors of its own shape and dtype (AdamW's second
    moment 0 or more), and a step count of `updates`, or 0 for a parameter never updated, whose
    tensors are zeros; a key that names no parameter, or state its optimizer does not keep, is
    wrong too. Nothing is changed unless every key is right.
    """
    by_name = _by_name(named_parameters)
    held = {id(p) for group in optimizer.param_groups for p in group["params"]}
    expected = {f"{n}.{key}" for n, p in by_name.items() for key in _kept(optimizer, p)}
    extra = sorted(set(tensors) - expected)
    if extra:
        owner = extra[0].rsplit(".", 1)[0]
        if owner in by_name:
            raise ValueError(f"{extra[0]} is state the optimizer of {owner} does not keep")
        raise ValueError(f"{extra[0]} names no parameter of the model")
    restored: dict[torch.Tensor, dict[str, torch.Tensor]] = {}
    for name, parameter in by_name.items():
        if id(parameter) not in held:
            raise ValueError(f"{name} is not a parameter of the optimizer")
        entry = _checked_entry(name, parameter, tensors, _kept(optimizer, parameter), updates)
        # Step 0 is a parameter never updated: the optimizer keeps no state for it, and creates
        # the same zeros when it first gets a gradient.
        if entry["step"].item() > 0:
            restored[parameter] = entry
    if isinstance(optimizer, MuonAndAdamW):
        for parameter in optimizer.muon.rows:
            optimizer.muon.state.pop(parameter, None)
            if parameter in restored:
                optimizer.muon.state[parameter] = restored.pop(parameter)
        optimizer = optimizer.adamw
    index = {p: i for i, p in enumerate(p for g in optimizer.param_groups for p in g["params"])}
    saved = optimizer.state_dict()
    # load_state_dict rather than writing optimizer.state: it keys the state to the live
    # parameters and keeps the float32 step as torch's own load path does.
    state = {index[parameter]: entry for parameter, entry in restored.items()}
    optimizer.load_state_dict({"state": state, "param_groups": saved["param_groups"]})


def _checked_entry(
    name: str,
    parameter: torch.Tensor,
    tensors: Mapping[str, torch.Tensor],
    kept: tuple[str, ...],
    updates: int,
) -> dict[str, torch.Tensor]:
    """One parameter's state as torch keeps it, each tensor checked; ValueError names a wrong one."""
    entry: dict[str, torch.Tensor] = {}
    for key in kept[:-1]:  # the tensors of the parameter's shape; the step count is last
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
        entry[TORCH_NAMES.get(key, key)] = tensor.to(parameter.device).clone()
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
            f"{name}.step counts {int(step.item())} updates, and the checkpoint records {updates}"
        )
    if step.item() == 0 and any(bool(value.any()) for value in entry.values()):
        what = "moments are" if len(entry) > 1 else "momentum is"
        raise ValueError(f"{name}.step counts 0 updates, and its {what} not zero")
    entry["step"] = step.clone()
    return entry


def _get(tensors: Mapping[str, torch.Tensor], key: str) -> torch.Tensor:
    if key not in tensors:
        raise ValueError(f"{key} is missing")
    return tensors[key]

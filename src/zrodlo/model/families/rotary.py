"""Rotary positions as a llama-like family states them: the base of the angles and Llama 3's
scaling, read from a transformers config.json as transformers reads it, written back in the form
it writes, and checked.

transformers 5 states them in `rope_parameters`; earlier versions in `rope_theta` and
`rope_scaling`, which transformers still reads, the second before the first where both are set.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from zrodlo.model.families.base import is_number, is_whole
from zrodlo.model.parts import Rotary, RotaryScaling
from zrodlo.storage.refusal import Refusal

if TYPE_CHECKING:
    from zrodlo.model.config import ModelConfig

ROPE_THETA = 10000.0
# Llama 3's scaling: Zrodlo's setting, and the key transformers names it by.
SCALING = {
    "rope_scaling_factor": "factor",
    "rope_low_frequency_factor": "low_freq_factor",
    "rope_high_frequency_factor": "high_freq_factor",
    "rope_original_positions": "original_max_position_embeddings",
}
_KINDS = {"default": {"rope_type", "type", "rope_theta"}}
_KINDS["llama3"] = _KINDS["default"] | set(SCALING.values())


def rotary_of(settings: Any) -> Rotary:
    """The rotary positions a family's settings state."""
    if settings.rope_scaling_factor is None:
        return Rotary(float(settings.rope_theta))
    scaling = RotaryScaling(
        factor=float(settings.rope_scaling_factor),
        low_frequency_factor=float(settings.rope_low_frequency_factor),
        high_frequency_factor=float(settings.rope_high_frequency_factor),
        original_positions=settings.rope_original_positions,
    )
    return Rotary(float(settings.rope_theta), scaling)


def check_rotary(config: ModelConfig, name: Any) -> None:
    """Refuse a base or a scaling no angles can be computed from."""
    settings = config.settings
    theta = settings.rope_theta
    if not _positive(theta):
        raise Refusal(f"{name('rope_theta')} is {theta}; it must be a positive finite number")
    given = {field: getattr(settings, field) for field in SCALING}
    if all(value is None for value in given.values()):
        return
    for field, value in given.items():
        whole = field != "rope_original_positions" or is_whole(value)
        if not (_positive(value) and whole):
            unset = " (Llama 3's scaling sets all four or none)" if value is None else ""
            raise Refusal(f"{name(field)} is {value}{unset}; it must be a positive finite number")
    low, high = settings.rope_low_frequency_factor, settings.rope_high_frequency_factor
    if not low < high:
        raise Refusal(
            f"{name('rope_low_frequency_factor')} {low} is not below "
            f"{name('rope_high_frequency_factor')} {high}; the frequencies between are blended"
        )


def rotary_from_transformers(stated: dict[str, Any], file: Path) -> dict[str, Any]:
    """The rotary settings of a transformers config.json; a kind Zrodlo does not compute is
    refused naming it."""
    field = "rope_scaling" if stated.get("rope_scaling") is not None else "rope_parameters"
    given = stated.get(field) or {}
    parameters = given if isinstance(given, dict) else {"rope_type": None}
    kind = parameters.get("rope_type", parameters.get("type", "default"))
    whole_head = (
        {"partial_rotary_factor"} if parameters.get("partial_rotary_factor") == 1 else set()
    )
    if (
        not isinstance(kind, str)
        or kind not in _KINDS
        or set(parameters) - _KINDS[kind] - whole_head
    ):
        raise Refusal(
            f"{file} sets {field} to {given!r}; Zrodlo computes rotary positions over the "
            "whole head, unscaled or scaled as Llama 3's (rope_type llama3), so the model cannot "
            "be imported exactly"
        )
    theta = parameters.get("rope_theta", stated.get("rope_theta", ROPE_THETA))
    settings = {
        "rope_theta": float(theta) if is_number(theta) else theta
    }  # else refused with the rest
    if kind == "llama3":
        positions = stated.get("max_position_embeddings")
        original = stated.get(  # transformers takes a top-level field before its own
            "original_max_position_embeddings",
            parameters.get("original_max_position_embeddings", positions),
        )
        settings |= {ours: parameters.get(theirs) for ours, theirs in SCALING.items()}
        settings["rope_original_positions"] = original
    return settings


def rotary_to_transformers(settings: Any) -> dict[str, Any]:
    """The fields of a transformers config.json that state the rotary settings."""
    if settings.rope_scaling_factor is None:
        return {"rope_theta": settings.rope_theta, "rope_scaling": None}
    stated = {theirs: getattr(settings, ours) for ours, theirs in SCALING.items()}
    return {
        "rope_theta": settings.rope_theta,
        "rope_parameters": {"rope_type": "llama3", "rope_theta": settings.rope_theta, **stated},
    }


def _positive(value: Any) -> bool:
    return is_number(value) and math.isfinite(value) and value > 0

"""Named model sizes: a preset gives a decoder's layers, heads, width and MLP width at once, so that
a user picks a size (`--preset small`, params.yaml `init.preset`) instead of four numbers that must
agree. The README's table, from benchmarks/presets.py, says what each costs a step and what corpus
it suits.
"""

from __future__ import annotations

from zrodlo.storage.refusal import Refusal, listed

# The fields of `ModelConfig` a preset gives; the others (positions, dropout) are the run's choice.
SHAPE = ("layers", "heads", "d_model", "d_ff")

# GPT-2's proportions (an MLP four times the width), heads 16 to 32 wide; `small` is the shape the
# pipeline has always trained, so its weights are the ones earlier versions drew.
PRESETS: dict[str, dict[str, int]] = {
    "tiny": {"layers": 2, "heads": 4, "d_model": 64, "d_ff": 256},
    "small": {"layers": 4, "heads": 4, "d_model": 128, "d_ff": 512},
    "medium": {"layers": 6, "heads": 6, "d_model": 192, "d_ff": 768},
}


def shape_of(preset: str | None, given: dict[str, int | None]) -> dict[str, int]:
    """The shape fields of a model: each one `given` (not None), else the preset's. Refuse a preset
    that is not one, and a field that neither gives."""
    names = listed(PRESETS)
    if preset is not None and preset not in PRESETS:
        raise Refusal(f"--preset {preset} is no preset; choose {names}")
    base = PRESETS[preset] if preset is not None else {}
    shape = {}
    for field in SHAPE:
        value = given.get(field)
        if value is None:
            value = base.get(field)
        if value is None:
            flag = "--" + field.replace("_", "-")
            raise Refusal(
                f"{flag} is not given; give it, or --preset ({names}) for the whole shape"
            )
        shape[field] = value
    return shape

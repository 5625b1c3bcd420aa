"""`zrodlo model init`: a model directory with seeded initial weights (the `init` stage)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from zrodlo.model.config import DECLARATIONS
from zrodlo.model.presets import PRESETS, SHAPE
from zrodlo.stages import options

EXAMPLE = (
    "Example: zrodlo model init --tokenizer tokenizer --output model --preset small "
    "--positions 128 --dropout 0.1 --seed 1"
)


@options.taking(options.declared(*DECLARATIONS, optional=SHAPE), after="preset")
def init(
    tokenizer: Path = typer.Option(
        ..., help="The tokenizer directory whose vocabulary the model reads."
    ),
    output: Path = typer.Option(..., help="The model directory to write; must not exist."),
    preset: str | None = typer.Option(
        None,
        metavar="[" + "|".join(PRESETS) + "]",
        help="A named size, its layers, heads, width and MLP width; a shape flag given overrides "
        "its value. Without it, all four flags are needed.",
    ),
    seed: int = typer.Option(
        ..., help="Keys the ChaCha20 draws of the initial weights (0 to 2^64-1)."
    ),
    **shape: Any,
) -> None:
    """Write config.json, tokenizer.json and model.safetensors with weights drawn from --seed."""
    # Imported here, not at the top: `zrodlo --help` and the data stages then start without torch.
    from zrodlo.model.directory import init as init_model
    from zrodlo.model.parts import parameter_count

    written = init_model(tokenizer, output, seed=seed, preset=preset, **shape)
    typer.echo(
        f"wrote {output}: {parameter_count(written.config):,} parameters, "
        f"model.safetensors sha256 {written.digests['model.safetensors']}"
    )

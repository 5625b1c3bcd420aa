"""`zrodlo pipeline model`: the init stage, a model drawn (model init) or, where init.from names a
transformers directory, that model imported (model import). One command (`zrodlo --params
params.yaml pipeline model ...`) runs the one its params choose and prints what it prints."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from zrodlo.model.config import DECLARATIONS
from zrodlo.model.presets import PRESETS, SHAPE
from zrodlo.stages import export, init, options

EXAMPLE = "Example: zrodlo --params params.yaml pipeline model --tokenizer tokenizer --output model"


@options.taking(options.declared(*DECLARATIONS, optional=SHAPE), after="preset")
def pipeline_model(
    tokenizer: Path = typer.Option(..., help="The tokenizer directory a drawn model reads."),
    output: Path = typer.Option(..., help="The model directory to write; must not exist."),
    preset: str | None = typer.Option(
        None, metavar="[" + "|".join(PRESETS) + "]", help="A named size, as model init takes it."
    ),
    seed: int = typer.Option(..., help="Keys the ChaCha20 draws of the initial weights."),
    source: Path | None = options.FROM_MODEL,
    **shape: Any,
) -> None:
    """The model train starts from: drawn, or imported from --from.

    Drawn from --seed as model init draws it, or, with --from, that transformers directory
    imported, its weights exactly, as model import imports it."""
    if source is None:
        init.init(tokenizer, output, preset, seed, **shape)
    else:
        export.import_model(source, output)

"""`zrodlo pipeline architecture`: the init section's architecture settings of params.yaml as
model init's flags (the init stage passes them on)."""

from __future__ import annotations

from pathlib import Path

import typer

EXAMPLE = "Example: zrodlo pipeline architecture --params params.yaml"


def architecture(
    params: Path = typer.Option(Path("params.yaml"), help="The pipeline's params.yaml."),
) -> None:
    """Print --architecture, and for llama --kv-heads, --rope-theta and --tie-embeddings where the
    init section gives them."""
    from zrodlo.pipeline.architecture import architecture_flags

    typer.echo(architecture_flags(params))

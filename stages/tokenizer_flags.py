"""`zrodlo pipeline tokenizer`: the tokenizer stage's section of params.yaml as tokenizer fit's
flags (the stage passes them on)."""

from __future__ import annotations

from pathlib import Path

import typer

EXAMPLE = "Example: zrodlo pipeline tokenizer --params params.yaml"


def tokenizer(
    params: Path = typer.Option(Path("params.yaml"), help="The pipeline's params.yaml."),
) -> None:
    """Print --kind, and --vocab-size where the kind is bpe, for the tokenizer section."""
    from zrodlo.pipeline.tokenizer import tokenizer_flags

    typer.echo(tokenizer_flags(params))

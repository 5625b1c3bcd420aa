"""`zrodlo documents split`: write each pool's documents and a manifest (the `split` stage)."""

from __future__ import annotations

from pathlib import Path

import typer

EXAMPLE = (
    "Example: zrodlo documents split --documents data/documents.jsonl --splits data/splits.json"
    " --output pools"
)


def split(
    documents: Path = typer.Option(..., help="The documents file (JSONL)."),
    splits: Path = typer.Option(..., help="splits.json: the ids of train, validation and test."),
    output: Path = typer.Option(..., help="The directory to write; must not exist."),
) -> None:
    """Write train.jsonl, validation.jsonl, test.jsonl and manifest.json (counts and sha256)."""
    from zrodlo.data.pools import split as split_pools

    manifest = split_pools(documents, splits, output)
    for pool, entry in manifest["pools"].items():
        typer.echo(
            f"{pool}: {entry['documents']} documents, {entry['characters']} characters "
            f"-> {output / (pool + '.jsonl')}"
        )

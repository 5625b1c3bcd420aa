"""`zrodlo documents split`: write each pool's documents and a manifest (the `split` stage)."""

from __future__ import annotations

from pathlib import Path

import typer

from zrodlo.data.pools import split_documents
from zrodlo.storage.digest import write_json
from zrodlo.storage.outputs import new_directory

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
    with new_directory(output) as partial:
        manifest = split_documents(documents, splits, partial)
        write_json(partial / "manifest.json", manifest)
    for pool, entry in manifest["pools"].items():
        typer.echo(
            f"{pool}: {entry['documents']} documents, {entry['characters']} characters "
            f"-> {output / (pool + '.jsonl')}"
        )

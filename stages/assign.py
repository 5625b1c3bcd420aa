"""`zrodlo documents assign`: assign every document id to a pool by its hash, or take the pools a
user chose (the `splits` stage)."""

from __future__ import annotations

import json
from pathlib import Path

import typer

EXAMPLE = (
    "Example: zrodlo documents assign --documents data/documents.jsonl --output "
    "data/splits.json --validation 0.1 --test 0.1"
)


def assign(
    documents: Path = typer.Option(..., help="The documents file (JSONL) whose ids are assigned."),
    output: Path = typer.Option(..., help="The splits.json to write; must not exist."),
    validation: float = typer.Option(0.1, help="Share of documents held out for validation."),
    test: float = typer.Option(0.1, help="Share of documents held out for test."),
    source: Path | None = typer.Option(
        None,
        help="Where the pools come from: the --documents file (the default), drawn by hash; or "
        "a splits.json of your own, checked and written, the shares unread.",
    ),
) -> None:
    """Write splits.json: each id's pool drawn from a hash of the id alone, or --source's pools.

    Adding documents never moves an existing one to another pool."""
    from zrodlo.data.pools import assign as assign_pools

    pools = assign_pools(documents, output, validation, test, source)
    counts = json.dumps({pool: len(members) for pool, members in pools.items()})
    typer.echo(f"wrote {output}: {counts}")

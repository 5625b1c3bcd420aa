"""`zrodlo documents assign`: assign every document id to a pool by its hash (the `splits` stage)."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from zrodlo.data.documents import read_documents
from zrodlo.data.pools import assign_pools
from zrodlo.storage.digest import write_json
from zrodlo.storage.outputs import check_new_file, new_file

EXAMPLE = (
    "Example: zrodlo documents assign --documents data/documents.jsonl --output "
    "data/splits.json --validation 0.1 --test 0.1"
)


def assign(
    documents: Path = typer.Option(..., help="The documents file (JSONL) whose ids are assigned."),
    output: Path = typer.Option(..., help="The splits.json to write; must not exist."),
    validation: float = typer.Option(0.1, help="Share of documents held out for validation."),
    test: float = typer.Option(0.1, help="Share of documents held out for test."),
) -> None:
    """Write splits.json, each id's pool drawn from a hash of the id alone.

    Adding documents never moves an existing one to another pool."""
    check_new_file(output)
    ids = [document.id for document in read_documents(documents)]
    pools = assign_pools(ids, validation, test, documents)
    with new_file(output) as partial:
        write_json(partial, pools)
    counts = json.dumps({pool: len(members) for pool, members in pools.items()})
    typer.echo(f"wrote {output}: {counts}")

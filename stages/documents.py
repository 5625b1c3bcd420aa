"""`zrodlo documents pydoc` and `zrodlo documents import`: write a documents file (the `documents` stage)."""

from __future__ import annotations

from pathlib import Path

import typer

from zrodlo.output import new_file
from zrodlo.sources import pydoc_documents, source_documents, write_documents


def pydoc(
    output: Path = typer.Option(..., help="The documents file (JSONL) to write; must not exist."),
) -> None:
    """Write Python's own reference documentation as documents, one per topic (id = topic name)."""
    with new_file(output) as partial:
        count = write_documents(pydoc_documents(), partial, "pydoc_data.topics")
    typer.echo(f"wrote {output}: {count} documents from pydoc_data.topics")


def import_documents(
    source: Path = typer.Option(
        ..., help="A folder of UTF-8 text files (id = relative path), or a .parquet or .csv table."
    ),
    output: Path = typer.Option(..., help="The documents file (JSONL) to write; must not exist."),
    id_column: str = typer.Option("id", help="The table column that holds each document's id."),
    text_column: str = typer.Option(
        "text", help="The table column that holds each document's text."
    ),
) -> None:
    """Turn a folder of text files or a Parquet/CSV table into a documents file."""
    pairs = source_documents(source, id_column, text_column)
    with new_file(output) as partial:
        count = write_documents(pairs, partial, str(source))
    typer.echo(f"wrote {output}: {count} documents from {source}")

"""`zrodlo documents torch-docs` and `zrodlo documents import`: write a documents file (the
`documents` stage runs the first)."""

from __future__ import annotations

from pathlib import Path

import typer

TORCH_DOCS_EXAMPLE = "Example: zrodlo documents torch-docs --output data/documents.jsonl"
IMPORT_EXAMPLE = "Example: zrodlo documents import --source my_texts/ --output data/documents.jsonl"


def torch_docs(
    output: Path = typer.Option(..., help="The documents file (JSONL) to write; must not exist."),
) -> None:
    """Write the default documents: the docstrings of torch.nn's modules in the pinned torch, one
    per module, class and function (id = its qualified name), checked against their sha256."""
    from zrodlo.data import torch_docs as default

    count = default.torch_docs(output)
    typer.echo(
        f"wrote {output}: {count} documents, the docstrings of torch {default.DEFAULT_TORCH}'s "
        f"{default.DEFAULT_PACKAGE_FOLDER}"
    )


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
    from zrodlo.data.sources import import_documents as write

    count = write(source, output, id_column, text_column)
    typer.echo(f"wrote {output}: {count} documents from {source}")

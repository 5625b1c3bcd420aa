"""`zrodlo documents torch-docs` and `zrodlo documents import`: write a documents file (the
`torch-docs` and `documents` stages)."""

from __future__ import annotations

from pathlib import Path

import typer

TORCH_DOCS_EXAMPLE = "Example: zrodlo documents torch-docs --output data/documents.jsonl"
IMPORT_EXAMPLE = (
    "Example: zrodlo documents import --source input.txt --cut-at '\\n\\s*\\n' --output "
    "data/documents.jsonl"
)


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
        ...,
        help="A folder of UTF-8 text files (id = relative path), a .txt file (id = its name), a "
        "documents file (.jsonl, each line a text or a conversation in messages), or a .parquet "
        "or .csv table.",
    ),
    output: Path = typer.Option(..., help="The documents file (JSONL) to write; must not exist."),
    id_column: str = typer.Option("id", help="The table column that holds each document's id."),
    text_column: str = typer.Option(
        "text", help="The table column that holds each document's text."
    ),
    include: list[str] = typer.Option(
        (),
        help="Take only documents whose id (a file's path in the folder) matches this pattern, "
        "such as '*.py' (* crosses folders); give it once per pattern.",
    ),
    exclude: list[str] = typer.Option(
        (), help="Leave out documents whose id matches this pattern; give it once per pattern."
    ),
    skip_empty: bool = typer.Option(
        False, "--skip-empty", help="Skip documents with an empty text instead of refusing them."
    ),
    skip_undecodable: bool = typer.Option(
        False,
        "--skip-undecodable",
        help="Skip files of the folder that are not UTF-8 instead of refusing them.",
    ),
    skip_invalid: bool = typer.Option(
        False,
        "--skip-invalid",
        help="Skip chat documents whose messages are no conversation instead of refusing.",
    ),
    cut_at: str | None = typer.Option(
        None,
        help="Cut each text into documents at every match of this regular expression, such as "
        "'\\n\\s*\\n' (a blank line); the pieces' ids are the text's id and #1, #2, ...",
    ),
    max_characters: int | None = typer.Option(
        None,
        help="Cut each text (or piece) longer than this into parts at the last line break before "
        "it; ids as --cut-at gives them.",
    ),
    skipped: Path | None = typer.Option(
        None,
        help="List the skipped documents in this file, written even when none is skipped: one "
        "JSON object a line, or one JSON array where the name ends in .json; "
        "<output>.skipped.jsonl, only when some are, if left out.",
    ),
) -> None:
    """Turn a folder of text files, a text file or a Parquet/CSV table into a documents file, cut
    into documents where asked; skipped documents are listed beside it, in
    <output>.skipped.jsonl."""
    from zrodlo.data.selection import EMPTY, INVALID, NOT_UTF8
    from zrodlo.data.sources import import_documents as write

    imported = write(
        source, output, id_column, text_column, include, exclude, skip_empty, skip_undecodable,
        skipped, cut_at, max_characters, skip_invalid,
    )  # fmt: skip
    said = f"wrote {output}: {imported.documents} documents from {source}"
    if imported.cut_from is not None:
        said += f", cut from {imported.cut_from} text{'' if imported.cut_from == 1 else 's'}"
    if imported.left_out:
        said += f"; {imported.left_out} left out by --include and --exclude"
    typer.echo(said)
    if imported.skipped:
        reasons = [
            f"{count} {reason}"
            for reason in (EMPTY, NOT_UTF8, INVALID)
            if (count := imported.skipped_for(reason))
        ]
        typer.echo(
            f"skipped {len(imported.skipped)} ({', '.join(reasons)}), listed in "
            f"{imported.skipped_file}"
        )

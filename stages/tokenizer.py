"""`zrodlo tokenizer fit`: fit the character tokenizer on training documents (the `tokenizer` stage)."""

from __future__ import annotations

from pathlib import Path

import typer

EXAMPLE = "Example: zrodlo tokenizer fit --documents pools/train.jsonl --output tokenizer"


def fit(
    documents: Path = typer.Option(
        ..., help="The training documents (JSONL); only these are read."
    ),
    output: Path = typer.Option(
        ..., help="The directory to write tokenizer.json into; must not exist."
    ),
) -> None:
    """Fit a character tokenizer on training documents only.

    Ids: UNK 0, BOS 1, EOS 2, then every character of the documents by code point from 3."""
    from zrodlo.data.fitting import fit_tokenizer

    tokenizer = fit_tokenizer(documents, output)
    typer.echo(f"wrote {output}: vocab_size {tokenizer.vocab_size}, digest {tokenizer.digest}")

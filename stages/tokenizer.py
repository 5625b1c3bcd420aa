"""`zrodlo tokenizer fit`: fit the character tokenizer on training documents (the `tokenizer` stage)."""

from __future__ import annotations

from pathlib import Path

import typer

from zrodlo.data.documents import read_documents
from zrodlo.data.tokenizer import CharTokenizer
from zrodlo.storage.outputs import new_directory
from zrodlo.storage.refusal import Refusal

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
    with new_directory(output) as partial:
        texts = [document.text for document in read_documents(documents)]
        if not texts:
            raise Refusal(
                f"{documents} holds no documents; a tokenizer is fitted on one document or more"
            )
        tokenizer = CharTokenizer.fit(texts)
        tokenizer.save(partial)
    typer.echo(f"wrote {output}: vocab_size {tokenizer.vocab_size}, digest {tokenizer.digest}")

"""`zrodlo pipeline tokenizer`: the tokenizer stage, a tokenizer fitted (tokenizer fit) or, where
init.from names a transformers directory, its tokenizer imported (tokenizer import). One command
(`zrodlo --params params.yaml pipeline tokenizer ...`) runs the one its params choose and prints
what it prints, so that dvc.yaml reads as a command, not a shell test of a param."""

from __future__ import annotations

from pathlib import Path

import typer

from zrodlo.stages import options, tokenizer

EXAMPLE = (
    "Example: zrodlo --params params.yaml pipeline tokenizer --documents pools/train.jsonl "
    "--output tokenizer"
)


def pipeline_tokenizer(
    documents: Path = typer.Option(..., help="The training documents a tokenizer is fitted on."),
    output: Path = typer.Option(..., help="The tokenizer directory to write; must not exist."),
    kind: str = typer.Option("char", metavar="[char|bpe]", help="What tokenizer fit fits."),
    vocab_size: int | None = typer.Option(None, help="With --kind bpe, its vocabulary's size."),
    source: Path | None = options.FROM_MODEL,
) -> None:
    """The pipeline's tokenizer: fitted, or imported from --from.

    Fitted on --documents as tokenizer fit fits it, or, with --from, the tokenizer of that
    directory imported with the BOS and EOS it names, as tokenizer import imports it."""
    if source is None:
        tokenizer.fit(documents, output, kind, vocab_size)
    else:
        tokenizer.import_tokenizer(source / "tokenizer.json", output, None, None)

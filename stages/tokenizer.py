"""`zrodlo tokenizer fit`: fit a tokenizer on training documents (the `tokenizer` stage);
`zrodlo tokenizer import`: take a BPE the tokenizers library wrote (byte-level or SentencePiece),
with its own ids."""

from __future__ import annotations

from pathlib import Path

import typer

EXAMPLE = (
    "Example: zrodlo tokenizer fit --documents pools/train.jsonl --output tokenizer --kind bpe "
    "--vocab-size 1024"
)
IMPORT_EXAMPLE = "Example: zrodlo tokenizer import --from gpt2/tokenizer.json --output tokenizer"


def fit(
    documents: Path = typer.Option(
        ..., help="The training documents (JSONL); only these are read."
    ),
    output: Path = typer.Option(
        ..., help="The directory to write tokenizer.json into; must not exist."
    ),
    kind: str = typer.Option(
        "char",
        metavar="[char|bpe]",
        help="char: one token a character of the documents. bpe: a byte-level BPE, the 256 bytes "
        "and the merges most frequent in the documents.",
    ),
    vocab_size: int | None = typer.Option(
        None,
        help="With --kind bpe, the tokens its vocabulary holds: 258 (the bytes, BOS and EOS) or "
        "more.",
    ),
) -> None:
    """Fit a tokenizer on training documents only.

    char: UNK 0, BOS 1, EOS 2, then every character of the documents by code point from 3.
    bpe: BOS 0, EOS 1, the bytes from 2, then the symbols its merges make (docs/tokenizers.md)."""
    from zrodlo.data.tokenizer.fitting import fit_tokenizer

    tokenizer = fit_tokenizer(documents, output, kind=kind, vocab_size=vocab_size)
    line = f"wrote {output}: vocab_size {tokenizer.vocab_size}, digest {tokenizer.digest}"
    if vocab_size is not None and tokenizer.vocab_size < vocab_size:
        line += f" (fewer than the {vocab_size} asked: the documents hold no more pairs to merge)"
    typer.echo(line)


def import_tokenizer(
    source: Path = typer.Option(
        ...,
        "--from",
        help="A tokenizer.json of a BPE, as the tokenizers library writes it: byte-level (the GPT-2 "
        "family's, Qwen's) or SentencePiece-style (Gemma's, Llama 2's).",
    ),
    output: Path = typer.Option(
        ..., help="The directory to write tokenizer.json into; must not exist."
    ),
    bos: str | None = typer.Option(
        None,
        help="The special token that starts each document; by default the one tokenizer_config.json "
        "beside the file names, or the file's only special token.",
    ),
    eos: str | None = typer.Option(
        None,
        help="The special token that ends each document; found as --bos is.",
    ),
) -> None:
    """Import a BPE tokenizer you already have, its ids as they are.

    Encodes as the tokenizers library does; refuses any other kind (WordPiece, Unigram, ...) and a
    file that does not load, writing nothing (docs/tokenizers.md)."""
    from zrodlo.data.tokenizer.imported import import_tokenizer as run

    tokenizer = run(source, output, bos=bos, eos=eos)
    text = tokenizer.library.id_to_token
    if tokenizer.bos == tokenizer.eos:  # no BOS of its own (GPT-2's, Qwen's): one token frames
        framing = f"each document between two {text(tokenizer.eos)} ({tokenizer.eos})"
    else:
        framing = (
            f"each document after BOS {text(tokenizer.bos)} ({tokenizer.bos}) and before EOS "
            f"{text(tokenizer.eos)} ({tokenizer.eos})"
        )
    typer.echo(
        f"wrote {output}: vocab_size {tokenizer.vocab_size}, {framing}, digest {tokenizer.digest}"
    )

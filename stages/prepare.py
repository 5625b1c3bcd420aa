"""`zrodlo corpus prepare`: encode documents into a token corpus (the `prepare` stage)."""

from __future__ import annotations

import time
from pathlib import Path

import typer

from zrodlo.data.preparation import prepare as prepare_corpus

EXAMPLE = (
    "Example: zrodlo corpus prepare --documents pools/train.jsonl --tokenizer tokenizer "
    "--output corpus/train"
)


def prepare(
    documents: Path = typer.Option(..., help="The documents (JSONL) to encode."),
    tokenizer: Path = typer.Option(..., help="A tokenizer directory (or a model directory)."),
    output: Path = typer.Option(..., help="The corpus directory to write; must not exist."),
    enable_thinking: bool | None = typer.Option(
        None,
        "--enable-thinking/--disable-thinking",
        help="Chat documents: render them with the chat template's enable_thinking on or off "
        "(Qwen3's, SmolLM3's); corpus.json and the corpus digest record it. By default the "
        "template's own choice.",
        show_default=False,
    ),
    allow_empty: bool = typer.Option(
        False,
        "--allow-empty",
        help="Write an empty corpus for a documents file of no documents (an empty test pool, "
        "splits.test 0) instead of refusing it.",
    ),
) -> None:
    """Write tokens.bin (uint16 tokens), documents.arrow (ids and lengths) and corpus.json."""
    started = time.perf_counter()
    manifest = prepare_corpus(documents, tokenizer, output, enable_thinking, allow_empty)
    seconds = time.perf_counter() - started
    weighted = ""
    if "weighted_targets" in manifest:  # chat documents: the answers' targets are trained on
        weighted = f" ({manifest['weighted_targets']} of them in answers)"
    typer.echo(
        f"wrote {output}: {manifest['documents']} documents, {manifest['tokens']} tokens, "
        f"{manifest['targets']} targets{weighted}, unknown rate {manifest['unknown_rate']:.4%}, "
        f"{manifest['characters'] / max(seconds, 1e-9) / 1e6:.1f} M characters/s, "
        f"digest {manifest['corpus_digest']}"
    )

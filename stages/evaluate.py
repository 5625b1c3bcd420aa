"""`zrodlo model evaluate`: score a model on prepared corpora (the `evaluate` stage)."""

from __future__ import annotations

from pathlib import Path

import typer

from stages import options


def evaluate(
    model: Path = typer.Option(..., help="The model directory or checkpoint to score."),
    corpus: list[Path] = typer.Option(
        ..., help="A prepared corpus to score; give it once per corpus."
    ),
    context: int | None = typer.Option(
        None, help="Tokens per window; the model's positions + 1 if left out."
    ),
    batch_size: int = typer.Option(
        64, help="Windows per forward pass; changes speed, not the score."
    ),
    baseline: Path | None = typer.Option(
        None,
        help="A training corpus whose character bigrams give a baseline score on the same windows.",
    ),
    output: Path | None = typer.Option(
        None, help="Write the scores as JSON to this file (replaced if it exists)."
    ),
    device: str = options.DEVICE_OR_CPU,
    ordinal: int | None = options.ORDINAL,
) -> None:
    """Target-weighted loss (nats), perplexity and bits per character of each corpus."""
    # Imported here, not at the top: `zrodlo --help` and the data stages then start without torch.
    from rich.console import Console
    from rich.table import Table

    from zrodlo.bigram import Bigram
    from zrodlo.checkpoint import read_model
    from zrodlo.corpus import Corpus
    from zrodlo.device import resolve_device
    from zrodlo.digest import json_text
    from zrodlo.evaluate import score
    from zrodlo.model import GPT, parameter_count
    from zrodlo.output import check_replaceable, replace_file
    from zrodlo.refusal import Refusal
    from zrodlo.run import check_data

    if output is not None:
        check_replaceable(output)
    loaded = read_model(model)
    window = context if context is not None else loaded.config.positions + 1
    if batch_size < 1:
        raise Refusal(f"--batch-size is {batch_size}; it must be a whole number of 1 or more")
    opened = [(path, Corpus.open(path)) for path in corpus]
    tables = [check_data(data, loaded, window) for _, data in opened]
    reference = None
    if baseline is not None:
        counted = Corpus.open(baseline)
        check_data(counted, loaded, window)
        reference = Bigram.count(counted.tokens, counted.offsets, loaded.config.vocab_size)
    target = resolve_device(device, ordinal, "f32")
    network = GPT.from_weights(loaded.config, loaded.weights, target, str(model))
    results = {}
    for (path, data), table in zip(opened, tables, strict=True):
        scored = score(network, data.tokens, table, batch_size, target)
        entry = {
            "loss": scored.loss,
            "perplexity": scored.perplexity,
            "bits_per_character": scored.bits_per_character,
            "targets": scored.targets,
            "windows": scored.windows,
            "documents": data.manifest["documents"],
            "unknown_tokens": data.manifest.get("unknown_tokens"),
            "unknown_rate": data.manifest.get("unknown_rate"),
            "corpus_digest": data.digest,
        }
        if reference is not None:
            entry["bigram_loss"] = reference.score(data.tokens, table).loss
        results[path.name if path.name not in results else str(path)] = entry
    report = {
        "model": {
            "path": str(model),
            "parameters": parameter_count(loaded.config),
            "vocab_size": loaded.config.vocab_size,
            "context": window,
            "baseline": None if baseline is None else str(baseline),
        },
        "corpora": results,
    }
    if output is not None:
        replace_file(output, json_text(report))
    table = Table(title=f"{model}: loss in nats per target, context {window}")
    for column in (
        "corpus",
        "loss",
        "perplexity",
        "bits/char",
        "bigram loss",
        "targets",
        "unknown rate",
    ):
        table.add_column(column, justify="left" if column == "corpus" else "right")
    for name, entry in results.items():
        bigram = entry.get("bigram_loss")
        table.add_row(
            name,
            f"{entry['loss']:.4f}",
            f"{entry['perplexity']:.3f}",
            f"{entry['bits_per_character']:.4f}",
            "" if bigram is None else f"{bigram:.4f}",
            f"{entry['targets']:,}",
            f"{entry['unknown_rate']:.3%}",
        )
    Console().print(table)

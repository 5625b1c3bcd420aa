"""`zrodlo model evaluate`: score a model on prepared corpora (the `evaluate` stage)."""

from __future__ import annotations

from pathlib import Path

import typer

from zrodlo.stages import options

EXAMPLE = (
    "Example: zrodlo model evaluate --model run/step-350 --corpus corpus/validation --corpus "
    "corpus/test --baseline corpus/train"
)
# Headers of two lines, so that the table of a corpus named like a pool fits 80 columns.
COLUMNS = (
    "corpus", "loss", "perplexity", "bits per\nchar", "bits per\nbyte", "bigram\nloss", "targets",
    "unknown\nrate",
)  # fmt: skip


def evaluate(
    model: Path = typer.Option(..., help="The model directory or checkpoint to score."),
    corpus: list[Path] = typer.Option(
        (), help="A prepared corpus to score whole; give it once per corpus."
    ),
    context: int | None = typer.Option(
        None, help="Tokens per window; the model's positions + 1 if left out."
    ),
    batch_size: int = typer.Option(
        64, help="Windows per forward pass; changes speed, not the score."
    ),
    baseline: Path | None = typer.Option(
        None,
        help="A training corpus whose token bigrams give a baseline score on the same windows.",
    ),
    output: Path | None = typer.Option(
        None,
        help="Write the scores as JSON to this file, with the model, counts and digests they come "
        "from (replaced if it exists).",
    ),
    device: str = options.DEVICE_OR_CPU,
    ordinal: int | None = options.ORDINAL,
    metrics: Path | None = typer.Option(
        None,
        help="Write each corpus's scores alone (loss, perplexity, bits per character, bigram "
        "loss) as JSON to this file, for dvc metrics (replaced if it exists).",
    ),
    sample_corpus: list[Path] = typer.Option(
        (),
        help="A prepared corpus to score on --sample-windows of its windows, such as a large "
        "training pool; give it once per corpus. Scored before the --corpus ones.",
    ),
    sample_windows: int | None = typer.Option(
        None, help="Windows each --sample-corpus is scored on, drawn from --sample-seed."
    ),
    sample_seed: int = typer.Option(
        1, help="Keys the draw of the sampled windows: the same seed scores the same windows."
    ),
) -> None:
    """Target-weighted loss (nats per token), perplexity, and bits per character and per byte of
    each corpus."""
    # Imported here, not at the top: `zrodlo --help` and the data stages then start without torch.
    from rich.console import Console
    from rich.table import Table

    from zrodlo.evaluation.evaluate import evaluate as score
    from zrodlo.training.display import ScoringDisplay

    with ScoringDisplay() as progress:
        scores = score(
            model, corpus, context, batch_size, baseline, output, device, ordinal, metrics,
            sample_corpus, sample_windows, sample_seed, progress,
        )  # fmt: skip
    table = Table(
        title=f"{model}: loss in nats per target, context {scores['model']['context']}",
        box=None, pad_edge=False, header_style="bold",
    )  # fmt: skip
    for column in COLUMNS:
        table.add_column(column, justify="left" if column == "corpus" else "right", no_wrap=True)
    for name, entry in scores["corpora"].items():
        bigram = entry.get("bigram_loss")
        table.add_row(
            name,
            f"{entry['loss']:.4f}",
            f"{entry['perplexity']:.3f}",
            _shown(entry["bits_per_character"]),
            _shown(entry["bits_per_byte"]),
            _shown(bigram),
            f"{entry['targets']:,}",
            f"{entry['unknown_rate']:.3%}",
        )
    Console().print(table)
    for path in [*sample_corpus, *corpus]:
        if path.name not in scores["corpora"] and str(path) not in scores["corpora"]:
            typer.echo(f"{path} holds no documents, so it is not scored", err=True)


def _shown(value: float | None) -> str:
    return "" if value is None else f"{value:.4f}"

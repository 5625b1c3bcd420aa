"""`zrodlo report`: the markdown report of a run, with its charts."""

from __future__ import annotations

from pathlib import Path

import typer

EXAMPLE = (
    "Example: zrodlo report --run run --metrics reports/evaluation.json --corpora corpus --model "
    "run/step-350 --output reports"
)


def report(
    run: Path = typer.Option(..., help="The run directory whose steps.csv is charted."),
    metrics: Path = typer.Option(
        ...,
        help="The scores written by zrodlo model evaluate --output (with the counts and digests).",
    ),
    corpora: Path = typer.Option(
        ..., help="The directory holding the prepared corpora, one directory per pool."
    ),
    model: Path = typer.Option(
        ..., help="The checkpoint the report is about; the sample is drawn from it."
    ),
    output: Path = typer.Option(
        ...,
        help="The directory report.md and the charts are written into (replacing them); created if missing.",
    ),
    sample_seed: int = typer.Option(
        1, help="Keys the sample's ChaCha20 draws: the same seed gives the same text."
    ),
    sample_prompt: str = typer.Option("", help="The text the sample continues (after BOS)."),
    sample_tokens: int = typer.Option(
        300, help="The most tokens the sample draws; it also ends at EOS."
    ),
    sample_temperature: float = typer.Option(
        0.8, help="Divides the logits; 0 takes the most likely token."
    ),
    timing: Path | None = typer.Option(
        None,
        help="The step times to chart as tokens/s (a run's --timing file); the run directory's "
        "timing.csv if it has one, else no speed chart.",
    ),
) -> None:
    """Write report.md (data, model, training, scores, a sample) and the charts of a run."""
    # Imported here, not at the top: `zrodlo --help` and the data stages then start without torch.
    from zrodlo.evaluation.report import report as report_run

    written = report_run(
        run, metrics, corpora, model, output, sample_seed, sample_prompt, sample_tokens,
        sample_temperature, timing,
    )  # fmt: skip
    typer.echo(f"wrote {', '.join(str(path) for path in written[:-1])} and {written[-1]}")

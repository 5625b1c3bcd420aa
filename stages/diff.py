"""`zrodlo checkpoint diff`: compare two runs step by step and name the first step where they part."""

from __future__ import annotations

import json
from pathlib import Path

import typer

EXAMPLE = "Example: zrodlo checkpoint diff run resumed --output reports/resume.json"


def diff(
    first: Path = typer.Argument(..., help="A run directory (holding ledger.jsonl)."),
    second: Path = typer.Argument(..., help="Another run directory to compare with it."),
    json_output: bool = typer.Option(False, "--json", help="Print the comparison as JSON."),
    output: Path | None = typer.Option(
        None, help="Also write the comparison as JSON to this file (replaced if it exists)."
    ),
) -> None:
    """Compare the ledgers of two runs on the steps both recorded; exit 1 where they part."""
    from zrodlo.evaluation.compare import diff as compare

    comparison = compare(first, second, output)
    if json_output:
        typer.echo(json.dumps(comparison.to_json()))
    elif comparison.first_difference is None:
        typer.echo(f"the runs agree on all {comparison.steps_compared} steps both recorded")
    else:
        typer.echo(
            f"the runs part at step {comparison.first_difference}: {comparison.field} differs"
        )
    if comparison.first_difference is not None:
        raise typer.Exit(1)

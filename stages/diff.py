"""`zrodlo checkpoint diff`: compare two runs step by step and name the first step where they part."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from zrodlo.storage.digest import json_text
from zrodlo.storage.outputs import check_replaceable, replace_file
from zrodlo.storage.refusal import Refusal
from zrodlo.training.records import LEDGER_FILE, compare_ledgers, read_ledger

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
    if output is not None:
        check_replaceable(output)
    ledgers = []
    for run in (first, second):
        if not (run / LEDGER_FILE).is_file():
            raise Refusal(f"{run} holds no {LEDGER_FILE}; only a run directory can be compared")
        ledgers.append(read_ledger(run / LEDGER_FILE))
    comparison = compare_ledgers(*ledgers)
    if output is not None:
        replace_file(output, json_text({"runs": [str(first), str(second)], **comparison.to_json()}))
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

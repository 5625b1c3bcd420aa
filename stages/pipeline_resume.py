"""`zrodlo pipeline resume`: the resume stage, a checkpoint of the run continued (checkpoint resume)
and compared with the run (checkpoint diff), or, where resume.check is false, nothing continued.
One command (`zrodlo --params params.yaml pipeline resume ...`) runs what its params choose and
prints what those print."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from zrodlo.stages import diff, options, resume

EXAMPLE = (
    "Example: zrodlo --params params.yaml pipeline resume --run run --corpus corpus/train "
    "--eval-corpus corpus/validation --output resumed --report reports/resume.json"
)


def pipeline_resume(
    run: Path = typer.Option(..., help="The run directory of the train stage."),
    corpus: Path = typer.Option(..., help="The corpus the run was trained on."),
    output: Path = typer.Option(..., help="The run directory the resumed steps go into."),
    report: Path = typer.Option(..., help="The JSON file the comparison of the runs goes to."),
    steps: int = typer.Option(..., help="The steps the run reaches (train.steps)."),
    before_end: int = typer.Option(
        ..., help="Continue the checkpoint this many steps before the last (resume.before_end)."
    ),
    check: bool = typer.Option(
        True,
        help="Whether to continue a checkpoint at all (resume.check); without, the report says "
        "it checked nothing.",
    ),
    eval_corpus: Path | None = options.EVAL_CORPUS,
    eval_every: int | None = typer.Option(None, help="Steps between held-out scores."),
    eval_windows: int | None = typer.Option(None, help="Held-out windows each score reads."),
    checkpoint_every: int | None = typer.Option(None, help="Steps between checkpoints."),
    device: str = options.DEVICE,
    processes: int = options.PROCESSES,
    timing: Path | None = options.TIMING,
) -> None:
    """The resume check: a checkpoint of --run continued and compared with the run.

    step-<steps - before-end> of --run is continued to --steps into --output (checkpoint resume)
    and compared with the run (checkpoint diff), which it must equal to the bit; with --no-check,
    --output is empty and the report says that nothing was checked."""
    if not check:
        from zrodlo.storage.outputs import check_replaceable, new_directory, replace_file

        check_replaceable(report)
        with new_directory(output):  # empty: no checkpoint was continued
            pass
        replace_file(report, (json.dumps({"checked": False}) + "\n").encode())
        typer.echo(f"continued no checkpoint (resume.check is false); {report} says so")
        return
    writes = {"eval_every": eval_every, "eval_windows": eval_windows,
              "checkpoint_every": checkpoint_every, "keep_checkpoints": None}  # fmt: skip
    checkpoint = run / f"step-{steps - before_end}"
    resume.resume(checkpoint, corpus, output, steps, eval_corpus, device, None, processes, timing,
                  **writes)  # fmt: skip
    diff.diff(run, output, False, report)

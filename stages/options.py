"""The flags `model train` and `checkpoint resume` share, with one help text each (seeds 000, 001)."""

from __future__ import annotations

import typer

EVAL_CORPUS = typer.Option(
    None, help="A prepared held-out corpus scored during the run; needs --eval-every."
)
EVAL_EVERY = typer.Option(
    None, help="Steps between held-out scores, and the last step; needs --eval-corpus."
)
CHECKPOINT_EVERY = typer.Option(
    None, help="Steps between checkpoints written under --output; the last step is always written."
)
KEEP_CHECKPOINTS = typer.Option(
    None,
    help="Keep only the newest this many checkpoints under --output, removing older ones as new "
    "ones are written.",
)
DEVICE = typer.Option(..., help="The device to compute on: cpu, metal or cuda.")
ORDINAL = typer.Option(None, help="The GPU to use; required for metal and cuda.")

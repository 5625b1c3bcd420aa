"""The flags several commands share, with one help text each: those of `model train` and
`checkpoint resume` (seeds 000, 001), and the device flags of evaluate and sample too."""

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
_DEVICE_HELP = "The device to compute on: cpu, metal or cuda."
# A run names its device (seed 001); scoring and sampling default to the CPU.
# Flags with a fixed set of values show it in --help; a value outside it reaches the library,
# which refuses it with the seeds' sentence (a parser's choice would print its own).
_DEVICES = "[cpu|metal|cuda]"
DEVICE = typer.Option(..., metavar=_DEVICES, help=_DEVICE_HELP)
DEVICE_OR_CPU = typer.Option("cpu", metavar=_DEVICES, help=_DEVICE_HELP)
ORDINAL = typer.Option(None, help="The GPU to use; required for metal and cuda.")
PROCESSES = typer.Option(
    1,
    help="Processes that share each step's micro-batches on this machine, started by "
    "torch.distributed's launcher; any number that divides the micro-batches gives the same run.",
)
TIMING = typer.Option(
    None,
    help="The file each step's seconds and tokens/s go to, instead of timing.csv in --output: "
    "wall-clock time kept out of what a pipeline hashes.",
)

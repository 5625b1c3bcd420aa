"""The flags several commands share, with one help text each, and the options a command takes from
a declaration: the fields of `RunPlan` (model train and checkpoint resume, seeds 001 and 000) and
of `ModelConfig` (model init) become options with the help each field declares, so that a field
added there is a flag here and a keyword of the Python API at once."""

from __future__ import annotations

import dataclasses
import inspect
import typing
from collections.abc import Callable, Iterable
from typing import Any

import typer

from zrodlo.model.declared import options_of

EVAL_CORPUS = typer.Option(
    None, help="A prepared held-out corpus scored during the run; needs --eval-every."
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


def declared(
    *declarations: type, only: Iterable[str] | None = None, optional: Iterable[str] = ()
) -> list[inspect.Parameter]:
    """The options of the declarations' fields that are options (those with help), in their
    order, a name declared twice once: `--name-with-dashes`, its type, default, help and metavar;
    a bool is a switch. The fields `optional` default to None, for the library to fill (a
    preset's shape)."""
    types = {name: kind for d in declarations for name, kind in typing.get_type_hints(d).items()}
    fields: dict[str, dataclasses.Field] = {}
    for declaration in declarations:
        for field in options_of(declaration):
            if only is None or field.name in only:
                fields.setdefault(field.name, field)
    options = []
    for field in fields.values():
        meta = field.metadata
        flag = "--" + field.name.replace("_", "-")
        default = ... if field.default is dataclasses.MISSING else field.default
        help = meta["help"]
        if field.name in optional:
            default, help = None, f"{help} By default the --preset's."
        if types[field.name] is bool:
            option = typer.Option(default, flag, metavar="", help=help)
        else:
            option = typer.Option(default, flag, metavar=meta.get("metavar"), help=help)
        kind = inspect.Parameter.KEYWORD_ONLY
        kind_of = types[field.name] if default is not None else types[field.name] | None
        options.append(inspect.Parameter(field.name, kind, default=option, annotation=kind_of))
    return options


def taking(
    options: list[inspect.Parameter], after: str
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Give a command that takes `options` as keywords (**values) the signature typer reads, with
    the options after its own parameter `after`, where --help lists them."""

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(command)
        own = [
            p.replace(kind=inspect.Parameter.KEYWORD_ONLY)
            for p in signature.parameters.values()
            if p.kind is not p.VAR_KEYWORD
        ]
        at = [p.name for p in own].index(after) + 1
        command.__signature__ = signature.replace(parameters=[*own[:at], *options, *own[at:]])
        return command

    return decorate


# The pipeline's stages that import where init.from names a directory (stages/pipeline_*.py).
FROM_MODEL = typer.Option(
    None,
    "--from",
    help="A transformers directory to start from (init.from): its tokenizer and model are "
    "imported, where without it they are fitted and drawn.",
)

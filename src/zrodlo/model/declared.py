"""Options declared once, on the dataclass fields they set: `RunPlan` (model train), `ModelConfig`
and each model family's settings (model init). The command line, the Python API and params.yaml
all follow these declarations, so a field added there is a flag and a keyword at once."""

from __future__ import annotations

import dataclasses
from dataclasses import MISSING
from typing import Any


def option(help: str | None, default: Any = MISSING, metavar: str | None = None) -> Any:
    """A field declared with the help its command-line option shows (None for a field that is no
    option), and for a fixed set of values the metavar that lists them."""
    return dataclasses.field(default=default, metadata={"help": help, "metavar": metavar})


def options_of(declaration: type) -> list[dataclasses.Field]:
    """The fields of a declaration that are options, in its order."""
    return [field for field in dataclasses.fields(declaration) if field.metadata.get("help")]

"""Reading params.yaml: the sections of the pipeline, or a sentence that says why not."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from zrodlo.storage.inputs import read_input
from zrodlo.storage.refusal import Refusal


def read_params(params: Path) -> dict:
    """The sections params.yaml holds, as a dict."""
    try:
        data = yaml.safe_load(read_input(params))
    except OSError as error:
        raise Refusal(f"{params} cannot be read: {error.strerror}") from None
    except yaml.YAMLError as error:
        raise Refusal(f"{params} is not YAML: {' '.join(str(error).split())}") from None
    if not isinstance(data, dict):
        raise Refusal(f"{params} holds {json.dumps(data)[:40]}, not the sections of the pipeline")
    return data


_FLAG = re.compile(r"--([a-z0-9]+(?:-[a-z0-9]+)*)")


def as_params(section: str, check: Any) -> Any:
    """Run a command's own check, its sentence naming the params instead of the flags."""
    try:
        return check()
    except Refusal as refusal:
        raise Refusal(
            _FLAG.sub(lambda m: f"{section}.{m.group(1).replace('-', '_')}", refusal.sentence)
        ) from None
    except (KeyError, TypeError) as error:
        raise Refusal(f"params.yaml section {section} cannot be read: {error}") from None

"""The params that a `dvc exp run` of the docs sets, read from the page as a user copies it, and
the committed params.yaml with changes, written where a test checks them."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def experiment_params(document: str, after: str) -> dict[str, dict]:
    """Each `-S section.key=value` of the first ```sh block of `dvc exp run` after the text `after`
    of docs/`document`, as {section: {key: value}} with the value read as dvc reads it (YAML)."""
    text = (ROOT / "docs" / document).read_text()
    block = re.search(r"```sh\n(dvc exp run .*?)```", text[text.index(after) :], re.S)
    assert block is not None, document
    changes: dict[str, dict] = {}
    for assignment in re.findall(r"-S (\S+)", block.group(1)):
        key, value = assignment.split("=", 1)
        section, name = key.split(".", 1)
        changes.setdefault(section, {})[name] = yaml.safe_load(value)
    return changes


def params_with(tmp_path: Path, **changes: dict) -> Path:
    """The committed params.yaml with each section's `changes`, written in `tmp_path`."""
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    for section, values in changes.items():
        params[section].update(values)
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    return path

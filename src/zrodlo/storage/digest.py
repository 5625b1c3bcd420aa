"""Content digests: sha256 of files, of byte streams and of canonical JSON.

Every mismatch refusal in Zrodlo compares digests recorded here, never file names, so the canonical
forms below are part of the on-disk contract: changing one changes every recorded digest.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from zrodlo.storage.inputs import open_input

_READ_SIZE = 1 << 22


def file_sha256(path: Path) -> str:
    """Hex sha256 of a file's bytes, read in bounded chunks."""
    digest = hashlib.sha256()
    with open_input(path) as handle:
        while chunk := handle.read(_READ_SIZE):
            digest.update(chunk)
    return digest.hexdigest()


def canonical_json(value: Any) -> bytes:
    """The one byte form of a JSON value that digests are taken over: sorted keys, no spaces, ASCII."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def json_sha256(value: Any) -> str:
    """Hex sha256 of a JSON value's canonical form."""
    return hashlib.sha256(canonical_json(value)).hexdigest()


def json_text(value: Any) -> bytes:
    """JSON for people to read (indented, UTF-8), ending in a newline."""
    return (json.dumps(value, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def write_json(path: Path, value: Any) -> None:
    """Write a JSON file for people to read into a directory still being built."""
    path.write_bytes(json_text(value))

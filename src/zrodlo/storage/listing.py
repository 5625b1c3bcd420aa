"""Files read back from a listing of their sha256: every size bounded before a byte is read, each
file read once and hashed, so what the caller loads is exactly what was checked.

A model directory lists its files in model.json, a checkpoint in trainer.json. A safetensors file
states its own size in its header; any other file is small. A file larger than that is refused
before it is read, so a sparse file of many gigabytes cannot exhaust memory.
"""

from __future__ import annotations

from pathlib import Path

from zrodlo.storage import hashed, tensorfile
from zrodlo.storage.inputs import SMALL_FILE
from zrodlo.storage.refusal import Refusal


def read_listed(
    directory: Path, files: dict[str, str], listing: Path, whole: str
) -> dict[str, memoryview]:
    """The bytes of every file `listing` lists under `directory`, each checked against its sha256;
    `whole` names what the files make up ("the checkpoint") in the refusals."""
    for name in files:
        path = directory / name
        if not path.is_file():
            raise Refusal(f"{path} is missing; {listing} lists it as part of {whole}")
        size, bound = path.stat().st_size, tensorfile.stated_size(path)
        largest = SMALL_FILE if bound is None else bound
        if size > largest:  # a shorter file is read and fails its digest
            raise Refusal(
                f"{path} holds {size} bytes, more than the {largest} a file of its kind holds; it "
                f"was altered after {whole} was written"
            )
    read = hashed.read_hashed([directory / name for name in files])
    contents = dict(zip(files, read, strict=True))
    for name, recorded in files.items():
        _, actual = contents[name]
        if actual != recorded:
            raise Refusal(
                f"{directory / name} has sha256 {actual}, and {listing} records {recorded}; the "
                f"file was truncated or altered after {whole} was written"
            )
    return {name: data for name, (data, _) in contents.items()}

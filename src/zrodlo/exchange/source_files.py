"""The files of a transformers directory that `model import` reads, as the hub ships them.

Each is the directory's own: a symbolic link within the directory is followed (a download may lay
its files out as links to blobs beside them), and so is one from a revision of the hub's cache to
that repository's blobs; one that leads anywhere else is refused naming the link, so that an import
reads what the directory holds and nothing else the user can read.

The weights are one model.safetensors or, as larger models ship them, shards that
model.safetensors.index.json places each tensor in ("weight_map": tensor name -> shard file
name; its "metadata" is not read). Only the headers are read here: every shard's, each held
against the index (every tensor in the one shard the index places it in, and nowhere else), so
that nothing is sized or read from a shard before all of them agree. Where a directory holds both,
model.safetensors is read, as transformers reads it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import NamedTuple

import torch

from zrodlo.storage import jsonfile, tensorfile
from zrodlo.storage.inputs import read_input
from zrodlo.storage.refusal import Refusal
from zrodlo.storage.tensorfile import Stored

WEIGHTS = "model.safetensors"
INDEX = f"{WEIGHTS}.index.json"


class Located(NamedTuple):
    """A tensor as a header states it, with its file and where the file's data begins."""

    file: Path
    start: int
    stored: Stored

    @property
    def dtype(self) -> torch.dtype:
        return self.stored.dtype

    @property
    def shape(self) -> list[int]:
        return self.stored.shape


class Weights(NamedTuple):
    """The tensors a directory's weights hold, by transformers' name; `file` is model.safetensors,
    or the index of the shards that hold them."""

    tensors: dict[str, Located]
    file: Path
    sharded: bool

    def holder(self, one: str, many: str) -> str:
        """What holds the tensors with its verb, for a sentence: "<file> holds", "the shards of
        <index> hold"."""
        return f"the shards of {self.file} {many}" if self.sharded else f"{self.file} {one}"


def own_file(source: Path, name: str) -> Path:
    """The file `name` of the directory `source`, refused where it is a symbolic link out of it."""
    path = source / name
    if path.is_symlink():
        target = Path(os.path.realpath(path))
        if not any(target.is_relative_to(place) for place in _own_places(source)):
            raise Refusal(
                f"{path} is a symbolic link to {target}, outside {source}; Zrodlo imports the "
                "files a model directory holds itself"
            )
    return path


def _own_places(source: Path) -> list[Path]:
    """Where the files of `source` may lie: within it, and where it is a revision in the hub's
    cache (<repository>/snapshots/<revision>, each file a link to a blob), in its blobs."""
    real = Path(os.path.realpath(source))
    return [real, real.parent.parent / "blobs"] if real.parent.name == "snapshots" else [real]


def held_weights(source: Path) -> Weights:
    """What the weights of the transformers directory `source` hold, from their headers alone."""
    file = own_file(source, WEIGHTS)
    if file.is_file():
        start, header = _header(file)
        return Weights({name: Located(file, start, s) for name, s in header.items()}, file, False)
    index = own_file(source, INDEX)
    if not index.is_file():
        raise Refusal(f"{source} holds no {WEIGHTS} and no {INDEX}; a model needs its weights")
    placed = _weight_map(source, index)
    tensors: dict[str, Located] = {}
    for shard_name in sorted(set(placed.values())):
        shard = own_file(source, shard_name)
        if not shard.exists():
            raise Refusal(f"{index} names the shard {shard_name}, which {source} does not hold")
        start, header = _header(shard)
        for name, stored in header.items():
            if name in tensors:
                raise Refusal(
                    f"{tensors[name].file} and {shard} both hold tensor {name}; a tensor lies in "
                    "one shard"
                )
            tensors[name] = Located(shard, start, stored)
    for name, shard_name in placed.items():
        if name not in tensors or tensors[name].file != source / shard_name:
            raise Refusal(f"{index} places tensor {name} in {shard_name}, which does not hold it")
    for name, located in tensors.items():
        if name not in placed:
            raise Refusal(f"{located.file} holds tensor {name}, which {index} does not place there")
    return Weights(tensors, index, True)


def _header(file: Path) -> tuple[int, dict[str, Stored]]:
    try:
        return tensorfile.read_header(file)
    except OSError as error:
        raise Refusal(f"{file} does not load as safetensors: {error}") from None


def _weight_map(source: Path, index: Path) -> dict[str, str]:
    """The index's weight_map, each shard it names a file of `source` itself."""
    try:
        stated = jsonfile.loads(read_input(index))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise Refusal(f"{index} does not load as a weights index: {error}") from None
    placed = stated.get("weight_map") if isinstance(stated, dict) else None
    if not isinstance(placed, dict) or not all(isinstance(shard, str) for shard in placed.values()):
        raise Refusal(f"{index} does not map tensor names to shard files in a weight_map object")
    for shard in placed.values():
        # A name that leads elsewhere ("../x", "sub/x", "..", "") or that no path holds (NUL).
        if "/" in shard or ".." in shard or shard in ("", ".") or "\0" in shard:
            raise Refusal(
                f"{index} names the shard {shard!r}; a shard is a file of {source} itself, named "
                "without '/' or '..'"
            )
    return placed

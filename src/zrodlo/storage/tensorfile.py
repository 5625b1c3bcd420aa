"""safetensors files at the speed of the disk: written straight from tensor memory while a second
thread hashes it, read into one buffer while a second thread hashes it, and parsed into tensors that
are views of that buffer.

The bytes written are the ones `safetensors.torch.save` gives. Reading checks everything the
safetensors library checks before it trusts a file (the header's length, JSON, dtypes, shapes, and
offsets that tile the data exactly), with a sentence of Zrodlo's own for each, but copies nothing:
the sha256 is taken over the very bytes the tensors then view, so what is loaded is what was
checked. A header can be read and checked alone (`read_header`), none of its tensors' data read, to
hold a file against what it should hold before its size is trusted.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import struct
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple, NoReturn

import torch

from zrodlo.storage import hashed, jsonfile
from zrodlo.storage.inputs import open_input
from zrodlo.storage.refusal import Refusal

SUFFIX = ".safetensors"
HEADER_LIMIT = 100_000_000  # the longest header the safetensors library accepts
# The most parts one writev takes (IOV_MAX: 1024 on Linux).
_MOST_PARTS = os.sysconf("SC_IOV_MAX")

# How safetensors orders tensors in a file: by dtype, in this order from last to first, then by
# name. Writing in the same order gives the bytes `safetensors.torch.save` gives.
DTYPES = {
    dtype: (name, rank)
    for rank, (dtype, name) in enumerate(
        [
            (torch.bool, "BOOL"),
            (torch.uint8, "U8"),
            (torch.int8, "I8"),
            (torch.float8_e5m2, "F8_E5M2"),
            (torch.float8_e4m3fn, "F8_E4M3"),
            (torch.int16, "I16"),
            (torch.uint16, "U16"),
            (torch.float16, "F16"),
            (torch.bfloat16, "BF16"),
            (torch.int32, "I32"),
            (torch.uint32, "U32"),
            (torch.float32, "F32"),
            (torch.float64, "F64"),
            (torch.int64, "I64"),
            (torch.uint64, "U64"),
        ]
    )
}
_BY_NAME = {name: dtype for dtype, (name, _) in DTYPES.items()}


def write(files: dict[Path, dict[str, torch.Tensor]]) -> dict[Path, str]:
    """Write each file's tensors as safetensors, the bytes `safetensors.torch.save` gives, one
    file after another; return each file's sha256.

    Each tensor's bytes go to the file straight from its memory, with no copy of the whole, a
    chunk at a time, while a second thread hashes the chunk just written (both release the GIL).
    The files share that thread, so the next file is written while the last one's hash catches
    up, and the files are synced once all are written, while the hash is still running: by the
    time it is done the disk has everything, and syncing the directory (`outputs.new_directory`
    does) waits for nothing. Every few MiB the disk is asked to start on what has piled up. A
    full disk is an OSError naming the file.
    """
    digests = {path: hashlib.sha256() for path in files}
    with contextlib.ExitStack() as open_files:
        hashing = open_files.enter_context(ThreadPoolExecutor(max_workers=1))
        pending, handles = [], []
        for path, tensors in files.items():
            handle = open_files.enter_context(open(path, "wb", buffering=0))
            handles.append(handle)
            written, started = 0, 0
            for chunk in _chunks(tensors):
                pending.append(hashing.submit(hashed.update, digests[path], chunk))
                written += hashed.write_all(handle, chunk)
                if written - started >= hashed.WRITEBACK:
                    hashed.start_writeback(handle.fileno(), started, written - started)
                    started = written
        for handle in handles:
            os.fsync(handle.fileno())
        for done in pending:
            done.result()
    return {path: digest.hexdigest() for path, digest in digests.items()}


def _chunks(tensors: dict[str, torch.Tensor]) -> list[list[memoryview]]:
    """A safetensors file's bytes, in order, in chunks of about `hashed.CHUNK` bytes: the header, then
    views of the tensors' own memory, a large tensor cut in pieces and small ones gathered, so
    that a chunk is one system call and one hash call however many tensors it holds."""
    tensors = {name: t.detach().contiguous().cpu() for name, t in tensors.items()}
    order = sorted(tensors, key=lambda name: (-DTYPES[tensors[name].dtype][1], name))
    header, offset = {}, 0
    for name in order:
        tensor = tensors[name]
        size = tensor.numel() * tensor.element_size()
        header[name] = {
            "dtype": DTYPES[tensor.dtype][0],
            "shape": list(tensor.shape),
            "data_offsets": [offset, offset + size],
        }
        offset += size
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode()
    text += b" " * (-len(text) % 8)  # the data starts on a multiple of 8 bytes
    pieces = [memoryview(struct.pack("<Q", len(text)) + text)]
    pieces += [tensors[name].reshape(-1).view(torch.uint8).numpy().data for name in order]
    chunks, gathered, size = [], [], 0
    for piece in pieces:
        for at in range(0, len(piece), hashed.CHUNK):
            part = piece[at : at + hashed.CHUNK]
            if gathered and (size + len(part) > hashed.CHUNK or len(gathered) == _MOST_PARTS):
                chunks.append(gathered)
                gathered, size = [], 0
            gathered.append(part)
            size += len(part)
    return [*chunks, gathered] if gathered else chunks


def stated_size(path: Path) -> int | None:
    """The size a safetensors file states in its header: 8 bytes of header length, the header,
    and its tensors' data up to the largest end offset. None for a file of another kind, or one
    whose header does not parse (it is small enough to read, or refused by its size)."""
    if path.suffix != SUFFIX:
        return None
    with open_input(path) as handle:
        head = handle.read(8)
        if len(head) < 8:
            return None
        (length,) = struct.unpack("<Q", head)
        if length > HEADER_LIMIT:
            return None
        try:
            header = jsonfile.loads(handle.read(length))
            ends = [
                int(entry["data_offsets"][1])
                for key, entry in header.items()
                if key != "__metadata__"
            ]
        except (ValueError, TypeError, KeyError, IndexError, AttributeError):
            return None
    return 8 + length + max(ends, default=0)


class Stored(NamedTuple):
    """A tensor as a safetensors header states it: its dtype, its shape, and where its data lies,
    in bytes from the start of the file's data."""

    dtype: torch.dtype
    shape: list[int]
    begin: int
    stop: int


def read_header(path: Path) -> tuple[int, dict[str, Stored]]:
    """Where a safetensors file's data begins and the tensors it holds, in the order of their data,
    from its header alone, checked as `parse` checks them; none of their data is read, so a file
    may be held against what it should hold before its size is trusted."""
    with open_input(path) as handle:
        size = os.fstat(handle.fileno()).st_size
        length = _header_length(path, handle.read(8), size)
        text = handle.read(length)
    if len(text) < length:  # the file shrank while it was read
        _refuse(path, f"its header would be {length} bytes, and only {len(text)} follow")
    return 8 + length, _layout(path, text, size - 8 - length)


def parse(path: Path, data: memoryview) -> dict[str, torch.Tensor]:
    """The tensors of safetensors bytes, each a view of `data` (a copy only where a tensor's
    offset is not a multiple of its element size); a file that is no safetensors is refused with
    what is wrong with it."""
    length = _header_length(path, data[:8], len(data))
    stored = _layout(path, data[8 : 8 + length], len(data) - 8 - length)
    body = torch.frombuffer(data, dtype=torch.uint8)[8 + length :]  # data holds 8 bytes or more
    tensors = {}
    for name, (dtype, shape, begin, stop) in stored.items():
        raw = body[begin:stop]
        if raw.storage_offset() % dtype.itemsize:  # a view starts on its element size
            raw = raw.clone()
        tensors[name] = raw.view(dtype).reshape(shape)
    return tensors


def _header_length(path: Path, first: bytes | memoryview, size: int) -> int:
    """The header's length that a file of `size` bytes states in its `first` 8, checked."""
    if size < 8:
        _refuse(path, f"it holds {size} bytes, fewer than the 8 that state its header's size")
    (length,) = struct.unpack("<Q", first)
    if length > HEADER_LIMIT:
        _refuse(path, f"its header would be {length} bytes, more than the {HEADER_LIMIT} allowed")
    if 8 + length > size:
        _refuse(path, f"its header would be {length} bytes, and only {size - 8} follow")
    return length


def _layout(path: Path, text: bytes | memoryview, body: int) -> dict[str, Stored]:
    """The tensors a header's `text` states, in the order of their data, checked to tile the
    `body` bytes of data that follow it exactly."""
    try:
        header = jsonfile.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        _refuse(path, f"its header is not JSON: {error}")
    if not isinstance(header, dict):
        _refuse(path, "its header is not a JSON object of tensors")
    metadata = header.pop("__metadata__", {})
    if not isinstance(metadata, dict) or not all(
        isinstance(value, str) for value in metadata.values()
    ):
        _refuse(path, "its __metadata__ is not an object of strings")
    spans = sorted(_span(path, name, entry) for name, entry in header.items())
    stored, end = {}, 0
    for begin, stop, name, dtype, shape in spans:
        if begin != end:
            _refuse(
                path,
                f"the data of tensor {name!r} begins at byte {begin}, where the tensor before it "
                f"ends at byte {end}; a tensor's data follows the one before it",
            )
        if stop > body:
            _refuse(
                path,
                f"the data of tensor {name!r} ends at byte {stop}, and the file holds "
                f"{body} bytes of data",
            )
        stored[name] = Stored(dtype, shape, begin, stop)
        end = stop
    if end != body:
        _refuse(
            path, f"its tensors' data ends at byte {end}, and the file holds {body} bytes of data"
        )
    return stored


def _span(path: Path, name: str, entry: object) -> tuple[int, int, str, torch.dtype, list[int]]:
    """Where a header entry's data lies, its name, dtype and shape, each checked."""
    if not (isinstance(entry, dict) and {"dtype", "shape", "data_offsets"} <= set(entry)):
        _refuse(path, f"tensor {name!r} does not state its dtype, shape and data_offsets")
    dtype = _BY_NAME.get(entry["dtype"]) if isinstance(entry["dtype"], str) else None
    if dtype is None:
        _refuse(path, f"tensor {name!r} has dtype {entry['dtype']!r}, not one this build reads")
    shape, offsets = entry["shape"], entry["data_offsets"]
    if not (isinstance(shape, list) and all(_is_count(size) for size in shape)):
        _refuse(path, f"tensor {name!r} has shape {shape!r}, not a list of sizes")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(map(_is_count, offsets))):
        _refuse(path, f"tensor {name!r} has data_offsets {offsets!r}, not a begin and an end")
    begin, stop = offsets
    size = math.prod(shape) * dtype.itemsize
    if stop - begin != size:
        _refuse(
            path,
            f"tensor {name!r} of shape {shape} and dtype {entry['dtype']} takes {size} bytes, "
            f"and its data_offsets {offsets} give {stop - begin}",
        )
    return begin, stop, name, dtype, shape


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _refuse(path: Path, reason: str) -> NoReturn:
    raise Refusal(f"{path} does not load as safetensors: {reason}")

"""safetensors files: written straight from tensor memory as the very bytes of the safetensors
library's own `save`, read back hashed in chunks, and parsed into views of the checked buffer that
refuse whatever the library refuses."""

from __future__ import annotations

import hashlib
import json
import os
import struct

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from safetensors import SafetensorError
from safetensors.torch import load, save

from zrodlo.storage import hashed, tensorfile
from zrodlo.storage.refusal import Refusal

DTYPES = sorted(tensorfile.DTYPES, key=str)
tensors = st.dictionaries(
    st.text("abcxyz._0123", min_size=1, max_size=12),
    st.tuples(st.sampled_from(DTYPES), st.lists(st.integers(0, 4), max_size=3)),
    max_size=8,
)


def random_tensors(specs: dict, seed: int) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    values = {}
    for name, (dtype, shape) in specs.items():
        raw = torch.randint(0, 256, (int(torch.tensor(shape).prod()) * dtype.itemsize,),
                            generator=generator, dtype=torch.uint8)  # fmt: skip
        values[name] = raw.view(dtype).reshape(shape)
    return values


def taking_at_most(most: int):
    """os.writev as the system may do it: writing only the first `most` bytes it is given."""
    real = os.writev

    def writev(fd: int, parts: list) -> int:
        kept, room = [], most
        for part in parts:
            if room == 0:
                break
            kept.append(memoryview(part)[:room])
            room -= len(kept[-1])
        return real(fd, kept)

    return writev


def read(path) -> tuple[memoryview, str]:
    return hashed.read_hashed([path])[0]


def same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal dtype, shape and bytes (NaN payloads included)."""
    return (a.dtype, a.shape) == (b.dtype, b.shape) and torch.equal(
        a.reshape(-1).view(torch.uint8), b.reshape(-1).view(torch.uint8)
    )


@settings(max_examples=60, deadline=None)
@given(
    specs=st.lists(tensors, min_size=1, max_size=3),
    seed=st.integers(0, 2**31),
    chunk=st.integers(1, 300),
    parts=st.integers(1, 4),
    writeback=st.integers(1, 1000),
    most=st.integers(1, 500),
)
def test_written_tensors_are_the_bytes_safetensors_writes(
    tmp_path_factory, specs, seed, chunk, parts, writeback, most
):
    """Files written in one pass, each with the bytes and digest of its own tensors, whatever
    part of its parts each system call takes."""
    directory = tmp_path_factory.mktemp("written")
    files = {
        directory / f"{index}.safetensors": random_tensors(each, seed + index)
        for index, each in enumerate(specs)
    }
    with pytest.MonkeyPatch.context() as patch:
        # Many chunks, some across tensors' edges, some gathering several tensors up to a few
        # parts, and many requests to start the writeback.
        patch.setattr(hashed, "CHUNK", chunk)
        patch.setattr(tensorfile, "_MOST_PARTS", parts)
        patch.setattr(hashed, "WRITEBACK", writeback)
        patch.setattr(os, "writev", taking_at_most(most))
        digests = tensorfile.write(files)
    assert list(digests) == list(files)
    for path, values in files.items():
        expected = save(values)
        assert path.read_bytes() == expected
        assert digests[path] == hashlib.sha256(expected).hexdigest()


def test_a_tensor_that_is_a_view_is_written_as_its_own_values(tmp_path):
    base = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    values = {
        "transposed": base.T,
        "row": base[1],
        "requires_grad": torch.ones(2, requires_grad=True),
    }
    tensorfile.write({tmp_path / "t.safetensors": values})
    assert (tmp_path / "t.safetensors").read_bytes() == save(
        {name: value.detach().contiguous() for name, value in values.items()}
    )


@settings(max_examples=60, deadline=None)
@given(specs=tensors, seed=st.integers(0, 2**31), chunk=st.integers(1, 300))
def test_a_file_read_back_gives_its_tensors_as_views_of_the_hashed_bytes(
    tmp_path_factory, specs, seed, chunk
):
    values = random_tensors(specs, seed)
    path = tmp_path_factory.mktemp("read") / "tensors.safetensors"
    path.write_bytes(save(values))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(hashed, "CHUNK", chunk)  # many chunks: the read and the hash interleave
        data, digest = read(path)
    assert bytes(data) == path.read_bytes()
    assert digest == hashlib.sha256(path.read_bytes()).hexdigest()
    parsed = tensorfile.parse(path, data)
    assert sorted(parsed) == sorted(values)
    assert all(same(parsed[name], values[name]) for name in values)
    start = np.frombuffer(data, dtype=np.uint8).ctypes.data
    for tensor in parsed.values():  # no copy: each tensor lies inside the buffer read
        assert tensor.numel() == 0 or start <= tensor.data_ptr() < start + len(data)


def test_a_tensor_off_its_alignment_is_read_as_its_values(tmp_path):
    """Another writer may pad its header to any length; such a tensor is copied, not refused."""
    values = {"a": torch.arange(5, dtype=torch.uint8), "b": torch.arange(3, dtype=torch.float32)}
    data = save(values)
    length = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8 : 8 + length])
    text = json.dumps(header).encode() + b"   "
    assert len(text) % 4  # the float tensor's data begins off a multiple of 4 in the file
    path = tmp_path / "odd.safetensors"
    path.write_bytes(struct.pack("<Q", len(text)) + text + data[8 + length :])
    parsed = tensorfile.parse(path, read(path)[0])
    assert load(path.read_bytes()).keys() == parsed.keys()
    assert all(same(parsed[name], values[name]) for name in values)


def mutated(data: bytes, choice: st.DataObject) -> bytes:
    """safetensors bytes with one thing changed: a header field, the header length, or the size."""
    length = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8 : 8 + length])
    body = data[8 + length :]
    kind = choice.draw(st.sampled_from(["dtype", "shape", "offsets", "length", "size", "text"]))
    names = [name for name in header if name != "__metadata__"]
    if kind in ("dtype", "shape", "offsets") and names:
        entry = header[choice.draw(st.sampled_from(names))]
        if kind == "dtype":
            entry["dtype"] = choice.draw(st.sampled_from(["F16", "F64", "U8", "BOOL", "X", 3]))
        elif kind == "shape":
            entry["shape"] = choice.draw(st.sampled_from([[], [0], [2], [2**40], [-1], "2"]))
        else:
            low, high = entry["data_offsets"]
            entry["data_offsets"] = choice.draw(
                st.sampled_from([[high, low], [low, high + 4], [0, 0], [low, 2**62], [low]])
            )
    text = json.dumps(header).encode()
    if kind == "text":
        text = choice.draw(st.sampled_from([b" " + text, b"[]", text[:-1], b"\xff" + text]))
    text += b" " * (-len(text) % 8)
    stated = len(text)
    if kind == "length":
        stated = choice.draw(st.sampled_from([0, stated - 1, stated + 8, 2**40]))
    whole = struct.pack("<Q", stated) + text + body
    if kind == "size":
        whole = whole[: choice.draw(st.integers(0, len(whole)))] + choice.draw(
            st.sampled_from([b"", b"\0" * 4])
        )
    return whole


@settings(max_examples=300, deadline=None)
@given(specs=tensors, seed=st.integers(0, 2**31), choice=st.data())
def test_a_changed_file_is_refused_exactly_when_safetensors_refuses_it(
    tmp_path_factory, specs, seed, choice
):
    data = mutated(save(random_tensors(specs, seed)), choice)
    path = tmp_path_factory.mktemp("changed") / "tensors.safetensors"
    path.write_bytes(data)
    try:
        expected = load(data)
    except SafetensorError:
        expected = None
    try:
        parsed = tensorfile.parse(path, read(path)[0])
    except Refusal as refusal:
        assert expected is None, str(refusal)
        assert str(refusal).startswith(f"{path} does not load as safetensors: ")
        # The header alone is refused with the same sentence, its data unread.
        with pytest.raises(Refusal) as header_refused:
            tensorfile.read_header(path)
        assert header_refused.value.sentence == refusal.sentence
    else:
        assert expected is not None
        assert sorted(parsed) == sorted(expected)
        assert all(same(parsed[name], expected[name]) for name in expected)
        start, stored = tensorfile.read_header(path)
        assert {name: (s.dtype, list(s.shape)) for name, s in stored.items()} == {
            name: (t.dtype, list(t.shape)) for name, t in parsed.items()
        }
        assert all(
            data[start + s.begin : start + s.stop]
            == parsed[name].reshape(-1).view(torch.uint8).numpy().tobytes()
            for name, s in stored.items()
        )

"""Safetensors written by Zrodlo straight from tensor memory: the same bytes as the safetensors
library's own `save`, whatever the names, shapes and dtypes, and the sha256 of those bytes."""

from __future__ import annotations

import hashlib

import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from safetensors.torch import save

from zrodlo.checkpoint import _SAFETENSORS_DTYPES, write_tensors

DTYPES = sorted(_SAFETENSORS_DTYPES, key=str)
tensors = st.dictionaries(
    st.text("abcxyz._0123", min_size=1, max_size=12),
    st.tuples(st.sampled_from(DTYPES), st.lists(st.integers(0, 4), max_size=3)),
    max_size=8,
)


@settings(max_examples=60, deadline=None)
@given(specs=tensors, seed=st.integers(0, 2**31))
def test_written_tensors_are_the_bytes_safetensors_writes(tmp_path_factory, specs, seed):
    generator = torch.Generator().manual_seed(seed)
    values = {}
    for name, (dtype, shape) in specs.items():
        raw = torch.randint(0, 256, (int(torch.tensor(shape).prod()) * dtype.itemsize,),
                            generator=generator, dtype=torch.uint8)  # fmt: skip
        values[name] = raw.view(dtype).reshape(shape)
    path = tmp_path_factory.mktemp("written") / "tensors.safetensors"
    digest = write_tensors(path, values)
    expected = save(values)
    assert path.read_bytes() == expected
    assert digest == hashlib.sha256(expected).hexdigest()


def test_a_tensor_that_is_a_view_is_written_as_its_own_values(tmp_path):
    base = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    values = {
        "transposed": base.T,
        "row": base[1],
        "requires_grad": torch.ones(2, requires_grad=True),
    }
    write_tensors(tmp_path / "t.safetensors", values)
    assert (tmp_path / "t.safetensors").read_bytes() == save(
        {name: value.detach().contiguous() for name, value in values.items()}
    )

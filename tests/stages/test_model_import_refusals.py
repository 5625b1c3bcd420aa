"""`zrodlo model import` of a weights file that disagrees with its config.json, by the real command:
the file's header is held against the configuration before anything the configuration sizes is
built or any weight is read, each refusal one sentence naming the file and the field or tensor;
and the weights alone are read, so a process whose address space is limited (`ulimit -v`) reads a
model beside gigabytes it does not need, and is told in a sentence when the model itself is more.
"""

from __future__ import annotations

import json
import os
import resource
import struct
import subprocess
from pathlib import Path

import pytest
import torch
from conftest import ZRODLO
from safetensors.torch import save_file
from transformers_models import loaded, saved

from zrodlo.training.checkpoint import read_model

# In `make test`, not `make check`: transformers models.
pytestmark = pytest.mark.slow

transformers = pytest.importorskip("transformers")

# The address space the command runs in: about twice what an import of a small model maps, and
# less than the gigabytes the configurations and headers below claim.
ADDRESS_SPACE = 2 << 30


def edit_config(source: Path, **values: object) -> Path:
    file = source / "config.json"
    file.write_text(json.dumps({**json.loads(file.read_text()), **values}))
    return file


def write_weights(
    path: Path, tensors: dict[str, torch.Tensor], holes: dict[str, list[int]]
) -> None:
    """A safetensors file of the float32 `tensors`, then of float32 tensors of the shapes `holes`
    whose data is a hole of a sparse file: a header that states gigabytes on a few kilobytes."""
    header, data, offset = {}, [], 0
    stated = {name: (list(t.shape), t.numpy().tobytes()) for name, t in tensors.items()}
    stated |= {name: (shape, None) for name, shape in holes.items()}
    for name, (shape, raw) in stated.items():
        size = 4 * int(torch.tensor(shape).prod())
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + size]}
        data += [raw] if raw is not None else []
        offset += size
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(data))
    os.truncate(path, 8 + len(text) + offset)


def run_in_limited_memory(*args: object, cwd: Path) -> tuple[int, str, str]:
    """The real command in a process of ADDRESS_SPACE bytes: where it maps or allocates what the
    configuration claims, it fails at the limit instead of taking the machine's memory."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))

    environment = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb"}
    completed = subprocess.run(
        [str(ZRODLO), *(str(arg) for arg in args)], cwd=cwd, capture_output=True, text=True,
        env=environment, preexec_fn=limit, timeout=300, check=False,
    )  # fmt: skip
    return completed.returncode, completed.stdout, completed.stderr


def assert_refused_in_limited_memory(root: Path, source: Path, sentence: str, snapshot) -> None:
    before = snapshot(root)
    returncode, stdout, stderr = run_in_limited_memory(
        "model", "import", "--from", source, "--output", root / "model", cwd=root
    )
    assert (returncode, stdout, stderr[-2000:]) == (1, "", f"Error: {sentence}\n")
    assert snapshot(root) == before


@pytest.mark.parametrize(
    ("values", "refusal"),
    [
        # A million layers of names would take gigabytes: the header refuses them first.
        ({"n_layer": 1_000_000, "n_embd": 2, "n_head": 1},
         "config.json states n_layer 1000000, and {weights} holds tensors of 2 layers"),
        # 1,000,000 positions of width 32 and the file model's 36,992 other parameters (its head
        # tied to its token embedding); the file holds those and its own 32 positions, 38,016.
        ({"n_positions": 1_000_000},
         "config.json states a model of 32,036,992 parameters, and {weights} holds values for "
         "38,016 of them"),
    ],
)  # fmt: skip
def test_a_config_json_larger_than_its_weights_file_is_refused_before_it_is_built(
    tmp_path, snapshot, values, refusal
):
    source = saved(tmp_path, "gpt2")
    edit_config(source, **values)
    weights = source / "model.safetensors"
    sentence = f"{source}/" + refusal.format(weights=weights)
    assert_refused_in_limited_memory(tmp_path, source, sentence, snapshot)


@pytest.mark.parametrize(
    ("kind", "name", "change", "refusal"),
    [
        ("gpt2", "transformer.h.0.attn.c_attn.weight", lambda t: t.reshape(32, 96, 1),
         "with shape [32, 96, 1], but {config} needs [32, 96]"),
        # Wider than q_proj, and more rows than the key heads have: named, not joined.
        ("llama", "model.layers.1.self_attn.k_proj.weight", lambda t: torch.zeros(16, 64),
         "with shape [16, 64], but {config} needs [16, 32]"),
        ("llama", "model.layers.0.self_attn.v_proj.weight", lambda t: torch.zeros(32, 32),
         "with shape [32, 32], but {config} needs [16, 32]"),
        ("llama", "model.norm.weight", lambda t: t.to(torch.int32),
         "as I32; Zrodlo reads weights stored as F32, BF16 or F16"),
    ],
)  # fmt: skip
def test_a_tensor_that_disagrees_with_config_json_is_refused_naming_it(
    tmp_path, assert_refused, kind, name, change, refusal
):
    source = saved(tmp_path, kind)
    weights = loaded(source / "model.safetensors")
    save_file({**weights, name: change(weights[name])}, source / "model.safetensors")
    assert_refused(
        "model", "import", "--from", source, "--output", tmp_path / "model",
        sentence=f"{source / 'model.safetensors'} holds {name} "
        + refusal.format(config=source / "config.json"),
    )  # fmt: skip


def test_a_tensor_the_model_does_not_read_is_refused_naming_it_and_never_mapped(tmp_path, snapshot):
    """A tensor of 4 GiB beside the model's own, which transformers would drop without a word, is
    refused naming it, from the header alone: an address space of 2 GiB suffices."""
    source = saved(tmp_path, "gpt2")
    weights = loaded(source / "model.safetensors")
    write_weights(source / "model.safetensors", weights, {"unused": [1024, 1024, 1024]})
    sentence = (
        f"{source / 'model.safetensors'} holds tensor unused, which a gpt2 model of this "
        "configuration does not read; Zrodlo imports a checkpoint whose every tensor it reads"
    )
    assert_refused_in_limited_memory(tmp_path, source, sentence, snapshot)


@pytest.mark.parametrize(
    ("kind", "extra", "refusal"),
    [
        # Qwen3's norms of the queries and keys, in a Llama: a part Llama does not compute.
        ("llama", {"model.layers.0.self_attn.q_norm.weight": torch.ones(8),
                   "model.layers.0.self_attn.k_norm.weight": torch.ones(8)},
         "tensor model.layers.0.self_attn.k_norm.weight (and 1 more), which a llama model"),
        # A classifier's head beside the LM head, as a sequence classification model saves it.
        ("gpt2", {"score.weight": torch.zeros(2, 32)},
         "tensor score.weight, which a gpt2 model"),
    ],
)  # fmt: skip
def test_a_part_the_family_does_not_compute_is_refused_naming_it(
    tmp_path, assert_refused, kind, extra, refusal
):
    source = saved(tmp_path, kind)
    weights = loaded(source / "model.safetensors")
    save_file({**weights, **extra}, source / "model.safetensors")
    assert_refused(
        "model", "import", "--from", source, "--output", tmp_path / "model",
        sentence=f"{source / 'model.safetensors'} holds {refusal} of this configuration does "
        "not read; Zrodlo imports a checkpoint whose every tensor it reads",
    )  # fmt: skip


def test_the_buffers_transformers_computes_itself_are_passed_over(tmp_path, run_zrodlo):
    """Rotary inverse frequencies, as older Llama checkpoints saved them in every layer."""
    source = saved(tmp_path, "llama")
    weights = loaded(source / "model.safetensors")
    buffers = {f"model.layers.{i}.self_attn.rotary_emb.inv_freq": torch.ones(4) for i in (0, 1)}
    save_file({**weights, **buffers}, source / "model.safetensors")
    returncode, _, stderr = run_zrodlo(
        "model", "import", "--from", source, "--output", tmp_path / "model", cwd=tmp_path
    )
    assert (returncode, stderr) == (0, "")
    held = read_model(tmp_path / "model").weights["blocks.1.attention.out.weight"]
    assert torch.equal(held, weights["model.layers.1.self_attn.o_proj.weight"])


def test_weights_beyond_the_memory_a_process_may_take_are_refused(tmp_path, snapshot):
    """A tied embedding of 10,485,760 tokens takes 1.25 GiB as float32, more than an address
    space of 2 GiB leaves the process."""
    source = saved(tmp_path, "llama", tie_word_embeddings=True)
    edit_config(source, vocab_size=10_485_760)
    weights = loaded(source / "model.safetensors")
    weights.pop("model.embed_tokens.weight")  # the one tensor the vocabulary sizes
    holes = {"model.embed_tokens.weight": [10_485_760, 32]}
    write_weights(source / "model.safetensors", weights, holes)
    sentence = (
        f"{source / 'model.safetensors'} holds the 335,559,840 weights of the model, 1.25 GiB as "
        "float32, more than this process can take into memory"
    )
    assert_refused_in_limited_memory(tmp_path, source, sentence, snapshot)

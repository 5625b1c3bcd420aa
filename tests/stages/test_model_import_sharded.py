"""`zrodlo model import` of transformers directories as the hub ships them, by the real command:
weights sharded over several files that model.safetensors.index.json names, and GPT-2's base model
names (no "transformer." prefix, no head, extra attention buffers), each computing transformers'
own logits; a shard that disagrees with its index or with config.json refused in one sentence
naming the file, before anything config.json sizes is built."""

from __future__ import annotations

import json
import os
import resource
import subprocess
from pathlib import Path

import pytest
import torch
from conftest import ZRODLO
from safetensors.torch import save_file
from transformers_models import loaded, saved

from zrodlo.model.decoder import build_decoder
from zrodlo.training.checkpoint import read_model

# In `make test`, not `make check`: transformers models.
pytestmark = pytest.mark.slow

transformers = pytest.importorskip("transformers")

IDS = torch.tensor([[0, 5, 17, 80, 200, 33, 2, 9, 150, 64]])  # (1, 10)
INDEX = "model.safetensors.index.json"
# Less than the smallest model below (about 200 kB as float32): several shards.
SHARD_SIZE = "50KB"
ADDRESS_SPACE = 2 << 30  # less than the gigabytes the configurations below claim


def sharded(root: Path, kind: str, **settings: object) -> Path:
    """A small transformers model of `kind` saved with a tokenizer, its weights in shards."""
    return saved(root, kind, SHARD_SIZE, **settings)


def weight_map(source: Path) -> dict[str, str]:
    return json.loads((source / INDEX).read_text())["weight_map"]


def rewrite(path: Path, tensors: dict[str, torch.Tensor]) -> None:
    save_file(tensors, path, metadata={"format": "pt"})


def logits_of(directory: Path) -> torch.Tensor:
    model = transformers.AutoModelForCausalLM.from_pretrained(directory, local_files_only=True)
    with torch.no_grad():
        return model.eval()(IDS).logits  # (1, 10, vocab)


def assert_imported_as_transformers_reads_it(source: Path, root: Path, run_zrodlo) -> None:
    returncode, _, stderr = run_zrodlo(
        "model", "import", "--from", source, "--output", "model", cwd=root
    )
    assert (returncode, stderr) == (0, ""), stderr
    loaded_model = read_model(root / "model")
    with torch.no_grad():
        ours = build_decoder(loaded_model.config, loaded_model.weights).eval()(IDS)
    torch.testing.assert_close(ours, logits_of(source), rtol=0, atol=1e-5)


@pytest.mark.parametrize("kind", ["gpt2", "llama"])
def test_sharded_weights_import_as_transformers_reads_them(kind, tmp_path, run_zrodlo):
    source = sharded(tmp_path, kind)
    assert not (source / "model.safetensors").exists()
    assert len(set(weight_map(source).values())) > 2
    assert_imported_as_transformers_reads_it(source, tmp_path, run_zrodlo)


def test_gpt2_as_the_hub_keeps_it_imports_as_transformers_reads_it(tmp_path, run_zrodlo):
    """The hub's GPT-2 holds its base model's names without "transformer.", no head (it is tied)
    and the attention's mask buffers, which nothing reads."""
    source = saved(tmp_path, "gpt2")
    file = source / "model.safetensors"
    weights = loaded(file)
    weights.pop("lm_head.weight", None)
    hub = {name.removeprefix("transformer."): tensor for name, tensor in weights.items()}
    assert len(hub) == len(weights) and "wte.weight" in hub
    for layer in range(2):
        hub[f"h.{layer}.attn.bias"] = torch.ones(32, 32).tril().view(1, 1, 32, 32)
        hub[f"h.{layer}.attn.masked_bias"] = torch.tensor(-1e4)
    rewrite(file, hub)
    assert_imported_as_transformers_reads_it(source, tmp_path, run_zrodlo)


def shard_of(source: Path, name: str) -> Path:
    return source / weight_map(source)[name]


def other_shard(source: Path, name: str) -> Path:
    """A shard that does not hold `name`."""
    held = weight_map(source)[name]
    return source / min(shard for shard in weight_map(source).values() if shard != held)


def test_two_shards_holding_one_tensor_are_refused(tmp_path, assert_refused):
    source = sharded(tmp_path, "gpt2")
    name = "transformer.ln_f.weight"
    holder, other = shard_of(source, name), other_shard(source, name)
    rewrite(other, {**loaded(other), name: loaded(holder)[name]})
    first, second = sorted([holder, other])
    assert_refused(
        "model", "import", "--from", source, "--output", tmp_path / "model",
        sentence=f"{first} and {second} both hold tensor {name}; a tensor lies in one shard",
    )  # fmt: skip


def test_an_index_naming_a_missing_shard_is_refused(tmp_path, assert_refused):
    source = sharded(tmp_path, "llama")
    shard = shard_of(source, "model.norm.weight")
    shard.unlink()
    assert_refused(
        "model", "import", "--from", source, "--output", tmp_path / "model",
        sentence=f"{source / INDEX} names the shard {shard.name}, which {source} does not hold",
    )  # fmt: skip


@pytest.mark.parametrize("moved", [True, False])
def test_an_index_that_disagrees_with_its_shards_is_refused(tmp_path, assert_refused, moved):
    """A tensor the index places in a shard that does not hold it, or leaves out."""
    source = sharded(tmp_path, "gpt2")
    name, index = "transformer.h.1.ln_2.bias", source / INDEX
    holder, other = shard_of(source, name), other_shard(source, name)
    stated = json.loads(index.read_text())
    if moved:
        stated["weight_map"][name] = other.name
        sentence = f"{index} places tensor {name} in {other.name}, which does not hold it"
    else:
        del stated["weight_map"][name]
        sentence = f"{holder} holds tensor {name}, which {index} does not place there"
    index.write_text(json.dumps(stated))
    assert_refused(
        "model", "import", "--from", source, "--output", tmp_path / "model", sentence=sentence
    )


@pytest.mark.parametrize(
    ("name", "change", "refusal"),
    [
        ("transformer.h.0.attn.c_attn.weight", lambda t: t.reshape(32, 96, 1),
         "with shape [32, 96, 1], but {config} needs [32, 96]"),
        ("transformer.h.1.mlp.c_fc.bias", lambda t: t.to(torch.float64),
         "as F64; Zrodlo reads weights stored as F32, BF16 or F16"),
    ],
)  # fmt: skip
def test_a_shard_tensor_that_disagrees_with_config_json_is_refused_naming_the_shard(
    tmp_path, assert_refused, name, change, refusal
):
    source = sharded(tmp_path, "gpt2")
    shard = shard_of(source, name)
    tensors = loaded(shard)
    rewrite(shard, {**tensors, name: change(tensors[name])})
    assert_refused(
        "model", "import", "--from", source, "--output", tmp_path / "model",
        sentence=f"{shard} holds {name} " + refusal.format(config=source / "config.json"),
    )  # fmt: skip


def run_in_limited_memory(*args: object, cwd: Path) -> tuple[int, str, str]:
    """The real command in a process of ADDRESS_SPACE bytes: where it allocates what the
    configuration claims, it fails at the limit instead of taking the machine's memory."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))

    environment = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb"}
    completed = subprocess.run(
        [str(ZRODLO), *(str(arg) for arg in args)], cwd=cwd, capture_output=True, text=True,
        env=environment, preexec_fn=limit, timeout=300, check=False,
    )  # fmt: skip
    return completed.returncode, completed.stdout, completed.stderr


@pytest.mark.parametrize(
    ("values", "refusal"),
    [
        # A million layers of names would take gigabytes: the shards' headers refuse them first.
        ({"n_layer": 1_000_000, "n_embd": 2, "n_head": 1},
         "config.json states n_layer 1000000, and the shards of {index} hold tensors of 2 "
         "layers"),
        ({"n_positions": 1_000_000},
         "config.json states a model of 32,048,512 parameters, and the shards of {index} hold "
         "values for 49,536 of them"),
    ],
)  # fmt: skip
def test_a_config_json_larger_than_its_shards_is_refused_before_it_is_built(
    tmp_path, snapshot, values, refusal
):
    source = sharded(tmp_path, "gpt2", tie_word_embeddings=False)  # the file holds the head
    file = source / "config.json"
    file.write_text(json.dumps({**json.loads(file.read_text()), **values}))
    before = snapshot(tmp_path)
    returncode, stdout, stderr = run_in_limited_memory(
        "model", "import", "--from", source, "--output", tmp_path / "model", cwd=tmp_path
    )
    sentence = f"{source}/" + refusal.format(index=source / INDEX)
    assert (returncode, stdout, stderr[-2000:]) == (1, "", f"Error: {sentence}\n")
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize(
    ("text", "refusal"),
    [
        ('{"weight_map": ', "does not load as a weights index: Expecting value: line 1 column 16 "
         "(char 15)"),
        ('{"weight_map": ["model-00001-of-00002.safetensors"]}',
         "does not map tensor names to shard files in a weight_map object"),
        ('{"weight_map": {"transformer.wte.weight": 1}}',
         "does not map tensor names to shard files in a weight_map object"),
        ('{"metadata": {}}', "does not map tensor names to shard files in a weight_map object"),
        ('{"weight_map": {"transformer.wte.weight": "sub/model.safetensors"}}',
         "names the shard 'sub/model.safetensors'; a shard is a file of {source} itself, named "
         "without '/' or '..'"),
        ('{"weight_map": {"transformer.wte.weight": ".."}}',
         "names the shard '..'; a shard is a file of {source} itself, named without '/' or '..'"),
    ],
)  # fmt: skip
def test_an_index_that_names_no_shards_of_the_directory_is_refused(
    tmp_path, assert_refused, text, refusal
):
    source = sharded(tmp_path, "gpt2")
    (source / "sub").mkdir()  # a file there, so that the name alone is refused
    first = min(weight_map(source).values())
    (source / "sub" / "model.safetensors").write_bytes((source / first).read_bytes())
    (source / INDEX).write_text(text)
    assert_refused(
        "model", "import", "--from", source, "--output", tmp_path / "model",
        sentence=f"{source / INDEX} " + refusal.format(source=source),
    )  # fmt: skip

"""`zrodlo model import` of a directory holding symbolic links, by the real command: a file the
import reads (config.json, the tokenizer's files, the weights' index or a shard) that is a link out
of the directory is refused naming the link, writing nothing; links within it are followed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
from library_tokenizers import gpt2_file

# In `make test`, not `make check`: transformers models.
pytestmark = pytest.mark.slow

transformers = pytest.importorskip("transformers")

SHARD = "model-00001-of-00002.safetensors"
INDEX = "model.safetensors.index.json"


def saved(root: Path) -> Path:
    """A small transformers GPT-2 saved in two shards, with a tokenizer and its configuration."""
    torch.manual_seed(0)
    directory = root / "hf-gpt2"
    directory.mkdir()
    gpt2_file(directory / "tokenizer.json")
    (directory / "tokenizer_config.json").write_text(
        '{"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>"}'
    )
    config = transformers.GPT2Config(
        vocab_size=360, n_positions=32, n_embd=32, n_layer=2, n_head=4,
        activation_function="gelu",
    )  # fmt: skip
    transformers.GPT2LMHeadModel(config).save_pretrained(directory, max_shard_size="150KB")
    assert sorted(path.name for path in directory.glob("*.safetensors")) == [
        SHARD,
        "model-00002-of-00002.safetensors",
    ]
    return directory


def moved(file: Path, to: Path, relative: bool) -> Path:
    """Move `file` into the directory `to`, leaving a symbolic link to it in its place."""
    to.mkdir(exist_ok=True)
    target = to / file.name
    file.rename(target)
    file.symlink_to(os.path.relpath(target, file.parent) if relative else target)
    return target


@pytest.mark.parametrize(
    "name",
    ["config.json", "tokenizer.json", "tokenizer_config.json", INDEX, SHARD],
)  # fmt: skip
def test_a_link_out_of_the_directory_is_refused_naming_it(tmp_path, assert_refused, name):
    source = saved(tmp_path)
    target = moved(source / name, tmp_path / "elsewhere", relative=name == SHARD)
    assert_refused(
        "model", "import", "--from", source, "--output", tmp_path / "model",
        sentence=f"{source / name} is a symbolic link to {target}, outside {source}; Zrodlo "
        "imports the files a model directory holds itself",
    )  # fmt: skip


def test_links_within_the_directory_are_followed(tmp_path, run_zrodlo):
    """As a download may lay a directory out: each file a link to a blob beside it, and the
    directory itself reached by a link; the model written is the one the plain directory gives."""
    source = saved(tmp_path)
    plain = written_by_import(source, tmp_path, run_zrodlo, "plain")
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json", INDEX, SHARD):
        moved(source / name, source / "blobs", relative=name != SHARD)
    (tmp_path / "link").symlink_to(source)
    assert written_by_import(tmp_path / "link", tmp_path, run_zrodlo, "linked") == plain


def written_by_import(source: Path, root: Path, run_zrodlo, output: str) -> dict[str, bytes]:
    """The files of the model directory `model import --from source` writes."""
    returncode, _, stderr = run_zrodlo(
        "model", "import", "--from", source, "--output", output, cwd=root
    )
    assert (returncode, stderr) == (0, ""), stderr
    return {path.name: path.read_bytes() for path in (root / output).iterdir()}


def test_a_revision_of_the_hubs_cache_is_read_from_its_blobs(tmp_path, run_zrodlo):
    """The hub's cache keeps a revision's files as links from <repo>/snapshots/<revision> to
    <repo>/blobs: that directory's files are its own, and a link elsewhere is still refused."""
    source = saved(tmp_path)
    plain = written_by_import(source, tmp_path, run_zrodlo, "plain")
    repository = tmp_path / "models--someone--gpt2"
    revision = repository / "snapshots" / "0123abcd"
    revision.mkdir(parents=True)
    for file in source.iterdir():
        (revision / file.name).symlink_to(
            os.path.relpath(repository / "blobs" / file.name, revision)
        )
    (repository / "blobs").mkdir()
    for file in source.iterdir():
        file.rename(repository / "blobs" / file.name)
    assert written_by_import(revision, tmp_path, run_zrodlo, "cached") == plain
    moved(repository / "blobs" / "config.json", tmp_path / "elsewhere", relative=False)
    returncode, _, stderr = run_zrodlo(
        "model", "import", "--from", revision, "--output", "refused", cwd=tmp_path
    )
    assert (returncode, stderr.startswith(f"Error: {revision / 'config.json'} is a symbolic")) == (
        1,
        True,
    ), stderr
    assert not (tmp_path / "refused").exists()

"""The DVC pipeline: real `dvc repro` in a temporary git repository on a small documents fixture.

The repository gets the data stages of the project's dvc.yaml, without its `documents` stage (which
would read the pinned torch's docstrings) and with a committed data/documents.jsonl in its place; src/ and stages/ are copied
so that every code dependency the stages list exists.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

# In `make test`, not `make check`: real dvc repro in a temporary repository.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
ENV = {
    **os.environ,
    "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
    "DVC_NO_ANALYTICS": "1",
}

DOCUMENTS = {
    "note-00": "the cat sat on the mat",
    "note-01": "a dog ran far away",
    "note-02": "rain fell all night",
    "note-03": "we ate bread and jam",
    "note-04": "tea is hot, coffee too",
    "note-05": "café au lait",
    "note-06": "birds sing at dawn",
    "note-07": "old maps show new roads",
    "note-08": "light moves fast",
    "note-09": "straße und weg",
    "note-10": "snow on the hills",
    "note-11": "boats drift by the pier",
}
PARAMS = (
    "splits:\n  source: data/documents.jsonl\n  validation: 0.2\n  test: 0.2\n"
    "tokenizer:\n  kind: char\n  vocab_size: 1024\n"
    "prepare:\n  enable_thinking: null\n"
    "init:\n  from: null\n"
)
DOWNSTREAM = ["split", "tokenizer", "prepare@train", "prepare@validation", "prepare@test"]

# What the pipeline gives for DOCUMENTS and PARAMS: a change in any is a change in behaviour.
POOLS = {
    "train": [f"note-{i:02d}" for i in (0, 1, 2, 3, 5, 6, 7, 8, 10, 11)],
    "validation": ["note-09"],
    "test": ["note-04"],
}
POOL_SHA256 = {
    "train": "0ef45a08cca05452dd6993a85899289b2f1caa5f2f486a44cb5fb8979bbcc4c4",
    "validation": "a0e87f68338fe3d06add10ed6182c6d30163048b8497c73a2901be5b410d59d9",
    "test": "5ddf6b4f8e28ab5bc265f15700c1f57d2f5c7b0f6fe74d541467b42ffd159ff0",
}
TOKENIZER_DIGEST = "6c4beb5f1618db07dbe410c20b59a73ad2074f0b153b73d0a3dd02a07d6ac737"
CORPUS_DIGESTS = {
    "train": "e2bceb8b7d5b5ae28f5af6fd15a7d8b063b201291057a4cd2ce15bd84c86c7a1",
    "validation": "a67a933390d2c7a9c1c83abdee471489bc32e0b5ceb4fea0667b085c90fdc4a7",
    "test": "2b3ffa754d385343198c354618dce1b27e7094032492a58d5bb1e33290fb1e97",
}


def run(*args: str, cwd: Path) -> str:
    completed = subprocess.run(
        args, cwd=cwd, env=ENV, capture_output=True, text=True, timeout=300, check=False
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    return completed.stdout


def dvc(*args: str, cwd: Path) -> str:
    return run(str(BIN / "dvc"), *args, cwd=cwd)


def stages_run(repro_output: str) -> list[str]:
    return re.findall(r"^Running stage '([^']+)':", repro_output, flags=re.MULTILINE)


def changed_stages(repo: Path) -> set[str]:
    return set(json.loads(dvc("status", "--json", cwd=repo)))


def make_repository(repo: Path) -> None:
    repo.mkdir()
    run("git", "init", "-q", cwd=repo)
    run("git", "config", "user.email", "tests@example.com", cwd=repo)
    run("git", "config", "user.name", "Tests", cwd=repo)
    spec = yaml.safe_load((ROOT / "dvc.yaml").read_text())
    # The data stages only: documents is replaced by the fixture, and the model stages have their
    # own tests and the CI reproduction check.
    data_stages = ("splits", "split", "tokenizer", "prepare")
    spec = {"stages": {name: spec["stages"][name] for name in data_stages}}
    (repo / "dvc.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    (repo / "params.yaml").write_text(PARAMS)
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info")
    shutil.copytree(ROOT / "src", repo / "src", ignore=ignore)
    shutil.copytree(ROOT / "stages", repo / "stages", ignore=ignore)
    shutil.copytree(ROOT / "pretrained", repo / "pretrained")  # a dependency of the tokenizer
    (repo / "data").mkdir()
    (repo / "corpus").mkdir()
    lines = [json.dumps({"id": i, "text": t}, ensure_ascii=False) for i, t in DOCUMENTS.items()]
    (repo / "data" / "documents.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    dvc("init", "-q", cwd=repo)
    run("git", "add", "-A", cwd=repo)
    run("git", "commit", "-q", "-m", "fixture", cwd=repo)


@pytest.fixture(scope="module")
def reproduced(tmp_path_factory) -> tuple[Path, str]:
    """A repository after its first `dvc repro`, and what that repro printed."""
    repo = tmp_path_factory.mktemp("pipeline") / "repo"
    make_repository(repo)
    return repo, dvc("repro", cwd=repo)


@pytest.fixture
def repo_copy(reproduced, tmp_path) -> Path:
    """A copy of the reproduced repository (its cache included) that a test may change."""
    copy = tmp_path / "repo"
    shutil.copytree(reproduced[0], copy, symlinks=True)
    return copy


def test_the_first_repro_runs_every_stage_in_order(reproduced):
    assert stages_run(reproduced[1]) == ["splits", *DOWNSTREAM]


def test_the_pipeline_gives_the_pinned_pools_tokenizer_and_corpora(reproduced):
    repo = reproduced[0]
    assert json.loads((repo / "data" / "splits.json").read_text()) == POOLS
    manifest = json.loads((repo / "pools" / "manifest.json").read_text())
    assert {pool: entry["sha256"] for pool, entry in manifest["pools"].items()} == POOL_SHA256
    tokenizer = json.loads((repo / "tokenizer" / "tokenizer.json").read_text())
    assert tokenizer["digest"] == TOKENIZER_DIGEST
    for pool, digest in CORPUS_DIGESTS.items():
        assert (repo / "corpus" / pool / "tokens.bin").is_file()
        corpus = json.loads((repo / "corpus" / pool / "corpus.json").read_text())
        assert corpus["corpus_digest"] == digest
        assert corpus["tokenizer_digest"] == TOKENIZER_DIGEST


def test_the_tokenizer_never_sees_held_out_characters(reproduced):
    repo = reproduced[0]
    characters = json.loads((repo / "tokenizer" / "tokenizer.json").read_text())["characters"]
    assert "ß" not in characters and "é" in characters  # "ß" is only in note-09, a validation id
    validation = json.loads((repo / "corpus" / "validation" / "corpus.json").read_text())
    assert validation["unknown_tokens"] == 1


def test_a_second_repro_changes_nothing(repo_copy):
    output = dvc("repro", cwd=repo_copy)
    assert stages_run(output) == []
    assert "Data and pipelines are up to date." in output
    assert changed_stages(repo_copy) == set()


def test_editing_an_unrelated_param_reruns_nothing(repo_copy):
    (repo_copy / "params.yaml").write_text(PARAMS + "train:\n  steps: 7\n")
    assert changed_stages(repo_copy) == set()
    assert stages_run(dvc("repro", cwd=repo_copy)) == []


def test_editing_the_validation_share_reruns_splits_and_what_follows(repo_copy):
    (repo_copy / "params.yaml").write_text(PARAMS.replace("validation: 0.2", "validation: 0.35"))
    assert changed_stages(repo_copy) == {"splits"}
    assert stages_run(dvc("repro", cwd=repo_copy)) == ["splits", *DOWNSTREAM]
    pools = json.loads((repo_copy / "data" / "splits.json").read_text())
    assert pools["validation"] == ["note-04", "note-09"]
    tokenizer = json.loads((repo_copy / "tokenizer" / "tokenizer.json").read_text())
    assert "é" not in tokenizer["characters"]  # note-05 moved to test
    assert tokenizer["digest"] != TOKENIZER_DIGEST
    assert changed_stages(repo_copy) == set()


@pytest.mark.parametrize(
    ("code", "stages"),
    [
        ("stages/split.py", {"split"}),
        # The splits stage takes its options through `--params`, whose code reads which keys
        # each tokenizer kind takes: it reruns too, and writes the same splits.json.
        (
            "src/zrodlo/data/tokenizer/char.py",
            {"splits", "tokenizer", "prepare@train", "prepare@validation", "prepare@test"},
        ),
        ("src/zrodlo/data/pools.py", {"splits", "split"}),
    ],
)
def test_editing_a_stages_code_marks_that_stage_changed(repo_copy, code, stages):
    with open(repo_copy / code, "a", encoding="utf-8") as handle:
        handle.write("\n# edited\n")
    assert changed_stages(repo_copy) == stages

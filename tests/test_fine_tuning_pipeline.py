"""Fine-tuning a model you have: real `dvc repro` of the pipeline in a temporary git repository
whose params.yaml sets init.from to a tiny transformers Llama saved with `save_pretrained` in
pretrained/ and tracked with `dvc add`. The tokenizer stage imports the directory's tokenizer, the
corpora are encoded with it, the init stage imports the model, and dvc.lock holds the folder's hash,
so that an edit of the directory reruns those two stages.

The repository holds the project's dvc.yaml without its torch-docs stage, a small documents file
in its place, and src/ and stages/ so that every code dependency the stages list exists.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from doc_experiments import experiment_params
from library_tokenizers import TEXTS
from transformers_models import save_tiny_llama

# In `make test`, not `make check`: real dvc repro of every stage, a transformers model.
pytestmark = pytest.mark.slow

transformers = pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
ENV = {
    **os.environ,
    "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
    "DVC_NO_ANALYTICS": "1",
    "OMP_NUM_THREADS": "1",
}
SOURCE = "pretrained/tiny-llama"
# Few steps of a tiny model on a few documents: every stage runs in seconds.
TINY = {
    "documents": {"source": "data/notes.jsonl"},
    "init": {"from": SOURCE},
    "train": {
        "steps": 4, "context": 33, "batch_size": 4, "micro_batch_size": 2, "warmup": 0.25,
        "decay": 0.5, "eval_every": 2, "eval_windows": 16, "checkpoint_every": 2, "threads": 1,
    },
    "resume": {"before_end": 2},
    "evaluate": {"train_windows": 16},
    "report": {"sample_tokens": 8},
}  # fmt: skip
CONVERSATIONS = "examples/conversations.jsonl"
STAGES = {
    "pipeline", "documents", "splits", "split", "tokenizer", "prepare@train",
    "prepare@validation", "prepare@test", "init", "train", "resume", "evaluate", "report",
}  # fmt: skip


def run(*args: object, cwd: Path) -> str:
    done = subprocess.run(
        [str(arg) for arg in args], cwd=cwd, env=ENV, capture_output=True, text=True,
        timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def dvc(*args: object, cwd: Path) -> str:
    return run(BIN / "dvc", *args, cwd=cwd)


def stages_run(output: str) -> list[str]:
    return [line.split("'")[1] for line in output.splitlines() if line.startswith("Running stage")]


def make_repository(repo: Path, chat: bool = False) -> None:
    """The repository; with `chat`, its documents are the README's example conversations and
    its tokenizer_config.json has a chat template."""
    repo.mkdir()
    spec = yaml.safe_load((ROOT / "dvc.yaml").read_text())
    del spec["stages"]["torch-docs"]  # the documents come from data/notes.jsonl
    (repo / "dvc.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    for section, values in TINY.items():
        params[section].update(values)
    if chat:  # train and validation alone (nanoGPT's split), adapters as adapters.md trains them
        params["documents"]["source"] = CONVERSATIONS
        params["splits"].update({"validation": 0.2, "test": 0.0})
        params["train"].update(experiment_params("adapters.md", "an experiment of")["train"])
        params["train"].update({"lora_rank": 4, "lora_alpha": 8, "lora_targets": "q,v,o,down"})
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info")
    for folder in ("src", "stages", "pretrained", "examples"):
        shutil.copytree(ROOT / folder, repo / folder, ignore=ignore)
    for folder in ("data", "corpus", "logs", "reports"):  # the parents the stages write in
        (repo / folder).mkdir()
    lines = [json.dumps({"id": f"note-{i:02d}", "text": text}) for i, text in enumerate(TEXTS)]
    (repo / "data" / "notes.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    save_tiny_llama(repo / SOURCE, chat=chat)
    run("git", "init", "-q", cwd=repo)
    dvc("init", "-q", cwd=repo)
    dvc("add", "-q", SOURCE, cwd=repo)


@pytest.fixture(scope="module")
def reproduced(tmp_path_factory) -> tuple[Path, str]:
    """The repository after its first `dvc repro`, committed, and what that repro printed."""
    repo = tmp_path_factory.mktemp("fine-tuning") / "repo"
    make_repository(repo)
    output = dvc("repro", cwd=repo)
    run("git", "add", "-A", cwd=repo)
    run("git", "-c", "user.name=t", "-c", "user.email=t@localhost", "commit", "-qm", "tuned",
        cwd=repo)  # fmt: skip
    return repo, output


def test_every_stage_runs_from_the_imported_model_and_the_run_resumes_exactly(reproduced):
    repo, output = reproduced
    assert set(stages_run(output)) == STAGES, output
    assert json.loads((repo / "reports" / "resume.json").read_text())["equal"] is True
    assert json.loads(dvc("status", "--json", cwd=repo)) == {}


def test_the_corpora_are_encoded_with_the_directorys_tokenizer_and_its_specials(reproduced):
    repo = reproduced[0]
    tokenizer = json.loads((repo / "tokenizer" / "tokenizer.json").read_text())
    library = json.loads((repo / SOURCE / "tokenizer.json").read_text())
    ids = {added["content"]: added["id"] for added in library["added_tokens"]}
    assert tokenizer["kind"] == "imported-bpe"
    assert tokenizer["special"] == {
        "BOS": ids["<|begin_of_text|>"], "EOS": ids["<|end_of_text|>"]
    }  # fmt: skip
    model = json.loads((repo / "model" / "tokenizer.json").read_text())
    assert model["digest"] == tokenizer["digest"]
    for pool in ("train", "validation", "test"):
        corpus = json.loads((repo / "corpus" / pool / "corpus.json").read_text())
        assert corpus["tokenizer_digest"] == tokenizer["digest"], pool


def test_the_init_stage_writes_what_model_import_writes_not_the_preset(reproduced, tmp_path):
    repo = reproduced[0]
    run(BIN / "zrodlo", "model", "import", "--from", repo / SOURCE, "--output", tmp_path / "m",
        cwd=tmp_path)  # fmt: skip
    written = sorted(path.name for path in (repo / "model").iterdir())
    assert written == sorted(path.name for path in (tmp_path / "m").iterdir())
    for name in written:
        assert (repo / "model" / name).read_bytes() == (tmp_path / "m" / name).read_bytes(), name
    config = json.loads((repo / "model" / "config.json").read_text())
    assert (config["layers"], config["d_model"], config["positions"]) == (2, 32, 32)


def test_dvc_lock_holds_the_folders_hash_and_an_edit_of_the_directory_reruns_two_stages(
    reproduced, tmp_path
):
    lock = yaml.safe_load((reproduced[0] / "dvc.lock").read_text())["stages"]
    for stage in ("tokenizer", "init"):
        deps = {dep["path"]: dep for dep in lock[stage]["deps"]}
        assert deps["pretrained"]["md5"].endswith(".dir"), stage
    assert lock["tokenizer"]["params"]["params.yaml"]["init.from"] == SOURCE
    copy = Path(shutil.copytree(reproduced[0], tmp_path / "repo", symlinks=True))
    config = copy / SOURCE / "generation_config.json"
    config.write_text(config.read_text() + "\n")  # the same settings, other bytes
    changed = set(json.loads(dvc("status", "--json", cwd=copy)))
    assert changed == {"tokenizer", "init", f"{SOURCE}.dvc"}
    # The tokenizer and the model imported again are the same: nothing after them reruns.
    assert stages_run(dvc("repro", cwd=copy)) == ["tokenizer", "init"]
    assert json.loads(dvc("status", "--json", cwd=copy)) == {}


def test_a_chat_fine_tune_runs_as_params_of_the_pipeline(tmp_path):
    """The README's recipe as params: the example conversations and a model whose tokenizer has
    a chat template, split into train and validation alone (splits.test 0), with adapters (LoRA)
    trained over the imported model; every stage runs, the corpora are weighted on the answers,
    the empty test pool is prepared and left unscored, the checkpoints hold the adapters alone and
    name the model by digest, the run resumes exactly and the report counts the answers'
    targets."""
    repo = tmp_path / "repo"
    make_repository(repo, chat=True)
    assert set(stages_run(dvc("repro", cwd=repo))) == STAGES
    assert json.loads((repo / "reports" / "resume.json").read_text())["equal"] is True
    for pool in ("train", "validation"):
        corpus = json.loads((repo / "corpus" / pool / "corpus.json").read_text())
        assert corpus["format_version"] == 4, pool
        assert 0 < corpus["weighted_targets"] < corpus["targets"], pool
    # splits.test 0: an empty test pool, prepared as an empty corpus and not scored.
    assert json.loads((repo / "corpus" / "test" / "corpus.json").read_text())["documents"] == 0
    scored = json.loads((repo / "reports" / "evaluation.json").read_text())["corpora"]
    assert sorted(scored) == ["train", "validation"]
    report = (repo / "reports" / "report.md").read_text()
    assert "trained and scored on the targets of its answers" in report
    assert "| test | 0 | 0 | 0 | 0 | 0 |" in report
    tuned = sorted((repo / "run").glob("step-*"))[-1]
    assert not (tuned / "model.safetensors").exists()
    weights = hashlib.sha256((repo / "model" / "model.safetensors").read_bytes()).hexdigest()
    base = json.loads((tuned / "trainer.json").read_text())["base"]
    assert base == {"path": "../model", "weights_sha256": weights}
    answer = run(BIN / "zrodlo", "model", "sample", "--model", tuned, "--prompt", "Hello!",
                 "--chat", "--tokens", 8, "--seed", 1, cwd=repo)  # fmt: skip
    assert answer.endswith("\n")

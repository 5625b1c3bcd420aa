"""DVC experiments on the whole pipeline: real `dvc repro` and `dvc exp run` in a temporary git
repository holding this project's files, with tiny params so that every stage runs in seconds.

What a DVC user does first: run experiments with more and with fewer steps (the resume stage must
find its checkpoint whatever the steps), look at them with `dvc exp show`, compare params, metrics
and plots with HEAD, edit a param and see only the stages that read it rerun. And a forced rerun of
every stage must leave dvc.lock as it was: nothing DVC hashes holds wall-clock time.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

# In `make test`, not `make check`: real dvc exp runs of the whole pipeline.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
ENV = {
    **os.environ,
    "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
    "DVC_NO_ANALYTICS": "1",
    "OMP_NUM_THREADS": "1",
}
TINY = {
    "init": {"preset": "tiny", "positions": 32},
    "train": {
        "steps": 8, "context": 33, "batch_size": 4, "micro_batch_size": 2, "warmup": 0.25,
        "decay": 0.5, "eval_every": 4, "checkpoint_every": 2, "threads": 1,
    },
    "resume": {"before_end": 2},  # with checkpoints every 2 steps, the older of the two kept
    "evaluate": {"train_windows": 256},
    "report": {"sample_tokens": 20},
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


def project_files() -> list[str]:
    """The project's files as a fresh clone holds them (and those not yet committed)."""
    listed = run("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", cwd=ROOT)
    return [name for name in listed.split("\0") if name and (ROOT / name).is_file()]


@pytest.fixture(scope="module")
def baseline(tmp_path_factory) -> Path:
    """The project at TINY params, reproduced and committed: the HEAD experiments start from."""
    repo = tmp_path_factory.mktemp("experiments") / "repo"
    for name in project_files():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, repo / name)
    params = yaml.safe_load((repo / "params.yaml").read_text())
    for section, values in TINY.items():
        params[section].update(values)
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    run("git", "init", "-q", cwd=repo)
    done = subprocess.run(
        [str(BIN / "dvc"), "repro"], cwd=repo, env=ENV, capture_output=True, text=True,
        timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (repo.parent / "repro.log").write_text(done.stdout + done.stderr)  # what a user reads
    run("git", "add", "-A", cwd=repo)
    run(
        "git",
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@localhost",
        "commit",
        "-qm",
        "tiny",
        cwd=repo,
    )
    return repo


@pytest.fixture(scope="module")
def experiments(baseline) -> dict[str, str]:
    """What `dvc exp run` printed for an experiment with more steps and one with fewer; the
    workspace is left with the second."""
    more = dvc("exp", "run", "-n", "more", "-S", "train.steps=12", cwd=baseline)
    fewer = dvc("exp", "run", "-n", "fewer", "-S", "train.steps=6", cwd=baseline)
    return {"more": more, "fewer": fewer}


@pytest.mark.skipif(
    os.environ.get("ZRODLO_FULL_TESTS") != "1",
    reason="opt in: ZRODLO_FULL_TESTS=1; CI's .ci/reproduce.py reruns the committed pipeline",
)
def test_the_first_repro_warns_of_nothing(baseline):
    """No output is empty (DVC warns of one): the documents stage lists what it skipped, none,
    as an empty JSON array."""
    printed = (baseline.parent / "repro.log").read_text()
    assert "WARNING" not in printed and "is empty" not in printed, printed
    assert json.loads((baseline / "data" / "skipped.json").read_text()) == []


def test_a_forced_rerun_of_every_stage_leaves_dvc_lock_as_it_was(baseline, tmp_path):
    """Every stage run again gives the dvc.lock it gave: .ci/reproduce.py holds the committed
    pipeline to this from nothing on every commit, so this twin on the tiny params is opt-in."""
    copy = Path(shutil.copytree(baseline, tmp_path / "repo", symlinks=True))
    dvc("repro", "--force", cwd=copy)
    assert (copy / "dvc.lock").read_bytes() == (baseline / "dvc.lock").read_bytes()
    assert json.loads(dvc("status", "--json", cwd=copy)) == {}
    assert (copy / "logs" / "train-timing.csv").read_text().startswith("step,seconds,")


@pytest.mark.parametrize("name", ["more", "fewer"])
def test_an_experiment_with_more_or_fewer_steps_reruns_and_resumes_exactly(experiments, name):
    ran = stages_run(experiments[name])
    assert ran == ["pipeline", "train", "resume", "evaluate", "report"], experiments[name]


def test_the_schedule_of_an_experiment_follows_its_steps(experiments, baseline):
    """train.warmup and train.decay are shares of train.steps: the 6-step experiment left in the
    workspace warms up over 1 update, decays over 3 and ends at the minimum rate."""
    hyperparameters = json.loads((baseline / "run" / "run.json").read_text())["hyperparameters"]
    schedule = {
        key: hyperparameters[key] for key in ("warmup_steps", "stable_steps", "decay_steps")
    }
    assert schedule == {"warmup_steps": 1, "stable_steps": 2, "decay_steps": 3}
    rates = [row.split(",")[2] for row in (baseline / "run" / "steps.csv").read_text().splitlines()]
    assert float(rates[-1]) == hyperparameters["min_learning_rate"]


def test_exp_show_lists_both_experiments_with_their_params_and_scores_alone(experiments, baseline):
    """The metrics DVC shows are the scores of each pool and nothing else: no digests, counts or
    provenance (reports/evaluation.json and reports/resume.json hold those, outside its metrics)."""
    shown = json.loads(dvc("exp", "show", "--json", cwd=baseline))
    found, metrics = {}, {}
    for commit in shown:
        for experiment in commit.get("experiments") or []:
            for revision in experiment.get("revs", []):
                data = revision["data"]
                params = data["params"]["params.yaml"]["data"]
                found[experiment["name"]] = params["train"]["steps"]
                metrics[experiment["name"]] = data["metrics"]
    assert found == {"more": 12, "fewer": 6}
    scores = {
        "loss", "perplexity", "bits_per_character", "bits_per_byte", "bigram_loss",
        "bigram_bits_per_byte",
    }  # fmt: skip
    for name, files in metrics.items():
        assert set(files) == {"reports/metrics.json"}, name
        pools = files["reports/metrics.json"]["data"]
        assert {pool: set(entry) for pool, entry in pools.items()} == {
            pool: scores for pool in ("train", "validation", "test")
        }, name
    assert json.loads((baseline / "reports" / "resume.json").read_text())["equal"] is True


def test_params_metrics_and_plots_diff_against_head(experiments, baseline, tmp_path):
    params = json.loads(dvc("params", "diff", "HEAD", "--json", cwd=baseline))
    steps = params["params.yaml"]["train.steps"]
    assert (steps["old"], steps["new"]) == (8, 6)
    metrics = json.loads(dvc("metrics", "diff", "HEAD", "--json", cwd=baseline))
    assert "validation.loss" in metrics["reports/metrics.json"]
    dvc("plots", "diff", "HEAD", "-o", tmp_path / "plots", cwd=baseline)
    page = (tmp_path / "plots" / "index.html").read_text()
    assert "Training and held-out loss" in page
    assert "Held-out bits per byte of text" in page and "eval_bits_per_byte" in page


@pytest.mark.parametrize(
    ("section", "key", "value", "stages"),
    [
        ("report", "sample_tokens", 30, {"pipeline", "report"}),
        ("resume", "before_end", 4, {"pipeline", "resume"}),
        ("resume", "check", False, {"pipeline", "resume"}),
        ("evaluate", "train_windows", 8, {"pipeline", "evaluate"}),
        ("init", "seed", 2, {"pipeline", "init"}),
        ("splits", "test", 0.2, {"pipeline", "splits"}),
    ],
)
def test_a_param_edit_marks_only_the_stages_that_read_it(
    baseline, tmp_path, section, key, value, stages
):
    copy = Path(shutil.copytree(baseline, tmp_path / "repo", symlinks=True))
    run("git", "checkout", "-q", "--", ".", cwd=copy)
    dvc("checkout", "-q", cwd=copy)
    params = yaml.safe_load((copy / "params.yaml").read_text())
    params[section][key] = value
    (copy / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    assert set(json.loads(dvc("status", "--json", cwd=copy))) == stages


def test_steps_whose_resume_checkpoint_is_not_kept_are_refused_before_training(baseline, tmp_path):
    """train.steps 7 with checkpoints every 2, two kept, and resume.before_end 2: the train stage
    would keep step-6 and step-7, and the resume stage continue step-5. The pipeline stage says so,
    naming the params, before the train stage runs."""
    copy = Path(shutil.copytree(baseline, tmp_path / "repo", symlinks=True))
    done = subprocess.run(
        [BIN / "dvc", "exp", "run", "-S", "train.steps=7"], cwd=copy, env=ENV,
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode != 0
    assert (
        "Error: resume.before_end 2 has the resume stage continue step-5, and with train.steps 7, "
        "train.checkpoint_every 2 and train.keep_checkpoints 2 the train stage keeps step-6, "
        "step-7; set resume.before_end to 1"
    ) in done.stderr + done.stdout
    assert stages_run(done.stdout) == ["pipeline"]


@pytest.mark.parametrize(
    "module", ["src/zrodlo/data/documents.py", "src/zrodlo/data/encoding.py", "stages/split.py"]
)
def test_an_edit_of_document_code_reruns_no_stage_of_the_model(baseline, tmp_path, module):
    """Code only the document stages import is no dependency of init, train, resume, evaluate
    or report: editing it marks document stages alone."""
    copy = Path(shutil.copytree(baseline, tmp_path / "repo", symlinks=True))
    with open(copy / module, "a", encoding="utf-8") as handle:
        handle.write("# an edit\n")
    changed = set(json.loads(dvc("status", "--json", cwd=copy)))
    # The pipeline stage checks the params with the pools' own rules: it reruns, writes the same.
    documents = {"pipeline", "torch-docs", "documents", "splits", "split", "tokenizer"}
    documents |= {f"prepare@{pool}" for pool in ("train", "validation", "test")}
    assert changed and changed <= documents, changed


def test_the_resume_check_turned_off_continues_no_checkpoint(baseline, tmp_path):
    """resume.check false, with steps whose resume checkpoint no run keeps: the pipeline runs to
    the resume stage (what follows reads the run as it does any), which trains nothing and says
    that it checked nothing."""
    copy = Path(shutil.copytree(baseline, tmp_path / "repo", symlinks=True))
    ran = dvc("exp", "run", "-S", "resume.check=false", "-S", "train.steps=7", "resume", cwd=copy)
    assert stages_run(ran) == ["pipeline", "train", "resume"], ran
    assert json.loads((copy / "reports" / "resume.json").read_text()) == {"checked": False}
    assert list((copy / "resumed").iterdir()) == []
    assert "resume" not in json.loads(dvc("status", "--json", cwd=copy))


def test_your_own_documents_are_a_params_change_and_a_dependency(baseline, tmp_path):
    """documents.source names a folder tracked with `dvc add`: the documents stage imports it
    with the section's flags, the documents it skips are listed, and dvc.lock records the
    folder's hash, so the data a run came from is versioned with it. Run up to the documents
    stage alone: what follows reads the documents as it does any others."""
    copy = Path(shutil.copytree(baseline, tmp_path / "repo", symlinks=True))
    texts = copy / "my_texts"
    (texts / "notes").mkdir(parents=True)
    sentence = "the quick brown fox jumps over the lazy dog, and the dog sleeps on. "
    for i in range(30):
        (texts / "notes" / f"{i:02d}.txt").write_text(f"note {i}: {sentence * (3 + i % 4)}")
    (texts / "readme.md").write_text("# not taken")
    (texts / "empty.txt").write_text("")
    dvc("add", "my_texts", cwd=copy)
    ran = dvc(
        "exp", "run", "-S", "documents.source=my_texts", "-S", "documents.include=['*.txt']",
        "-S", "documents.skip-empty=true", "documents", cwd=copy,
    )  # fmt: skip
    assert stages_run(ran) == ["pipeline", "documents"], ran
    lines = (copy / "data" / "documents.jsonl").read_text().splitlines()
    assert [json.loads(line)["id"] for line in lines] == [f"notes/{i:02d}.txt" for i in range(30)]
    skipped = json.loads((copy / "data" / "skipped.json").read_text())
    assert skipped == [{"id": "empty.txt", "reason": "empty"}]
    lock = yaml.safe_load((copy / "dvc.lock").read_text())
    source = next(d for d in lock["stages"]["documents"]["deps"] if d["path"] == "my_texts")
    added = yaml.safe_load((copy / "my_texts.dvc").read_text())["outs"][0]
    assert source["md5"] == added["md5"] and source["md5"].endswith(".dir")
    assert "documents" not in json.loads(dvc("status", "--json", cwd=copy))


def test_your_own_pools_are_a_params_change_and_a_dependency(baseline, tmp_path):
    """splits.source names a splits.json the user wrote: the splits stage checks it against the
    documents and writes its pools as data/splits.json, the split stage cuts those, and dvc.lock
    holds the file's hash, so an edit of it marks the splits stage. Run up to the split stage
    alone: what follows reads the pools as it does any others."""
    copy = Path(shutil.copytree(baseline, tmp_path / "repo", symlinks=True))
    lines = (copy / "data" / "documents.jsonl").read_text().splitlines()
    ids = [json.loads(line)["id"] for line in lines]
    chosen = {"train": ids[4:], "validation": ids[:2], "test": ids[2:4]}
    assert chosen != json.loads((copy / "data" / "splits.json").read_text())
    (copy / "my_splits.json").write_text(json.dumps(chosen))
    ran = dvc("exp", "run", "-S", "splits.source=my_splits.json", "split", cwd=copy)
    assert stages_run(ran) == ["pipeline", "splits", "split"], ran
    assert json.loads((copy / "data" / "splits.json").read_text()) == chosen
    manifest = json.loads((copy / "pools" / "manifest.json").read_text())
    assert {pool: entry["documents"] for pool, entry in manifest["pools"].items()} == {
        pool: len(members) for pool, members in chosen.items()
    }
    test_lines = (copy / "pools" / "test.jsonl").read_text().splitlines()
    assert [json.loads(line)["id"] for line in test_lines] == chosen["test"]
    assert "splits" not in json.loads(dvc("status", "--json", cwd=copy))
    chosen["train"].append(chosen["validation"].pop())
    (copy / "my_splits.json").write_text(json.dumps(chosen))
    changed = json.loads(dvc("status", "--json", cwd=copy))["splits"]
    assert changed == [{"changed deps": {"my_splits.json": "modified"}}]


def test_subword_tokens_are_a_params_change(baseline, tmp_path):
    """tokenizer.kind bpe with a vocabulary size reruns the pipeline from the tokenizer on: a
    byte-level BPE of that size, corpora of fewer tokens than characters, and a model whose
    vocabulary is the tokenizer's (run up to the training corpus and the init stage; training
    reads any model alike)."""
    copy = Path(shutil.copytree(baseline, tmp_path / "repo", symlinks=True))
    ran = dvc("exp", "run", "-S", "tokenizer.kind=bpe", "-S", "tokenizer.vocab_size=300",
              "prepare@train", "init", cwd=copy)  # fmt: skip
    assert stages_run(ran)[:2] == ["pipeline", "tokenizer"], ran
    assert sorted(stages_run(ran)[2:]) == ["init", "prepare@train"], ran
    tokenizer = json.loads((copy / "tokenizer" / "tokenizer.json").read_text())
    assert (tokenizer["kind"], tokenizer["vocab_size"]) == ("bpe", 300)
    corpus = json.loads((copy / "corpus" / "train" / "corpus.json").read_text())
    assert corpus["tokens"] - 2 * corpus["documents"] < corpus["characters"]
    assert json.loads((copy / "model" / "config.json").read_text())["vocab_size"] == 300


def test_the_models_shape_is_a_param_beside_its_preset(baseline, tmp_path):
    """init.layers and init.d_model set those of the shape, the preset the rest: the first
    experiment a DVC user tries on a model (run up to the init stage)."""
    copy = Path(shutil.copytree(baseline, tmp_path / "repo", symlinks=True))
    ran = dvc("exp", "run", "-S", "init.layers=3", "-S", "init.d_model=96", "init", cwd=copy)
    assert stages_run(ran) == ["pipeline", "init"], ran
    config = json.loads((copy / "model" / "config.json").read_text())
    shape = {key: config[key] for key in ("layers", "heads", "d_model", "d_ff")}
    assert shape == {"layers": 3, "heads": 4, "d_model": 96, "d_ff": 256}  # tiny's heads and d_ff


def test_one_text_file_cut_at_its_blank_lines_is_the_corpus(baseline, tmp_path):
    """A play in one text file, as tiny Shakespeare's input.txt is: documents.cut-at cuts it at
    each blank line into speeches numbered from the file's name, and the pools are drawn from
    them (run up to the splits stage)."""
    copy = Path(shutil.copytree(baseline, tmp_path / "repo", symlinks=True))
    speeches = [
        f"{('First Citizen', 'All', 'Second Citizen')[i % 3]}:\n"
        + "We are accounted poor citizens, the patricians good. " * (1 + i % 3)
        for i in range(60)
    ]
    (copy / "input.txt").write_text("\n\n".join(speeches) + "\n", encoding="utf-8")
    ran = dvc(
        "exp", "run", "-S", "documents.source=input.txt", "-S", r"documents.cut-at=\n\s*\n",
        "splits", cwd=copy,
    )  # fmt: skip
    assert stages_run(ran) == ["pipeline", "documents", "splits"], ran
    lines = (copy / "data" / "documents.jsonl").read_text().splitlines()
    documents = [json.loads(line) for line in lines]
    assert [d["id"] for d in documents] == [f"input.txt#{i:02d}" for i in range(1, 61)]
    assert [d["text"] for d in documents[:-1]] == speeches[:-1]
    pools = json.loads((copy / "data" / "splits.json").read_text())
    assert len(pools["train"]) > 40 and sum(map(len, pools.values())) == 60

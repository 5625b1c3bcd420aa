"""The reproduction check that CI runs on every commit, on a copy of the repository.

It runs the whole pipeline with the committed params except the training stages, which take small
values (below), and checks that:
  (a) the stages up to init reproduce exactly the output hashes the committed dvc.lock records;
  (b) the resumed run equals the uninterrupted one (reports/resume.json says so);
  (c) a second `dvc repro` runs no stage.
Exit status 1, with what differs, when any of them fails.

    .venv/bin/python .ci/reproduce.py
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
DATA_STAGES = (
    "documents",
    "splits",
    "split",
    "tokenizer",
    "prepare@train",
    "prepare@validation",
    "prepare@test",
    "init",
)
SMALL = {
    "train": {
        "steps": 8,
        "context": 33,
        "batch_size": 4,
        "micro_batch_size": 2,
        "warmup_steps": 2,
        "stable_steps": 2,
        "decay_steps": 4,
        "eval_every": 4,
        "checkpoint_every": 2,
    },
    "resume": {"before_end": 2},  # step-6, the older of the two checkpoints kept
    "report": {"sample_tokens": 20},
}


def output_hashes(lock: dict) -> dict[str, dict[str, str]]:
    """The md5 of every output of the data stages and init, as dvc.lock records them."""
    stages = lock.get("stages", {})
    return {
        name: {out["path"]: out["md5"] for out in stages.get(name, {}).get("outs", [])}
        for name in DATA_STAGES
    }


def compare_locks(committed: dict, reproduced: dict) -> list[str]:
    """Every data-stage output whose reproduced hash differs from the committed one."""
    problems = []
    expected, actual = output_hashes(committed), output_hashes(reproduced)
    for stage in DATA_STAGES:
        if not expected[stage]:
            problems.append(f"the committed dvc.lock records no outputs for stage {stage}")
        for path, md5 in expected[stage].items():
            if actual[stage].get(path) != md5:
                problems.append(
                    f"stage {stage} output {path}: committed md5 {md5}, "
                    f"reproduced {actual[stage].get(path)}"
                )
    return problems


def copy_repository(target: Path) -> None:
    """The tracked files of the working tree, in a new git repository of their own."""
    tracked = (
        subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, check=True, capture_output=True)
        .stdout.decode()
        .split("\0")
    )
    for name in filter(None, tracked):
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    for command in (
        ["git", "init", "-q"],
        ["git", "add", "-A"],
        ["git", "-c", "user.name=ci", "-c", "user.email=ci@localhost", "commit", "-qm", "copy"],
    ):
        subprocess.run(command, cwd=target, check=True)


def repro(repository: Path) -> str:
    environment = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    }
    done = subprocess.run(
        [Path(sys.executable).parent / "dvc", "repro"],
        cwd=repository,
        env=environment,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise SystemExit(f"dvc repro failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout


def check(repository: Path) -> list[str]:
    committed = yaml.safe_load((repository / "dvc.lock").read_text())
    params = yaml.safe_load((repository / "params.yaml").read_text())
    for section, values in SMALL.items():
        params[section].update(values)
    (repository / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    repro(repository)
    problems = compare_locks(committed, yaml.safe_load((repository / "dvc.lock").read_text()))
    resume = json.loads((repository / "reports/resume.json").read_text())
    if not resume.get("equal") or not resume.get("steps_compared"):
        problems.append(f"the resumed run differs from the uninterrupted one: {resume}")
    second = repro(repository)
    if "Running stage" in second:
        problems.append(f"a second dvc repro ran stages again:\n{second}")
    return problems


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="zrodlo-reproduce-") as work:
        repository = Path(work)
        copy_repository(repository)
        problems = check(repository)
    if problems:
        print("reproduction check failed:\n- " + "\n- ".join(problems))
        raise SystemExit(1)
    print(
        "reproduction check passed: data stages and init match dvc.lock, the resumed run "
        "equals the uninterrupted one, and a second dvc repro is a no-op"
    )


if __name__ == "__main__":
    main()

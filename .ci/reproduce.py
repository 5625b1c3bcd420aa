"""The reproduction check that CI runs on every commit: the committed pipeline, training included,
from nothing, on a copy of the repository.

Every output the committed dvc.lock records is removed from a new copy of the tracked files, and
`dvc repro` runs every stage with the committed params. Then:
  (a) dvc.lock comes out byte for byte as committed, and so does every report git tracks
      (reports/metrics.json, evaluation.json, resume.json, report.md and the charts);
  (b) the resumed run equals the uninterrupted one (reports/resume.json says so);
  (c) `dvc status` is clean and a second `dvc repro` runs no stage.
Matrix products are rounded by the kernels torch and its math library pick for the processor, and
trainer.json records the environment, so (a) is promised where the environment that produced the
commit is the same (report.md's settings table names it). Where it is not, the check says what
differs and holds the rest to what is promised everywhere: the stages without matrix products
(the data stages and init) give the committed hashes, and every score agrees within 1%.
Exit status 1, with what differs, when any of them fails.

    .venv/bin/python .ci/reproduce.py
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from zrodlo.training.environment import WATCHED

ROOT = Path(__file__).resolve().parent.parent
EXACT_EVERYWHERE = (
    "pipeline",
    "documents",
    "splits",
    "split",
    "tokenizer",
    "prepare@train",
    "prepare@validation",
    "prepare@test",
    "init",
)
REPORTS = (
    "pipeline.txt",
    "metrics.json",
    "evaluation.json",
    "resume.json",
    "report.md",
    "loss.png",
    "learning_rate.png",
    "grad_norm.png",
)
ENVIRONMENT = ("torch", "python", "machine", "threads", *WATCHED)
SCORE_TOLERANCE = 0.01


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


def remove_outputs(repository: Path, lock: dict) -> None:
    """Every output the lock records, the ones git tracks included, so that every stage runs."""
    for stage in lock["stages"].values():
        for out in stage.get("outs", []):
            path = repository / out["path"]
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink(missing_ok=True)


def dvc(repository: Path, *args: str) -> str:
    environment = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    }
    done = subprocess.run(
        [Path(sys.executable).parent / "dvc", *args],
        cwd=repository,
        env=environment,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise SystemExit(f"dvc {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout


def environment_of(report: str) -> dict[str, str]:
    """The environment rows of a report.md's settings table."""
    rows = dict(re.findall(r"^\| ([^|]+?) \| ([^|]*?) \|$", report, flags=re.MULTILINE))
    return {name: rows.get(name, "") for name in ENVIRONMENT}


def outputs(lock: dict, stage: str) -> dict[str, str]:
    return {out["path"]: out["md5"] for out in lock["stages"].get(stage, {}).get("outs", [])}


def differing_outputs(committed: dict, reproduced: dict, stages) -> list[str]:
    """Every output of `stages` whose reproduced md5 is not the committed one."""
    problems = []
    for stage in stages:
        expected, actual = outputs(committed, stage), outputs(reproduced, stage)
        if not expected:
            problems.append(f"the committed dvc.lock records no outputs for stage {stage}")
        problems += [
            f"stage {stage} output {path}: committed md5 {md5}, reproduced {actual.get(path)}"
            for path, md5 in expected.items()
            if actual.get(path) != md5
        ]
    return problems


def score_differences(committed: dict, reproduced: dict, path: str = "") -> list[str]:
    """Every number of the committed metrics that the reproduced ones miss by more than 1%."""
    if isinstance(committed, dict):
        return [
            problem
            for key, value in committed.items()
            for problem in score_differences(value, reproduced.get(key), f"{path}.{key}")
        ]
    if isinstance(committed, bool) or not isinstance(committed, (int, float)):
        return [] if committed == reproduced else [f"{path}: {committed} and {reproduced}"]
    if not isinstance(reproduced, (int, float)):
        return [f"{path}: committed {committed}, reproduced {reproduced}"]
    if abs(reproduced - committed) > SCORE_TOLERANCE * abs(committed):
        return [f"{path}: committed {committed}, reproduced {reproduced}, more than 1% apart"]
    return []


def check(repository: Path) -> tuple[list[str], str]:
    """What failed, and how exactly the committed results were reproduced."""
    committed_lock_text = (repository / "dvc.lock").read_text()
    committed_lock = yaml.safe_load(committed_lock_text)
    committed_reports = {name: (repository / "reports" / name).read_bytes() for name in REPORTS}
    remove_outputs(repository, committed_lock)
    ran = dvc(repository, "repro")
    problems = [
        f"dvc repro did not run stage {stage}"
        for stage in committed_lock["stages"]
        if f"Running stage '{stage}'" not in ran
    ]
    resume = json.loads((repository / "reports/resume.json").read_text())
    if not resume.get("equal") or not resume.get("steps_compared"):
        problems.append(f"the resumed run differs from the uninterrupted one: {resume}")
    if "Running stage" in dvc(repository, "repro"):
        problems.append("a second dvc repro ran stages again")
    status = dvc(repository, "status")
    if "up to date" not in status:
        problems.append(f"dvc status is not clean after dvc repro:\n{status}")

    reproduced_lock = yaml.safe_load((repository / "dvc.lock").read_text())
    expected = environment_of(committed_reports["report.md"].decode())
    actual = environment_of((repository / "reports/report.md").read_text())
    if expected == actual:
        if (repository / "dvc.lock").read_text() != committed_lock_text:
            problems += differing_outputs(
                committed_lock, reproduced_lock, committed_lock["stages"]
            ) or ["dvc.lock differs from the committed one"]
        problems += [
            f"reports/{name} differs from the committed one"
            for name, data in committed_reports.items()
            if (repository / "reports" / name).read_bytes() != data
        ]
        return problems, "dvc.lock and the reports byte for byte as committed"
    problems += differing_outputs(committed_lock, reproduced_lock, EXACT_EVERYWHERE)
    problems += score_differences(
        json.loads(committed_reports["metrics.json"]),
        json.loads((repository / "reports/metrics.json").read_text()),
    )
    differences = ", ".join(
        f"{name} {expected[name] or '(none)'} there, {actual[name] or '(none)'} here"
        for name in ENVIRONMENT
        if expected[name] != actual[name]
    )
    return problems, (
        f"on another environment than the commit's ({differences}): the data stages and init "
        "as committed, the scores within 1%"
    )


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="zrodlo-reproduce-") as work:
        repository = Path(work)
        copy_repository(repository)
        problems, how = check(repository)
    if problems:
        print("reproduction check failed:\n- " + "\n- ".join(problems))
        raise SystemExit(1)
    print(
        f"reproduction check passed: every stage reran, {how}; the resumed run equals the "
        "uninterrupted one, dvc status is clean and a second dvc repro is a no-op"
    )


if __name__ == "__main__":
    main()

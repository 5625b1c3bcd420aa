"""The wheel installs: built from a copy of the checkout, installed into a fresh environment that has
no editable finder, every module of the package imports from it, and its console script runs a
small pipeline from documents to two steps of training.

The fresh environment takes the dependencies (torch and the rest) from this one's site-packages
through a path file: a folder a path file names is searched but its own path files are not run,
so this environment's editable finder never loads there, and only the wheel can give `zrodlo`.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = {"zrodlo.stages": ROOT / "stages", "zrodlo": ROOT / "src" / "zrodlo"}
pytestmark = pytest.mark.slow


def package_modules() -> list[str]:
    """Every module of the checkout's package by its dotted name."""
    found = set()
    for package, folder in FOLDERS.items():
        for path in folder.rglob("*.py"):
            parts = path.relative_to(folder).with_suffix("").parts
            found.add(".".join((package, *(parts[:-1] if parts[-1] == "__init__" else parts))))
    return sorted(found)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel built from a copy of the checkout, so that the build leaves nothing in it."""
    root = tmp_path_factory.mktemp("wheel")
    source = root / "source"
    skipped = shutil.ignore_patterns("*.egg-info", "__pycache__")
    for folder in ("src", "stages"):
        shutil.copytree(ROOT / folder, source / folder, ignore=skipped)
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
         "-w", root, source],
        check=True, capture_output=True, timeout=600,
    )  # fmt: skip
    (built,) = root.glob("zrodlo-*.whl")
    return built


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh environment with the wheel installed; returns its bin folder."""
    environment = tmp_path_factory.mktemp("fresh") / "venv"
    subprocess.run([sys.executable, "-m", "venv", environment], check=True, timeout=300)
    python = environment / "bin" / "python"
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    (Path(site) / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run(
        [python, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", wheel],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    return environment / "bin"


def test_the_wheel_holds_the_package_zrodlo_alone(wheel):
    """stages/ installs as zrodlo.stages: nothing named `stages` lands in site-packages."""
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        (info,) = {name.split("/")[0] for name in names if ".dist-info/" in name}
        scripts = archive.read(f"{info}/entry_points.txt").decode()
    assert {name.split("/")[0] for name in names} == {"zrodlo", info}
    assert "zrodlo/stages/cli.py" in names
    assert "zrodlo = zrodlo.stages.cli:main" in scripts


def test_every_module_imports_from_the_installed_wheel(installed):
    modules = package_modules()
    script = (
        "import importlib, json, sys\n"
        "print(json.dumps({m: importlib.import_module(m).__file__ for m in sys.argv[1:]}))"
    )
    completed = subprocess.run(
        [installed / "python", "-c", script, *modules],
        capture_output=True, text=True, timeout=300, cwd=installed,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr
    files = json.loads(completed.stdout)
    site = installed.parent / "lib"
    assert sorted(files) == modules
    assert [m for m, file in files.items() if not Path(file).is_relative_to(site)] == []


def test_the_installed_command_runs_a_small_pipeline(installed, tmp_path, write_documents):
    text = "the quick brown fox jumps over the lazy dog while five boxing wizards jump "
    texts = {f"doc-{i}": text[i:] + text[:i] for i in range(40)}
    write_documents(tmp_path / "documents.jsonl", texts)
    commands = [
        ("pipeline", "check", "--params", ROOT / "params.yaml"),
        ("documents", "assign", "--documents", "documents.jsonl", "--output", "splits.json",
         "--validation", "0.2", "--test", "0.2"),
        ("documents", "split", "--documents", "documents.jsonl", "--splits", "splits.json",
         "--output", "pools"),
        ("tokenizer", "fit", "--documents", "pools/train.jsonl", "--output", "tokenizer",
         "--kind", "bpe", "--vocab-size", "300"),
        ("corpus", "prepare", "--documents", "pools/train.jsonl", "--tokenizer", "tokenizer",
         "--output", "corpus"),
        ("model", "init", "--tokenizer", "tokenizer", "--output", "model", "--preset", "tiny",
         "--architecture", "llama", "--kv-heads", "2", "--positions", "16", "--dropout", "0.1",
         "--seed", "1"),
        ("model", "train", "--model", "model", "--corpus", "corpus", "--output", "run",
         "--steps", "2", "--context", "17", "--batch-size", "4", "--learning-rate", "0.001",
         "--beta1", "0.9", "--beta2", "0.99", "--epsilon", "1e-8", "--weight-decay", "0.1",
         "--decay-scope", "matrices", "--seed", "1", "--precision", "f32", "--device", "cpu"),
    ]  # fmt: skip
    for args in commands:
        completed = subprocess.run(
            [installed / "zrodlo", *map(str, args)],
            capture_output=True, text=True, timeout=300, cwd=tmp_path,
        )  # fmt: skip
        assert (completed.returncode, completed.stderr) == (0, ""), args
    assert (tmp_path / "run" / "step-2" / "model.safetensors").is_file()

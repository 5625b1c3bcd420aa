"""Shared fixtures: the real `zrodlo` command in a subprocess, directory snapshots, tiny documents."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

import pytest

# The tests' runs are shorter than TRAIN_FLAGS's schedule (2 warmup and 10 decay updates) on
# purpose, so that the rate changes at every step a resume continues; each would warn that its
# schedule ends after its last step. The commands they start, and these tests, hear nothing of it
# (a filter by the sentence: Python reads PYTHONWARNINGS before it can import a category of ours);
# test_train and test_api test that warning with the filter taken off.
SCHEDULE_FILTER = "ignore:the learning-rate schedule ends after update:UserWarning"
os.environ["PYTHONWARNINGS"] = SCHEDULE_FILTER

# The console script installed next to the interpreter running the tests.
ZRODLO = Path(sys.executable).parent / "zrodlo"

# A wide, colourless terminal, so that help text is one line per option and has no escape codes.
_ENV = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb"}

# An option, its metavar (none for a switch) and its description.
_OPTION_LINE = re.compile(r"^\*?\s*(--[a-z][a-z0-9-]*)\s+(?:(?:<\w+>|\[[a-z|-]+\])\s*)?(.*)$")
_ANNOTATION = re.compile(r"\[(required|default: [^\]]*)\]")


def _run_zrodlo(*args: object, cwd: Path) -> tuple[int, str, str]:
    completed = subprocess.run(
        [str(ZRODLO), *(str(arg) for arg in args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=_ENV,
        timeout=120,
        check=False,
    )
    return completed.returncode, completed.stdout, completed.stderr


def zrodlo_succeeds(*args: object, cwd: Path) -> str:
    """The real console script with one thread a process and gloo on the loopback, as the runs of
    several processes take it; it must exit 0 with nothing on stderr. Returns what it printed."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "GLOO_SOCKET_IFNAME": "lo"}
    done = subprocess.run(
        [str(ZRODLO), *(str(arg) for arg in args)], cwd=cwd, env=env, capture_output=True,
        text=True, timeout=300, check=False,
    )  # fmt: skip
    assert (done.returncode, done.stderr) == (0, ""), (args, done.stderr)
    return done.stdout


_SNAPSHOT_BYTES = 64 << 20  # files up to this size are compared by content


def _snapshot(root: Path) -> dict[str, object]:
    """Every name under `root` (hidden ones included) with its bytes; None for a directory.

    A file larger than 64 MiB (a test's sparse file of gigabytes) is held by its size and its
    modification and change times in nanoseconds instead: a write changes them, and reading the
    file whole, twice, cost such a test half a minute and gigabytes of memory."""

    def state(path: Path) -> object:
        info = path.lstat()
        if stat.S_ISLNK(info.st_mode):  # held by where it points: a link is never followed here
            return ("link", os.readlink(path))
        if stat.S_ISDIR(info.st_mode):
            return None
        if not stat.S_ISREG(info.st_mode):  # a FIFO, a socket: reading one could wait forever
            return ("special", info.st_mode)
        if info.st_size > _SNAPSHOT_BYTES:
            return ("stat", info.st_size, info.st_mtime_ns, info.st_ctime_ns)
        return path.read_bytes()

    return {path.relative_to(root).as_posix(): state(path) for path in sorted(root.rglob("*"))}


def _write_documents(path: Path, documents: Mapping[str, str] | Iterable[object]) -> Path:
    """Write a documents file: a mapping id -> text, or lines (a dict is dumped, a str kept as is)."""
    if isinstance(documents, Mapping):
        lines: list[object] = [{"id": i, "text": t} for i, t in documents.items()]
    else:
        lines = list(documents)
    with open(path, "w", encoding="utf-8") as handle:
        for line in lines:
            text = line if isinstance(line, str) else json.dumps(line, ensure_ascii=False)
            handle.write(text + "\n")
    return path


def _option_descriptions(help_text: str) -> dict[str, str]:
    """The options of a command's --help, each with its description (without [required] etc.)."""
    options = {}
    for line in help_text.splitlines():
        match = _OPTION_LINE.match(line.strip().strip("│").strip())
        if match:
            options[match.group(1)] = _ANNOTATION.sub("", match.group(2)).strip()
    return options


@pytest.fixture(scope="session")
def run_zrodlo() -> Callable[..., tuple[int, str, str]]:
    """`run_zrodlo(*args, cwd=...)` runs the real console script: (returncode, stdout, stderr)."""
    return _run_zrodlo


@pytest.fixture
def snapshot() -> Callable[[Path], dict[str, bytes | None]]:
    return _snapshot


@pytest.fixture(scope="session")
def write_documents() -> Callable[..., Path]:
    return _write_documents


@pytest.fixture
def option_descriptions() -> Callable[[str], dict[str, str]]:
    return _option_descriptions


@pytest.fixture
def assert_refused(tmp_path: Path) -> Callable[..., None]:
    """Run `zrodlo *args` in tmp_path and check the refusal: the sentence, exit 1, nothing written."""

    def check(*args: object, sentence: str) -> None:
        before = _snapshot(tmp_path)
        returncode, stdout, stderr = _run_zrodlo(*args, cwd=tmp_path)
        assert stderr == f"Error: {sentence}\n"
        assert returncode == 1
        assert stdout == ""
        assert _snapshot(tmp_path) == before

    return check


# model fixtures

# A model small enough that a training step takes milliseconds (with --dropout and --seed).
TINY_MODEL = (
    "--layers", "1", "--heads", "2", "--d-model", "16", "--d-ff", "32", "--positions", "16",
)  # fmt: skip
TRAINING_DOCUMENTS = {
    "fox": "the quick brown fox",
    "dog": "jumps over the lazy dog",
    "box": "pack my box",
}
HELD_OUT_DOCUMENTS = {"quartz": "sphinx of black quartz", "vow": "judge my vow"}


class TrainingData:
    """A tokenizer, a training and a held-out corpus and an initialised model, side by side."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.documents = root / "train.jsonl"
        self.held_out_documents = root / "held-out.jsonl"
        self.tokenizer = root / "tokenizer"
        self.corpus = root / "corpus"  # 59 tokens, 8 windows at --context 9
        self.held_out = root / "held-out"
        self.model = root / "model"  # TINY_MODEL, --dropout 0 --seed 7


@pytest.fixture(scope="session")
def training_data(tmp_path_factory: pytest.TempPathFactory) -> TrainingData:
    """Written once by the real commands: tokenizer fit, corpus prepare (twice), model init."""
    data = TrainingData(tmp_path_factory.mktemp("training-data"))
    _write_documents(data.documents, TRAINING_DOCUMENTS)
    _write_documents(data.held_out_documents, HELD_OUT_DOCUMENTS)
    tokenizer = ("--tokenizer", data.tokenizer)
    commands = [
        ("tokenizer", "fit", "--documents", data.documents, "--output", data.tokenizer),
        ("corpus", "prepare", "--documents", data.documents, *tokenizer, "--output", data.corpus),
        ("corpus", "prepare", "--documents", data.held_out_documents, *tokenizer, "--output",
         data.held_out),
        ("model", "init", *tokenizer, "--output", data.model, *TINY_MODEL, "--dropout", "0",
         "--seed", "7"),
    ]  # fmt: skip
    for args in commands:
        returncode, _, stderr = _run_zrodlo(*args, cwd=data.root)
        assert (returncode, stderr) == (0, ""), args
    return data


@pytest.fixture
def assert_refused_in_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Callable[..., None]:
    """`assert_refused` without a new process: `zrodlo.stages.cli.main`, the console script's entry, runs
    here, so torch is imported once for all the refusals of a test session.

    It checks the same: the sentence, exit 1, no stdout, nothing written under tmp_path, nor under
    the directories passed as `also`.
    """
    from zrodlo.stages.cli import main

    def check(*args: object, sentence: str, also: Iterable[Path] = ()) -> None:
        roots = [tmp_path, *also]
        before = [_snapshot(root) for root in roots]
        monkeypatch.chdir(tmp_path)
        monkeypatch.setattr(sys, "argv", ["zrodlo", *(str(arg) for arg in args)])
        monkeypatch.setattr(sys, "excepthook", sys.excepthook)  # typer replaces it
        capsys.readouterr()
        with pytest.raises(SystemExit) as exited:
            main()
        stdout, stderr = capsys.readouterr()
        assert stderr == f"Error: {sentence}\n"
        assert exited.value.code == 1
        assert stdout == ""
        assert [_snapshot(root) for root in roots] == before

    return check


def _small_plan(**changes: object):
    """A RunPlan for the tiny corpus of `training_data` (8 windows at context 9), with changes."""
    from zrodlo.training.plan import RunPlan

    values: dict[str, object] = {
        "steps": 3,
        "context": 9,
        "batch_size": 4,
        "learning_rate": 0.01,
        "beta1": 0.9,
        "beta2": 0.99,
        "epsilon": 1e-8,
        "weight_decay": 0.1,
        "decay_scope": "matrices",
        "seed": 11,
        "precision": "f32",
    }
    return RunPlan(**{**values, **changes})


@pytest.fixture(scope="session")
def small_plan() -> Callable[..., object]:
    return _small_plan


# resume fixtures

# `zrodlo model train` flags for runs that a resume must continue exactly: shuffle, micro-batches,
# warmup and decay, clipping and weight decay all on. None leaves a flag out; True is a switch.
TRAIN_FLAGS: dict[str, object] = {
    "--context": 9,
    "--batch-size": 4,
    "--micro-batch-size": 2,
    "--learning-rate": 0.01,
    "--beta1": 0.9,
    "--beta2": 0.99,
    "--epsilon": 1e-8,
    "--weight-decay": 0.1,
    "--decay-scope": "matrices",
    "--seed": 11,
    "--precision": "f32",
    "--warmup-steps": 2,
    "--decay-steps": 10,
    "--decay-shape": "cosine",
    "--min-learning-rate": 0.001,
    "--clip-norm": 0.5,
    "--shuffle": True,
    "--device": "cpu",
}
OTHER_DOCUMENTS = {"waltz": "waltz bad nymph for quick jigs vex", "zebra": "how vexingly quick"}


def _flag_args(flags: Mapping[str, object]) -> list[object]:
    args: list[object] = []
    for flag, value in flags.items():
        if value is True:
            args.append(flag)
        elif value is not None and value is not False:
            args += [flag, value]
    return args


def _train_args(
    model: Path, corpus: Path, output: Path, steps: int, flags: Mapping[str, object] | None = None
) -> list[object]:
    """`model train` arguments: TRAIN_FLAGS, with `flags` added or replacing them."""
    fixed = ["--model", model, "--corpus", corpus, "--output", output, "--steps", steps]
    return ["model", "train", *fixed, *_flag_args({**TRAIN_FLAGS, **(flags or {})})]


def _resume_args(
    checkpoint: Path,
    corpus: Path,
    output: Path,
    steps: int,
    flags: Mapping[str, object] | None = None,
) -> list[object]:
    """`checkpoint resume` arguments on the cpu, with `flags` added."""
    fixed = ["--checkpoint", checkpoint, "--corpus", corpus, "--output", output, "--steps", steps]
    return ["checkpoint", "resume", *fixed, *_flag_args({"--device": "cpu", **(flags or {})})]


@pytest.fixture(scope="session")
def train_args() -> Callable[..., list[object]]:
    return _train_args


@pytest.fixture(scope="session")
def resume_args() -> Callable[..., list[object]]:
    return _resume_args


@pytest.fixture(scope="session")
def start_zrodlo() -> Callable[..., subprocess.Popen]:
    """`start_zrodlo(*args, cwd=..., env={...})` starts the real console script without waiting
    for it; `env` adds to the environment `run_zrodlo` uses."""

    def start(*args: object, cwd: Path, env: Mapping[str, str] | None = None) -> subprocess.Popen:
        return subprocess.Popen(
            [str(ZRODLO), *(str(arg) for arg in args)],
            cwd=cwd,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env={**_ENV, **(env or {})},
        )

    return start


@pytest.fixture(scope="session")
def dropout_model(training_data: TrainingData, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """TINY_MODEL with --dropout 0.1 --attention-dropout 0.1 --seed 7, by the real model init."""
    model = tmp_path_factory.mktemp("dropout-model") / "model"
    returncode, _, stderr = _run_zrodlo(
        "model", "init", "--tokenizer", training_data.tokenizer, "--output", model, *TINY_MODEL,
        "--dropout", "0.1", "--attention-dropout", "0.1", "--seed", "7", cwd=model.parent,
    )  # fmt: skip
    assert (returncode, stderr) == (0, "")
    return model


@pytest.fixture(scope="session")
def large_model(training_data: TrainingData, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """About 1.6 million parameters: some 19 MB of weights and AdamW state to write and sync, so
    a kill can land inside a checkpoint write."""
    model = tmp_path_factory.mktemp("large-model") / "model"
    returncode, _, stderr = _run_zrodlo(
        "model", "init", "--tokenizer", training_data.tokenizer, "--output", model,
        "--layers", 2, "--heads", 4, "--d-model", 256, "--d-ff", 1024, "--positions", 16,
        "--dropout", 0.1, "--seed", 7, cwd=model.parent,
    )  # fmt: skip
    assert (returncode, stderr) == (0, ""), stderr
    return model


@pytest.fixture(scope="session")
def other_corpus(training_data: TrainingData, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """OTHER_DOCUMENTS prepared with training_data's tokenizer: the same vocabulary, other content."""
    root = tmp_path_factory.mktemp("other-corpus")
    documents = _write_documents(root / "other.jsonl", OTHER_DOCUMENTS)
    returncode, _, stderr = _run_zrodlo(
        "corpus", "prepare", "--documents", documents, "--tokenizer", training_data.tokenizer,
        "--output", root / "corpus", cwd=root,
    )  # fmt: skip
    assert (returncode, stderr) == (0, "")
    return root / "corpus"


@pytest.fixture(scope="session")
def trained_run(
    training_data: TrainingData, dropout_model: Path, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """A run of dropout_model over 6 steps with TRAIN_FLAGS and --checkpoint-every 2, by the real
    model train: step-2, step-4 and step-6. Copy it before changing anything in it."""
    run = tmp_path_factory.mktemp("trained-run") / "run"
    args = _train_args(dropout_model, training_data.corpus, run, 6, {"--checkpoint-every": 2})
    returncode, _, stderr = _run_zrodlo(*args, cwd=run.parent)
    assert (returncode, stderr) == (0, "")
    return run

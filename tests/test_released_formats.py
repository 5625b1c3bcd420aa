"""What Zrodlo 0.1.0 wrote (tests/fixtures/0.1.0), read by this version: the same refusals, word
for word, and its older checkpoint continued to the bytes of its newer one.

The fixtures never change. A version that cannot read or continue them fails here, unless it
ships a migration that these tests then run through.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

# In `make test`, not `make check`: the real commands read the released files.
pytestmark = pytest.mark.slow

FIXTURES = Path(__file__).parent / "fixtures" / "0.1.0"
RUN = FIXTURES / "run"
CORPUS = FIXTURES / "corpus"
RESUME = ("--eval-corpus", CORPUS, "--eval-every", 2, "--checkpoint-every", 2, "--device", "cpu")
TRAIN = (
    "--steps", 4, "--batch-size", 4, "--learning-rate", 0.01, "--beta1", 0.9, "--beta2", 0.99,
    "--epsilon", 1e-8, "--weight-decay", 0.1, "--decay-scope", "matrices", "--seed", 11,
    "--precision", "f32", "--device", "cpu",
)  # fmt: skip


def recorded_environment() -> dict:
    return json.loads((RUN / "step-2" / "trainer.json").read_text())["environment"]


def same_processor() -> bool:
    """Whether this machine rounds matrix products as the one that wrote the fixtures did: the
    promise of equal bytes holds on the same processor and CPU kernels (README)."""
    import torch

    from zrodlo.training.environment import environment

    here, there = environment(torch.device("cpu")), recorded_environment()
    return all(here[key] == there[key] for key in ("processor", "cpu_capability", "torch"))


def ledger(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "ledger.jsonl").read_text().splitlines()]


def assert_continues(ours: Path, theirs: Path, first: int, stderr: str) -> None:
    """`ours` made the steps of `theirs` from `first` on: the same windows and rates everywhere,
    and on the processor that wrote the fixtures the same records and checkpoint bytes."""
    mine, recorded = ledger(ours), [e for e in ledger(theirs) if e["step"] >= first]
    mine = [e for e in mine if e["step"] >= first]
    assert [(e["step"], e.get("windows"), e.get("learning_rate")) for e in mine] == [
        (e["step"], e.get("windows"), e.get("learning_rate")) for e in recorded
    ]
    if not same_processor():
        # Another processor rounds the matrix products its own way: a resume says so and goes
        # on, and the losses agree to rounding.
        for a, b in zip(mine, recorded, strict=True):
            if "loss" in a:
                assert float.fromhex(a["loss"]) == pytest.approx(float.fromhex(b["loss"]), 1e-5)
        return
    assert stderr == ""
    assert mine == recorded
    steps = [e["step"] for e in recorded if "checkpoint" in e]
    for step in steps:
        for name in ("model.safetensors", "optimizer.safetensors"):
            path = Path(f"step-{step}") / name
            assert (ours / path).read_bytes() == (theirs / path).read_bytes(), path


def test_the_older_checkpoint_continues_to_the_newer_ones_bytes(run_zrodlo, tmp_path):
    resumed = tmp_path / "resumed"
    returncode, _, stderr = run_zrodlo(
        "checkpoint", "resume", "--checkpoint", RUN / "step-2", "--corpus", CORPUS,
        "--output", resumed, "--steps", 4, *RESUME, cwd=tmp_path,
    )  # fmt: skip
    assert returncode == 0, stderr
    if not same_processor():
        assert stderr.startswith(f"warning: {RUN / 'step-2'} was written with "), stderr
    assert_continues(resumed, RUN, 3, stderr)


def test_the_model_directory_trains_into_the_same_run(run_zrodlo, tmp_path):
    """model/ as init wrote it, trained again with the flags the fixture's run.json records."""
    run = tmp_path / "run"
    returncode, _, stderr = run_zrodlo(
        "model", "train", "--model", FIXTURES / "model", "--corpus", CORPUS,
        "--output", run, "--context", 9, "--micro-batch-size", 2,
        "--warmup-steps", 2, "--decay-steps", 10, "--decay-shape", "cosine",
        "--min-learning-rate", 0.001, "--clip-norm", 0.5, "--shuffle", *RESUME[:4],
        "--checkpoint-every", 2, "--threads", 1, *TRAIN, cwd=tmp_path,
    )  # fmt: skip
    assert (returncode, stderr) == (0, "")
    assert json.loads((run / "run.json").read_text()) == json.loads((RUN / "run.json").read_text())
    assert_continues(run, RUN, 1, stderr)


def test_the_run_continues_in_its_own_directory_and_columns(run_zrodlo, tmp_path):
    """0.1.0's run directory cut back to step 2 and resumed there: its steps.csv and held_out.csv
    keep 0.1.0's columns (no bits per byte) and, on the processor that wrote them, its lines."""
    run = copy("run", tmp_path)
    shutil.rmtree(run / "step-4")
    returncode, _, stderr = run_zrodlo(
        "checkpoint", "resume", "--checkpoint", run / "step-2", "--corpus", CORPUS,
        "--output", run, "--steps", 4, *RESUME, cwd=tmp_path,
    )  # fmt: skip
    assert returncode == 0, stderr
    for name in ("steps.csv", "held_out.csv"):
        ours, theirs = (run / name).read_text(), (RUN / name).read_text()
        assert ours.splitlines()[0] == theirs.splitlines()[0]
        assert [len(line.split(",")) for line in ours.splitlines()] == [
            len(line.split(",")) for line in theirs.splitlines()
        ]
        if same_processor():
            assert ours == theirs
    assert_continues(run, RUN, 3, stderr)


def copy(name: str, into: Path) -> Path:
    target = into / name
    shutil.copytree(FIXTURES / name, target)
    return target


def test_the_refusals_of_resume_hold(assert_refused_in_process, tmp_path):
    checkpoint = RUN / "step-2"
    assert_refused_in_process(
        "checkpoint", "resume", "--checkpoint", checkpoint, "--corpus", CORPUS,
        "--output", tmp_path / "out", "--steps", 2, "--device", "cpu",
        sentence="--steps 2 is not past the 2 steps already done", also=[FIXTURES],
    )  # fmt: skip
    assert_refused_in_process(
        "checkpoint", "resume", "--checkpoint", RUN, "--corpus", CORPUS,
        "--output", tmp_path / "out", "--steps", 4, "--device", "cpu",
        sentence=f"{RUN} cannot be read; only a checkpoint can be resumed", also=[FIXTURES],
    )  # fmt: skip
    run = copy("run", tmp_path)
    assert_refused_in_process(
        "checkpoint", "resume", "--checkpoint", checkpoint, "--corpus", CORPUS,
        "--output", run, "--steps", 4, "--checkpoint-every", 2, "--device", "cpu",
        sentence=f"{run / 'step-4'} already exists; Zrodlo writes a new directory and "
        "overwrites nothing",
        also=[FIXTURES],
    )  # fmt: skip


def test_altered_files_are_refused_by_their_digests(assert_refused_in_process, tmp_path):
    run = copy("run", tmp_path)
    weights = run / "step-2" / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1
    weights.write_bytes(bytes(data))
    recorded = json.loads((run / "step-2" / "trainer.json").read_text())["files"]
    actual = hashlib.sha256(bytes(data)).hexdigest()
    assert_refused_in_process(
        "checkpoint", "resume", "--checkpoint", run / "step-2", "--corpus", CORPUS,
        "--output", tmp_path / "out", "--steps", 4, "--device", "cpu",
        sentence=f"{weights} has sha256 {actual}, and {run / 'step-2' / 'trainer.json'} records "
        f"{recorded['model.safetensors']}; the file was truncated or altered after the "
        "checkpoint was written",
        also=[FIXTURES],
    )  # fmt: skip
    corpus = copy("corpus", tmp_path)
    manifest = json.loads((corpus / "corpus.json").read_text())
    manifest["documents"] = 5
    (corpus / "corpus.json").write_text(json.dumps(manifest))
    assert_refused_in_process(
        "model", "evaluate", "--model", FIXTURES / "model", "--corpus", corpus,
        sentence=f"{corpus / 'corpus.json'} does not match the digest it was written with; it "
        "was edited after the corpus was prepared, so prepare the corpus again",
        also=[FIXTURES],
    )  # fmt: skip


def test_the_refusals_of_train_hold(assert_refused_in_process, tmp_path):
    assert_refused_in_process(
        "model", "train", "--model", FIXTURES / "model", "--corpus", CORPUS,
        "--output", tmp_path / "run", "--context", 100, *TRAIN,
        sentence="--context 100 makes the model read 99 tokens, more than the 16 positions its "
        "configuration states",
        also=[FIXTURES],
    )  # fmt: skip
    assert_refused_in_process(
        "corpus", "prepare", "--documents", FIXTURES / "documents.jsonl",
        "--tokenizer", FIXTURES / "tokenizer", "--output", CORPUS,
        sentence=f"{CORPUS} already exists; Zrodlo writes a new directory and overwrites nothing",
        also=[FIXTURES],
    )  # fmt: skip

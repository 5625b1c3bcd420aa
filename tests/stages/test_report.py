"""`zrodlo report` through the real command, on a tiny run trained and scored by the real commands."""

from __future__ import annotations

import csv
import json
import os
import re
import shlex
import shutil
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

# In `make test`, not `make check`: a real run and its report with every chart.
pytestmark = pytest.mark.slow

ZRODLO = Path(sys.executable).parent / "zrodlo"
ENV = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb"}
STEPS = 6
TRAIN = [
    "--steps", STEPS, "--context", 9, "--batch-size", 4, "--learning-rate", 0.01, "--beta1", 0.9,
    "--beta2", 0.99, "--epsilon", 1e-8, "--weight-decay", 0.0, "--decay-scope", "all",
    "--seed", 3, "--precision", "f32", "--warmup-steps", 2, "--device", "cpu",
]  # fmt: skip
SAMPLE = ["--sample-seed", 4, "--sample-prompt", "the ", "--sample-tokens", 40]


def zrodlo(*args: object, cwd: Path) -> str:
    """Run the real console script; it must succeed. Its stdout."""
    completed = subprocess.run(
        [str(ZRODLO), *(str(arg) for arg in args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=ENV,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    return completed.stdout


def report_args(root: Path, output: Path | None = None, **changes: object) -> list[object]:
    values = {
        "--run": root / "run",
        "--metrics": root / "reports" / "metrics.json",
        "--corpora": root / "corpus",
        "--model": root / "run" / f"step-{STEPS}",
        "--output": output or root / "reports",
        **{f"--{k.replace('_', '-')}": v for k, v in changes.items()},
    }
    return ["report", *(item for pair in values.items() for item in pair), *SAMPLE]


@pytest.fixture(scope="module")
def reported(training_data, tmp_path_factory) -> Path:
    """A directory laid out like the pipeline's (corpus/<pool>, run, reports) after model train
    with a held-out score every 2 steps, model evaluate --output and report."""
    root = tmp_path_factory.mktemp("report")
    shutil.copytree(training_data.corpus, root / "corpus" / "train")
    shutil.copytree(training_data.held_out, root / "corpus" / "validation")
    zrodlo(
        "model", "train", "--model", training_data.model, "--corpus", "corpus/train",
        "--output", "run", *TRAIN, "--eval-corpus", "corpus/validation", "--eval-every", 2,
        cwd=root,
    )  # fmt: skip
    (root / "reports").mkdir()
    zrodlo(
        "model", "evaluate", "--model", f"run/step-{STEPS}", "--corpus", "corpus/validation",
        "--corpus", "corpus/train", "--baseline", "corpus/train", "--output",
        "reports/metrics.json", cwd=root,
    )  # fmt: skip
    stdout = zrodlo(*report_args(Path(".")), cwd=root)
    assert stdout == (
        "wrote reports/report.md, reports/loss.png, reports/learning_rate.png, "
        "reports/grad_norm.png and reports/tokens_per_second.png\n"
    )
    return root


def zrodlo_in_process(*args: object) -> str:
    """Run a command of the console script in this process (torch is imported once for all of
    them); it must succeed. Its stdout."""
    from typer.testing import CliRunner

    from zrodlo.stages.cli import app

    result = CliRunner().invoke(app, [str(arg) for arg in args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.stdout


CHARTS = ["grad_norm.png", "learning_rate.png", "loss.png", "tokens_per_second.png"]


def check_png(path: Path) -> None:
    """A valid 800 x 480 PNG (every chunk's CRC checked) holding no text, date or version."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    offset, kinds = 8, []
    while offset < len(data):
        (length,) = struct.unpack(">I", data[offset : offset + 4])
        kind, body = data[offset + 4 : offset + 8], data[offset + 8 : offset + 8 + length]
        assert data[offset + 8 + length : offset + 12 + length] == struct.pack(
            ">I", zlib.crc32(kind + body)
        )
        kinds.append(kind)
        if kind == b"IHDR":
            assert struct.unpack(">II", body[:8]) == (800, 480)
        offset += 12 + length
    assert kinds[0] == b"IHDR" and kinds[-1] == b"IEND" and b"IDAT" in kinds
    assert not {b"tEXt", b"zTXt", b"iTXt", b"tIME"} & set(kinds)


def test_report_writes_the_page_and_every_chart(reported):
    # The run directory holds timing.csv (no --timing): the speed chart comes with the others.
    names = sorted(p.name for p in (reported / "reports").iterdir())
    assert names == sorted([*CHARTS, "metrics.json", "report.md"])
    for name in CHARTS:
        check_png(reported / "reports" / name)


def test_the_page_holds_the_runs_records_and_scores(reported):
    page = (reported / "reports" / "report.md").read_text(encoding="utf-8")
    metrics = json.loads((reported / "reports" / "metrics.json").read_text())
    with open(reported / "run" / "steps.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    manifest = json.loads((reported / "corpus" / "train" / "corpus.json").read_text())
    assert page.startswith(f"# Run report: run/step-{STEPS}\n")
    assert f"| train | {manifest['documents']} | {manifest['characters']} |" in page
    assert f"{metrics['model']['parameters']:,} parameters." in page
    assert f"| steps | {STEPS} |" in page
    assert f"| tokens seen (targets) | {sum(int(r['targets']) for r in rows):,} |" in page
    held_out, bits = float(rows[-1]["eval_loss"]), float(rows[-1]["eval_bits_per_byte"])
    assert f"| last held-out loss | {held_out:.4f} (step {STEPS}, {bits:.4f} bits/byte) |" in page
    validation = metrics["corpora"]["validation"]
    ratio = validation["loss"] / validation["bigram_loss"]
    assert f"| validation | {validation['loss']:.4f} | {validation['perplexity']:.3f} |" in page
    assert f"Validation loss over the bigram baseline: {ratio:.3f} " in page
    assert "![Training and held-out loss](loss.png)" in page
    assert "![Learning rate](learning_rate.png)" in page
    assert "![Gradient norm](grad_norm.png)" in page
    assert "![Training speed](tokens_per_second.png)" in page


def test_the_sample_is_the_text_of_the_sample_command_the_page_lists(reported, monkeypatch):
    page = (reported / "reports" / "report.md").read_text(encoding="utf-8")
    sample = re.search(r"```text\n(.*?)\n```\n", page, flags=re.DOTALL).group(1)
    assert sample.startswith("the ")
    command = next(line for line in page.splitlines() if line.startswith("zrodlo model sample"))
    monkeypatch.chdir(reported)
    assert zrodlo_in_process(*shlex.split(command)[1:]) == sample + "\n"


def test_a_second_report_replaces_the_files_with_the_same_bytes(reported, tmp_path):
    output = tmp_path / "again"
    shutil.copytree(reported / "reports", output)
    (output / "report.md").write_text("old")
    zrodlo_in_process(*report_args(reported, output))
    for name in CHARTS:
        assert (output / name).read_bytes() == (reported / "reports" / name).read_bytes()
    # The page names the paths it was given (absolute here, relative the first time) and no
    # other difference.
    first = (reported / "reports" / "report.md").read_text(encoding="utf-8")
    again = (output / "report.md").read_text(encoding="utf-8")
    assert again.replace(str(output), "reports").replace(f"{reported}/", "") == first
    assert sorted(p.name for p in output.iterdir()) == sorted(
        [*CHARTS, "metrics.json", "report.md"]
    )


def test_report_refuses_a_model_at_a_step_the_run_did_not_record(
    reported, tmp_path, assert_refused_in_process
):
    run = tmp_path / "short-run"
    run.mkdir()
    lines = (reported / "run" / "steps.csv").read_text().splitlines(keepends=True)
    (run / "steps.csv").write_text("".join(lines[:3]))
    sentence = (
        f"{run / 'steps.csv'} records steps 1 to 2, and {reported / 'run' / f'step-{STEPS}'} is at "
        f"step {STEPS}; --run must be the run the model was trained in"
    )
    assert_refused_in_process(
        *report_args(reported, tmp_path / "out", run=run), sentence=sentence, also=[reported]
    )


def test_report_refuses_missing_scores(reported, tmp_path, assert_refused_in_process):
    missing = tmp_path / "metrics.json"
    sentence = f"{missing} does not exist; zrodlo model evaluate --output writes evaluation scores"
    assert_refused_in_process(
        *report_args(reported, tmp_path / "out", metrics=missing),
        sentence=sentence,
        also=[reported],
    )


def test_report_refuses_scores_of_another_model(reported, tmp_path, assert_refused_in_process):
    metrics = json.loads((reported / "reports" / "metrics.json").read_text())
    metrics["model"]["parameters"] += 1
    other = tmp_path / "other.json"
    other.write_text(json.dumps(metrics))
    model = reported / "run" / f"step-{STEPS}"
    sentence = (
        f"{other} scores a model of {metrics['model']['parameters']} parameters, and {model} has "
        f"{metrics['model']['parameters'] - 1}; score {model} with zrodlo model evaluate "
        f"--output {other}"
    )
    assert_refused_in_process(
        *report_args(reported, tmp_path / "out", metrics=other), sentence=sentence, also=[reported]
    )

"""The run report: records read back from fixture files, and every number of them on the page."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from zrodlo.evaluation.markdown import evaluate_command, render
from zrodlo.evaluation.report import write_charts, write_report
from zrodlo.evaluation.run_records import read_metrics, read_pools, read_steps
from zrodlo.storage.refusal import Refusal

STEPS_CSV = """step,loss,learning_rate,grad_norm,targets,eval_loss,eval_bits_per_byte
1,4.25,0.001,1.5,120,,
2,3.5,0.002,1.25,118,3.75,5.5
3,3.0,0.002,1.0,121,,
4,2.75,0.001,0.75,119,2.875,4.25
"""
# steps.csv as releases up to 0.1.0 wrote it: no held-out bits per byte.
STEPS_CSV_0_1 = """step,loss,learning_rate,grad_norm,targets,eval_loss
1,4.25,0.001,1.5,120,
2,3.5,0.002,1.25,118,3.75
"""
MANIFESTS = {
    "validation": {"documents": 30, "characters": 12345, "tokens": 12405, "targets": 12375,
                   "unknown_tokens": 17, "unknown_rate": 0.0013777, "corpus_digest": "b" * 64},
    "train": {"documents": 270, "characters": 1234567, "tokens": 1235107, "targets": 1234837,
              "unknown_tokens": 0, "unknown_rate": 0.0, "corpus_digest": "a" * 64},
    "test": {"documents": 29, "characters": 11111, "tokens": 11169, "targets": 11140,
             "unknown_tokens": 5, "unknown_rate": 0.00045, "corpus_digest": "c" * 64},
}  # fmt: skip
METRICS = {
    "model": {"path": "run/step-4", "parameters": 3792, "vocab_size": 40, "context": 17,
              "baseline": "corpus/train"},
    "corpora": {
        "validation": {"loss": 2.5, "perplexity": 12.182493960703473,
                       "bits_per_character": 3.6067376022224087, "targets": 12375, "windows": 800,
                       "documents": 30, "unknown_tokens": 17, "unknown_rate": 0.0013777,
                       "corpus_digest": "b" * 64, "bigram_loss": 2.0},
        "train": {"loss": 2.25, "perplexity": 9.487735836358526,
                  "bits_per_character": 3.2460638420001677, "targets": 1234837, "windows": 80000,
                  "documents": 270, "unknown_tokens": 0, "unknown_rate": 0.0,
                  "corpus_digest": "a" * 64, "bigram_loss": 1.5},
    },
}  # fmt: skip
CONFIG = {"vocab_size": 40, "positions": 16, "d_model": 16, "layers": 1, "heads": 2, "d_ff": 32,
          "dropout": 0.0, "attention_dropout": 0.0}  # fmt: skip
TRAINER = {"seed": 5, "generator": "chacha20-rfc8439/zrodlo-draws-v1",
           "hyperparameters": {"learning_rate": 0.002, "batch_size": 4, "clip_norm": None},
           "environment": {"torch": "2.13.0", "device": "cpu"}, "step": 4}  # fmt: skip


@pytest.fixture
def records(tmp_path: Path) -> Path:
    """A run's steps.csv, three prepared corpora's manifests and evaluation scores."""
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "steps.csv").write_text(STEPS_CSV)
    for name, manifest in MANIFESTS.items():
        (tmp_path / "corpus" / name).mkdir(parents=True)
        (tmp_path / "corpus" / name / "corpus.json").write_text(json.dumps(manifest))
    (tmp_path / "corpus" / "notes").mkdir()  # no corpus.json: not a corpus
    (tmp_path / "metrics.json").write_text(json.dumps(METRICS))
    return tmp_path


def markdown(root: Path, sample: str = "the cat sat") -> str:
    pools = read_pools(root / "corpus")
    metrics = read_metrics(root / "metrics.json")
    return render(
        pools=pools,
        steps=read_steps(root / "run"),
        metrics=metrics,
        metrics_path=Path("reports/metrics.json"),
        model_path=Path("run/step-4"),
        config=CONFIG,
        parameters=3792,
        trainer=TRAINER,
        sample=sample,
        sample_note="Drawn with seed 5.",
        charts=["loss.png", "learning_rate.png", "grad_norm.png"],
        commands=[
            evaluate_command(metrics, Path("reports/metrics.json"), pools),
            ["zrodlo", "model", "sample", "--prompt", "the cat"],
        ],
    )


def test_pools_come_train_validation_test_with_their_manifests(records):
    pools = read_pools(records / "corpus")
    assert [p.name for p in pools] == ["train", "validation", "test"]
    assert (pools[1].documents, pools[1].characters, pools[1].unknown_tokens) == (30, 12345, 17)


def test_steps_are_read_by_column_with_nan_where_no_held_out_score(records):
    steps = read_steps(records / "run")
    assert steps.step == [1, 2, 3, 4]
    assert steps.tokens_seen == 120 + 118 + 121 + 119
    assert math.isnan(steps.eval_loss[0]) and steps.eval_loss[1] == 3.75
    assert steps.last_held_out() == (4, 2.875, 4.25)
    assert steps.through(2).targets == [120, 118]
    assert steps.through(3).last_held_out() == (2, 3.75, 5.5)


def test_a_steps_csv_of_a_release_up_to_0_1_reads_without_bits_per_byte(records):
    (records / "run" / "steps.csv").write_text(STEPS_CSV_0_1)
    steps = read_steps(records / "run")
    assert steps.step == [1, 2] and all(math.isnan(v) for v in steps.eval_bits_per_byte)
    held_out = steps.last_held_out()
    assert held_out is not None and held_out[:2] == (2, 3.75) and math.isnan(held_out[2])
    assert "| last held-out loss | 3.7500 (step 2) |" in markdown(records)


def test_the_data_table_holds_each_pools_sizes_and_unknown_rate(records):
    page = markdown(records)
    assert "| train | 270 | 1,234,567 | 1,235,107 | 1,234,837 | 0 | 0.000% |" in page
    assert "| validation | 30 | 12,345 | 12,405 | 12,375 | 17 | 0.138% |" in page
    assert "| test | 29 | 11,111 | 11,169 | 11,140 | 5 | 0.045% |" in page
    assert page.index("| train |") < page.index("| validation |") < page.index("| test |")


def test_the_model_and_training_sections_hold_the_size_steps_and_tokens_seen(records):
    page = markdown(records)
    assert "3,792 parameters." in page
    assert "| d_model | 16 |" in page and "| attention_dropout | 0.0 |" in page
    assert "| steps | 4 |" in page
    assert "| tokens seen (targets) | 478 |" in page
    assert "| last training loss | 2.7500 |" in page
    assert "| last held-out loss | 2.8750 (step 4, 4.2500 bits/byte) |" in page
    assert "| seed | 5 |" in page and "| learning_rate | 0.002 |" in page
    assert "| clip_norm | null |" in page and "| torch | 2.13.0 |" in page


def test_the_scores_hold_the_final_numbers_and_the_ratio_to_the_bigram_baseline(records):
    page = markdown(records)
    # Scores as releases up to 0.1.0 wrote them: no bits per byte, an empty cell.
    assert "| validation | 2.5000 | 12.182 | 3.6067 |  | 2.0000 | 1.250 | 12,375 | 0.138% |" in page
    assert "| train | 2.2500 | 9.488 | 3.2461 |  | 1.5000 | 1.500 | 1,234,837 | 0.000% |" in page
    assert "Validation loss over the bigram baseline: 1.250 (2.5000 against 2.0000 nats)" in page


def test_charts_sample_and_commands_are_on_the_page(records):
    page = markdown(records)
    assert "![Training and held-out loss](loss.png)" in page
    assert "![Learning rate](learning_rate.png)" in page
    assert "![Gradient norm](grad_norm.png)" in page
    assert "Training speed" not in page
    assert "Drawn with seed 5.\n\n```text\nthe cat sat\n```\n" in page
    assert (
        "zrodlo model evaluate --model run/step-4 --corpus corpus/validation --corpus corpus/train "
        "--baseline corpus/train --context 17 --output reports/metrics.json"
    ) in page.replace(str(records) + "/", "")
    assert "zrodlo model sample --prompt 'the cat'\n" in page


def test_a_sample_holding_backticks_cannot_close_its_fence(records):
    page = markdown(records, sample="a ```` b")
    assert "`````text\na ```` b\n`````\n" in page


def test_a_page_without_a_validation_corpus_has_no_ratio_sentence(records):
    metrics = json.loads((records / "metrics.json").read_text())
    del metrics["corpora"]["validation"]
    (records / "metrics.json").write_text(json.dumps(metrics))
    assert "Validation loss over" not in markdown(records)


def test_charts_and_report_are_written_whole(records):
    output = records / "reports"
    output.mkdir()
    (output / "report.md").write_text("old")
    charts = write_charts(read_steps(records / "run"), output)
    write_report(output / "report.md", "# new\n")
    assert [chart.name for chart in charts] == ["loss.png", "learning_rate.png", "grad_norm.png"]
    assert all(chart.read_bytes().startswith(b"\x89PNG\r\n\x1a\n") for chart in charts)
    assert (output / "report.md").read_text() == "# new\n"
    assert sorted(p.name for p in output.iterdir()) == [
        "grad_norm.png",
        "learning_rate.png",
        "loss.png",
        "report.md",
    ]


def test_a_run_without_steps_csv_is_refused(tmp_path):
    with pytest.raises(Refusal) as refused:
        read_steps(tmp_path)
    assert refused.value.sentence == (
        f"{tmp_path} holds no steps.csv; a run directory is written by zrodlo model train"
    )


def test_a_steps_csv_with_another_header_or_a_bad_line_is_refused(records):
    file = records / "run" / "steps.csv"
    file.write_text("step,loss\n1,2.0\n")
    with pytest.raises(Refusal) as refused:
        read_steps(records / "run")
    assert refused.value.sentence == (
        f"{file} starts with 'step,loss'; a run's steps.csv starts with "
        "'step,loss,learning_rate,grad_norm,targets,eval_loss,eval_bits_per_byte'"
    )
    file.write_text(STEPS_CSV + "5,x,0.1,1.0,3,,\n")
    with pytest.raises(Refusal, match="line 6 does not read as a step record"):
        read_steps(records / "run")
    file.write_text(STEPS_CSV + "5,2.5,0.1,1.0,3,\n")
    with pytest.raises(Refusal) as refused:
        read_steps(records / "run")
    assert refused.value.sentence == (
        f"{file} line 6 does not read as a step record: it has 6 fields, and its header 7"
    )


def test_missing_or_malformed_scores_are_refused(records):
    with pytest.raises(Refusal) as refused:
        read_metrics(records / "none.json")
    assert refused.value.sentence == (
        f"{records / 'none.json'} does not exist; zrodlo model evaluate --output writes "
        "evaluation scores"
    )
    (records / "metrics.json").write_text(json.dumps({"model": {}, "corpora": {"x": {}}}))
    with pytest.raises(Refusal, match="corpus x has no number loss"):
        read_metrics(records / "metrics.json")


def test_a_directory_without_corpora_is_refused(tmp_path):
    with pytest.raises(Refusal) as refused:
        read_pools(tmp_path)
    assert refused.value.sentence == (
        f"{tmp_path} holds no prepared corpus (no <pool>/corpus.json); "
        "corpora are written by zrodlo corpus prepare"
    )


def test_a_manifest_without_a_count_is_refused(records):
    file = records / "corpus" / "test" / "corpus.json"
    file.write_text(json.dumps({"documents": 1}))
    with pytest.raises(Refusal) as refused:
        read_pools(records / "corpus")
    assert (
        refused.value.sentence == f"{file} does not load as a corpus manifest: it has no characters"
    )

"""`--timing`: a run's wall-clock record written outside its run directory, so that what a
pipeline hashes (the run directory) holds only what the run's plan determines."""

from __future__ import annotations

import csv

import pytest

# In `make test`, not `make check`: real trainings and resumes with their step times elsewhere.
pytestmark = pytest.mark.slow


def rows(path):
    with open(path, newline="") as handle:
        return list(csv.reader(handle))


def test_the_timing_goes_to_its_own_file_and_a_resume_continues_it(
    trained_run, training_data, dropout_model, train_args, resume_args, run_zrodlo, tmp_path
):
    run, timing = tmp_path / "run", tmp_path / "timing.csv"
    flags = {"--checkpoint-every": 2, "--timing": timing}
    returncode, _, stderr = run_zrodlo(
        *train_args(dropout_model, training_data.corpus, run, 6, flags), cwd=tmp_path
    )
    assert (returncode, stderr) == (0, ""), stderr
    assert not (run / "timing.csv").exists()
    assert [row[0] for row in rows(timing)] == ["step", "1", "2", "3", "4", "5", "6"]
    # The run directory is the one a run without --timing writes, less its timing.csv.
    names = sorted(p.name for p in run.iterdir())
    assert names == sorted(p.name for p in trained_run.iterdir() if p.name != "timing.csv")
    for name in ("steps.csv", "ledger.jsonl", "held_out.csv", "run.json"):
        if (trained_run / name).exists():
            assert (run / name).read_bytes() == (trained_run / name).read_bytes(), name

    # Continued in its own directory from step 2, the run cuts the timing back to step 2 as it
    # does its records, and goes on from there.
    args = resume_args(run / "step-2", training_data.corpus, run, 6, flags)
    (run / "step-4").rename(tmp_path / "old-step-4")
    (run / "step-6").rename(tmp_path / "old-step-6")
    returncode, _, stderr = run_zrodlo(*args, cwd=tmp_path)
    assert (returncode, stderr) == (0, ""), stderr
    assert [row[0] for row in rows(timing)] == ["step", "1", "2", "3", "4", "5", "6"]
    assert not (run / "timing.csv").exists()


def test_a_timing_file_that_cannot_be_written_is_refused_before_anything_is_written(
    training_data, dropout_model, train_args, assert_refused, tmp_path
):
    run = tmp_path / "run"
    (tmp_path / "times").mkdir()
    args = train_args(dropout_model, training_data.corpus, run, 2, {"--timing": tmp_path / "times"})
    assert_refused(
        *args,
        sentence=f"--timing {tmp_path / 'times'} is a directory; it names the file the step "
        "times go to",
    )
    (tmp_path / "no").write_text("mine")
    under_a_file = tmp_path / "no" / "timing.csv"
    args = train_args(dropout_model, training_data.corpus, run, 2, {"--timing": under_a_file})
    assert_refused(
        *args,
        sentence=f"{under_a_file} cannot be written: {tmp_path / 'no'} is not a directory, so it "
        "cannot hold the output",
    )


def test_a_timing_file_gets_the_folders_it_lacks(
    training_data, dropout_model, train_args, run_zrodlo, tmp_path
):
    timing = tmp_path / "logs" / "train" / "timing.csv"
    args = train_args(
        dropout_model, training_data.corpus, tmp_path / "run", 2, {"--timing": timing}
    )
    returncode, _, stderr = run_zrodlo(*args, cwd=tmp_path)
    assert (returncode, stderr) == (0, "")
    assert [row[0] for row in rows(timing)] == ["step", "1", "2"]

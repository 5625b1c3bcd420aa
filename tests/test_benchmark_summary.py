"""benchmarks/README.md is what benchmarks/summary.py writes from reports/bench/: no figure on it
was copied by hand, and none is stale. Every report has a declared table, and a figure a table
declares but its report lacks stops the page instead of leaving a row out."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def summary():
    """benchmarks/summary.py as a module, importing benchmarks/tables.py beside it as it runs."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        yield importlib.import_module("summary")
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))


def test_the_benchmark_page_is_written_from_the_reports():
    done = subprocess.run(
        [sys.executable, ROOT / "benchmarks" / "summary.py", "--check"], capture_output=True
    )
    assert done.returncode == 0, "run .venv/bin/python benchmarks/summary.py"


def test_every_report_has_a_declared_table_and_a_script(summary):
    reports = {path.stem for path in (ROOT / "reports" / "bench").glob("*.json")}
    assert reports, "no reports in reports/bench/"
    assert reports - summary.TABLES.keys() == set(), "declare a table in benchmarks/tables.py"
    assert reports - summary.SCRIPTS.keys() == set(), "name the script in SCRIPTS"


def test_a_report_without_a_table_is_refused(summary):
    with pytest.raises(summary.ReportError, match="no table"):
        summary.section("a_new_benchmark", {"benchmark": "something new"})


def test_a_declared_path_missing_from_its_report_is_refused(summary):
    from tables import Row, Table

    declared = Table("Part", "Writing", "Writing against raw I/O.", (
        Row("Write", "rates/zrodlo", "MB/s", "raw write", "rates/raw", "share/write", "raw"),
    ))  # fmt: skip
    report = {"rates": {"zrodlo": 940.0, "raw": 1000.0}, "share": {}}
    with pytest.raises(summary.ReportError, match="share/write"):
        summary.table(declared, report)
    report["share"]["write"] = 0.94
    assert summary.table(declared, report)[-1] == (
        "| Write | 940 MB/s | raw write | 1,000 MB/s | 0.94 of raw |"
    )
    # A declared table is held to its report too: here the evaluation's without its whole runs.
    with pytest.raises(summary.ReportError, match="runs/whole"):
        summary.table(summary.TABLES["evaluation"], {"runs": {"sampled": {"scoring_seconds": 2}}})


def test_a_null_figure_needs_its_meaning_declared(summary):
    from tables import Row, Table

    silent = Table("Part", "Loss", "Seconds to a loss.", (Row("To 1.6", "to/1.6", "s"),))
    with pytest.raises(summary.ReportError, match="null"):
        summary.table(silent, {"to": {"1.6": None}})
    said = Table("Part", "Loss", "Seconds to a loss.", (Row("To 1.6", "to/1.6", "s", null="no"),))
    assert summary.table(said, {"to": {"1.6": None}})[-1] == "| To 1.6 | no | — | — | — |"

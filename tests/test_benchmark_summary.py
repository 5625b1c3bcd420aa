"""benchmarks/README.md is what benchmarks/summary.py writes from reports/bench/: no figure on it
was copied by hand, and none is stale."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_benchmark_page_is_written_from_the_reports():
    done = subprocess.run(
        [sys.executable, ROOT / "benchmarks" / "summary.py", "--check"], capture_output=True
    )
    assert done.returncode == 0, "run .venv/bin/python benchmarks/summary.py"

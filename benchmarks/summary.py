"""benchmarks/README.md, written from the figures the benchmarks wrote to reports/bench/: each
report's command, what it measures, and its ratios and rates, so that no figure is copied by hand.

    .venv/bin/python benchmarks/summary.py           # writes benchmarks/README.md
    .venv/bin/python benchmarks/summary.py --check   # exit 1 if README.md is not what it writes
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REPORTS = ROOT / "reports" / "bench"
README = Path(__file__).resolve().parent / "README.md"
# The script that writes each report, by the report's name.
SCRIPTS = {
    "prepare": "prepare.py --megabytes 2000",
    "corpus_open": "corpus_open.py",
    "checkpoint_io": "checkpoint_io.py --repeats 9",
    "train": "train.py",
    "dropout": "dropout.py",
    "resume": "resume.py",
    "distributed": "distributed.py",
    "scale": "scale.py",
    "mask_kernel_cpu": "mask_kernel.py",
    "gpu": "gpu.py",
    "presets": "presets.py",
    "evaluation": "evaluation.py",
    "bpe": "bpe.py",
    "tokenizers": "tokenizers_compared.py",
    "sampling": "sampling.py",
    "llama_step": "llama_step.py",
}
# The figures worth a reader's eye: ratios measured side by side, rates, peak memory, and what a
# model size costs a step and how soon it reaches a loss.
FIGURE = re.compile(
    r"(over|share|speedup|per_second|per_step|ratio|of_medians|peak|cores_at_hand|equal|parameters|"
    r"seconds_to|loss_at_end|wall_seconds)",
    re.IGNORECASE,
)
LEFT_OUT = re.compile(r"(samples|machine|median_paired|load_average|seconds\.)")


def figures(value: object, path: str = "") -> list[tuple[str, object]]:
    """The report's figures as (dotted name, value), in the report's own order."""
    if isinstance(value, dict):
        found = []
        for key, inner in value.items():
            found += figures(inner, f"{path}.{key}" if path else str(key))
        return found
    if isinstance(value, list):
        found = []
        for index, inner in enumerate(value):
            label = inner.get("size", index) if isinstance(inner, dict) else index
            found += figures(inner, f"{path}[{label}]")
        return found
    if isinstance(value, bool | int | float) and FIGURE.search(path) and not LEFT_OUT.search(path):
        return [(path, value)]
    return []


def shown(value: object) -> str:
    if isinstance(value, float):
        return f"{value:,.4g}" if abs(value) < 1e4 else f"{value:,.0f}"
    return str(value)


def page() -> str:
    lines = [
        "# Benchmarks",
        "",
        "Scripts here measure Zrodlo against plain references side by side in one run and write",
        "their figures to `reports/bench/`. This page is written from those files by",
        "`benchmarks/summary.py`; rerun a script alone on an idle machine, then the summary.",
        "",
    ]
    for report in sorted(REPORTS.glob("*.json")):
        data = json.loads(report.read_text())
        name = report.stem
        script = SCRIPTS.get(name, f"{name}.py")
        lines += [f"## {name}", "", data.get("benchmark", ""), ""]
        lines += [f"`.venv/bin/python benchmarks/{script}` → `reports/bench/{report.name}`", ""]
        found = figures(data)
        if found:
            lines += ["| figure | value |", "|---|---:|"]
            lines += [f"| {key} | {shown(value)} |" for key, value in found]
            lines.append("")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check README.md is current")
    written = page()
    if parser.parse_args().check:
        return 0 if README.read_text() == written else 1
    README.write_text(written)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""benchmarks/README.md, written from the figures the benchmarks wrote to reports/bench/: for each
report, what it compares, the command that writes it, and the table benchmarks/tables.py declares
for it, so that no figure on the page is copied by hand.

    .venv/bin/python benchmarks/summary.py           # writes benchmarks/README.md
    .venv/bin/python benchmarks/summary.py --check   # exit 1 if README.md is not what it writes

A report without a declared table, or a declared figure its report lacks, stops the page with the
reason: a new benchmark must get a table, and a renamed figure a new path.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path

from recipe_tables import RECIPE_SCRIPTS
from table_form import QUOTIENT, Row, Table
from tables import TABLES

ROOT = Path(__file__).resolve().parent.parent
REPORTS = ROOT / "reports" / "bench"
README = Path(__file__).resolve().parent / "README.md"
# The script that writes each report, with the flags it was run with, by the report's name.
SCRIPTS = {
    "prepare": "prepare.py --megabytes 2000",
    "corpus_open": "corpus_open.py",
    "checkpoint_io": "checkpoint_io.py --repeats 9",
    "train": "train.py",
    "lora": "lora.py",
    "lora_qwen3_0.6b": "lora.py --model qwen3_0.6b --report lora_qwen3_0.6b",
    "lora_gemma3_270m": "lora.py --model gemma3_270m --report lora_gemma3_270m",
    "lora_bf16_base": "lora.py --model qwen3_1.7b --base bf16 --repeats 3 --memory-steps 2 "
    "--rounds 1 --report lora_bf16_base",
    "dropout": "dropout.py",
    "resume": "resume.py",
    "distributed": "distributed.py",
    "scale": "scale.py",
    "mask_kernel_cpu": "mask_kernel.py",
    "gpu": "gpu.py",
    "presets": "presets.py",
    "evaluation": "evaluation.py",
    "bpe": "bpe.py",
    "bpe_fit": "bpe_fit.py --before 34316b5",
    "tokenizers": "tokenizers_compared.py",
    "sampling": "sampling.py",
    "llama_step": "llama_step.py",
    "hub_models": "hub_models.py",
    "recent_models": "hub_models.py --models gemma3_270m,qwen3_0.6b --report recent_models",
    "quality_for_time": "quality_for_time.py",
    **RECIPE_SCRIPTS,
    "cpu_bf16": "cpu_bf16.py",
    "cpu_bf16_amx": "cpu_bf16.py --report cpu_bf16_amx",
}
NO_FIGURE = "—"


class ReportError(Exception):
    """A report the page cannot be written from, and why."""


def digits(value: float) -> str:
    """Three significant digits, and every digit left of the point from 100 on."""
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def seconds(value: float) -> str:
    # Below a second, milliseconds keep three significant digits without leading zeros.
    return f"{digits(value * 1000)} ms" if value < 1 else f"{digits(value)} s"


# How a figure is written, by the unit a row names: the report's own units, or a clearer one.
UNITS: dict[str, Callable[[float], str]] = {
    "number": digits,
    "s": seconds,
    "MB/s": lambda value: f"{digits(value)} MB/s",
    "MiB": lambda value: f"{value:,.1f} MiB",
    "bytes as MiB": lambda value: f"{value / 2**20:,.1f} MiB",
    "bytes as MB": lambda value: f"{value / 1e6:,.1f} MB",
    "bytes/s": lambda value: f"{value / 1e3:,.1f} kB/s",
    "characters/s": lambda value: f"{value / 1e6:,.1f} M characters/s",
    "tokens/s": lambda value: f"{value:,.0f} tokens/s",
    "bits/byte": lambda value: f"{value:.3f} bits/byte",
    "loss": lambda value: f"{value:.3f} nats a character",
    "share": lambda value: f"{value:.1%}",
    "yes/no": lambda value: "yes" if value else "no",
}


def ratio(value: float) -> str:
    """Two decimals, or two significant digits for a ratio below a tenth."""
    return f"{value:,.2f}" if abs(value) >= 0.1 else f"{value:.2g}"


def read(report: dict, entry: object, path: str) -> object:
    """The value at `path` within `entry`, or within the report where the path starts with "/"."""
    node = report if path.startswith("/") else entry
    for key in [key for key in path.split("/") if key]:
        if isinstance(node, str):
            # A sentence the benchmark wrote where it measured nothing, such as "not measured: ...".
            return node
        try:
            node = node[int(key)] if isinstance(node, list) else node[key]
        except (KeyError, IndexError, ValueError, TypeError):
            raise ReportError(f"it has no {path!r}") from None
    return node


def entries(report: dict, pattern: str) -> list[tuple[tuple[str, ...], object]]:
    """Every entry `pattern` matches in the report, with the keys its `*` wildcards matched."""
    found: list[tuple[tuple[str, ...], object]] = [((), report)]
    for key in [key for key in pattern.split("/") if key]:
        if key != "*":
            found = [(keys, read(report, node, key)) for keys, node in found]
            continue
        matched = []
        for keys, node in found:
            if not isinstance(node, dict | list):
                raise ReportError(f"{pattern!r} meets {node!r}, which has no entries")
            inner = node.items() if isinstance(node, dict) else enumerate(node)
            matched += [((*keys, str(name)), value) for name, value in inner]
        found = matched
    return found


def written(value: object) -> str:
    """A value filled into words: whole numbers with separators, lists joined."""
    if isinstance(value, list):
        return ", ".join(written(inner) for inner in value)
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return f"{value:g}" if isinstance(value, float) else str(value)


def words(text: str, report: dict, entry: object, keys: tuple[str, ...]) -> str:
    """`text` with its `{path}`, `{path:unit}` and `{*}` filled from the report."""

    def fill(found: re.Match) -> str:
        inside = found.group(1)
        if inside == "*":
            return keys[-1]
        if inside.startswith("*"):
            return keys[int(inside[1:]) - 1]
        path, _, unit = inside.partition(":")
        value = read(report, entry, path)
        return UNITS[unit](value) if unit else written(value)

    return re.sub(r"\{([^{}]+)\}", fill, text)


def cells(row: Row, report: dict, entry: object, keys: tuple[str, ...]) -> list[str]:
    """The row's columns: what is measured, Zrodlo's figure, the reference and its, the ratio."""

    def fill(text: str) -> str:
        return words(text, report, entry, keys)

    def figure(path: str | None) -> tuple[object, str]:
        if path is None:
            return None, NO_FIGURE
        value = read(report, entry, path)
        if value is None:
            if not row.null:
                raise ReportError(f"{path!r} is null, and its row does not say what that means")
            return None, fill(row.null)
        # A string is a sentence the benchmark wrote in place of a figure: it is shown as it is.
        return value, value if isinstance(value, str) else UNITS[row.unit](value)

    ours, ours_shown = figure(row.zrodlo)
    theirs, theirs_shown = figure(row.reference)
    if isinstance(theirs, str) and theirs == ours:
        theirs_shown = NO_FIGURE  # one note stands for both sides
    if row.ratio == QUOTIENT:
        numbers = all(isinstance(value, int | float) for value in (ours, theirs))
        share = ours / theirs if numbers and theirs else None
    else:
        share = None if row.ratio is None else read(report, entry, row.ratio)
    if isinstance(share, int | float):
        number = ratio(share)
        # "0.94 of raw write speed" but "4.03 times raw write speed", as the number reads.
        joiner = "of" if float(number.replace(",", "")) < 1 else "times"
        share = f"{number} {joiner} {fill(row.gloss)}" if row.gloss else number
    texts = [fill(row.what), ours_shown, fill(row.against) or NO_FIGURE, theirs_shown]
    return [text.replace("|", "\\|") for text in [*texts, str(share or NO_FIGURE)]]


def table(declared: Table, report: dict) -> list[str]:
    """The declared table's markdown lines, every figure read from the report."""
    lines = [
        "| What is measured | Zrodlo | Against | Reference | Zrodlo / reference |",
        "|---|---:|---|---:|---|",
    ]
    for row in declared.rows:
        found = entries(report, row.each)
        kept = [(keys, entry) for keys, entry in found if not set(keys) & set(row.leave_out)]
        if not kept:
            raise ReportError(f"no entry of {row.each!r} is left for the row {row.what!r}")
        for keys, entry in kept:
            lines.append("| " + " | ".join(cells(row, report, entry, keys)) + " |")
    return lines


def machine(report: dict) -> str:
    """The machine the report was measured on, in a few words, from what it recorded."""
    recorded = report.get("machine", {})
    # Not its torch threads: those of the script, not of the processes it may time.
    said = [recorded.get("cpu_model"), recorded.get("cpus") and f"{recorded['cpus']} CPUs"]
    said += [recorded.get("torch") and f"torch {recorded['torch']}"]
    return ", ".join(str(part) for part in said if part)


def section(name: str, report: dict) -> list[str]:
    """A report's section: its title, what it compares, its command, its table."""
    if name not in TABLES:
        raise ReportError("it has no table: declare one in benchmarks/tables.py")
    if name not in SCRIPTS:
        raise ReportError("the script that writes it is not in SCRIPTS in benchmarks/summary.py")
    declared = TABLES[name]
    lines = [f"### {declared.title}", "", words(declared.about, report, report, ())]
    if "target" in report:
        lines[-1] += f" The benchmark's target: {report['target']}."
    command = f"`.venv/bin/python benchmarks/{SCRIPTS[name]}` writes `reports/bench/{name}.json`"
    on = machine(report)
    lines += ["", command + (f" (measured on {on})." if on else "."), ""]
    return [*lines, *table(declared, report), ""]


def page(reports: Path = REPORTS) -> str:
    """The whole page, from every report in `reports`, in the order the tables are declared."""
    found = {path.stem: json.loads(path.read_text()) for path in reports.glob("*.json")}
    undeclared = sorted(found.keys() - TABLES.keys())
    if undeclared:
        named = ", ".join(f"reports/bench/{name}.json" for name in undeclared)
        raise ReportError(f"{named}: no table, declare one in benchmarks/tables.py")
    lines = [
        "# Benchmarks",
        "",
        "Each script here measures Zrodlo against a plain reference (raw disk I/O, a plain",
        "PyTorch loop, the tokenizers library, transformers' `generate`, ...) side by side in one",
        "run and writes its figures to `reports/bench/`. A table row gives what is measured,",
        "Zrodlo's figure, the reference's, and their ratio in words. This page is written from",
        "those files by `benchmarks/summary.py` (rows declared in `benchmarks/tables.py`): rerun",
        "a script alone on an idle machine, then the summary.",
        "",
    ]
    part = None
    for name, declared in TABLES.items():
        if name not in found:
            continue  # a declared report not written yet, or only on other machines
        if declared.part != part:
            part = declared.part
            lines += [f"## {part}", ""]
        try:
            lines += section(name, found[name])
        except ReportError as error:
            raise ReportError(f"reports/bench/{name}.json: {error}") from None
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check README.md is current")
    checking = parser.parse_args().check
    try:
        text = page()
    except ReportError as error:
        print(f"benchmarks/summary.py: {error}", file=sys.stderr)
        return 2
    if checking:
        return 0 if README.read_text() == text else 1
    README.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The report of a run as markdown: its data, model, training, scores, a sample and the commands
that write it again, every number copied from the records it was given.
"""

from __future__ import annotations

import json
import math
import shlex
from pathlib import Path
from typing import Any

from zrodlo.evaluation.run_records import Pool, Steps

# The chart files of a report and their titles (the charts themselves are `zrodlo.evaluation.report`'s).
REPORT_FILE = "report.md"
LOSS_CHART = "loss.png"
LEARNING_RATE_CHART = "learning_rate.png"
GRAD_NORM_CHART = "grad_norm.png"
SPEED_CHART = "tokens_per_second.png"
CHARTS = (LOSS_CHART, LEARNING_RATE_CHART, GRAD_NORM_CHART)  # and SPEED_CHART, given the times
CHART_TITLES = {
    LOSS_CHART: "Training and held-out loss",
    LEARNING_RATE_CHART: "Learning rate",
    GRAD_NORM_CHART: "Gradient norm",
    SPEED_CHART: "Training speed",
}


def evaluate_command(metrics: dict, metrics_path: Path, pools: list[Pool]) -> list[str]:
    """The `zrodlo model evaluate` command that writes these scores again: each scored corpus is
    found among the pools by its digest (the scores record only its name)."""
    by_digest = {pool.digest: pool.path for pool in pools}
    by_name = {pool.name: pool.path for pool in pools}
    model = metrics["model"]
    command = ["zrodlo", "model", "evaluate", "--model", str(model.get("path", "?"))]
    for name, entry in metrics["corpora"].items():
        path = by_digest.get(entry.get("corpus_digest"), by_name.get(name, name))
        command += ["--corpus", str(path)]
    if model.get("baseline"):
        command += ["--baseline", str(model["baseline"])]
    if model.get("context") is not None:
        command += ["--context", str(model["context"])]
    return [*command, "--output", str(metrics_path)]


def _table(header: list[str], rows: list[list[str]], right_from: int = 1) -> list[str]:
    """A markdown table; columns from `right_from` on (the numbers) are right-aligned."""
    align = [":---" if i < right_from else "---:" for i in range(len(header))]
    return [f"| {' | '.join(row)} |" for row in (header, align, *rows)]


def _fence(text: str) -> str:
    """A code fence longer than any run of backticks inside `text`, so the text cannot end it."""
    longest = run = 0
    for character in text:
        run = run + 1 if character == "`" else 0
        longest = max(longest, run)
    return "`" * max(3, longest + 1)


def _value(value: Any) -> str:
    """A setting as JSON writes it (null, false, 1e-08), a string as itself."""
    return value if isinstance(value, str) else json.dumps(value)


def _rate(value: float | None) -> str:
    return "" if value is None else f"{value:.3%}"


def _loss(value: float | None) -> str:
    return "" if value is None or math.isnan(value) else f"{value:.4f}"


def data_section(pools: list[Pool]) -> list[str]:
    header = ["pool", "documents", "characters", "tokens", "targets", "unknown tokens"]
    rows = [
        [
            p.name,
            f"{p.documents:,}",
            f"{p.characters:,}",
            f"{p.tokens:,}",
            f"{p.targets:,}"
            if p.weighted_targets is None
            else f"{p.weighted_targets:,} of {p.targets:,}",
            f"{p.unknown_tokens:,}",
            _rate(p.unknown_rate),
        ]
        for p in pools
    ]
    return [
        "## Data",
        "",
        *_table([*header, "unknown rate"], rows),
        "",
        "Unknown tokens are text the tokenizer, fitted on the training pool, cannot encode (a "
        "character it never saw; a byte-level BPE encodes every text)."
        + (
            " A pool of chat documents is trained and scored on the targets of its answers, the "
            "first of its two counts."
            if any(p.weighted_targets is not None for p in pools)
            else ""
        ),
        "",
    ]


def model_section(config: dict, parameters: int) -> list[str]:
    rows = [[name, _value(value)] for name, value in config.items()]
    return [
        "## Model",
        "",
        f"{parameters:,} parameters.",
        "",
        *_table(["setting", "value"], rows),
        "",
    ]


def _held_out(step: int, loss: float, bits_per_byte: float) -> str:
    """A held-out score with its step, and its bits per byte where the run recorded them."""
    known = "" if math.isnan(bits_per_byte) else f", {bits_per_byte:.4f} bits/byte"
    return f"{_loss(loss)} (step {step:,}{known})"


def training_section(steps: Steps, trainer: dict | None, charts: list[str]) -> list[str]:
    held_out = steps.last_held_out()
    rows = [
        ["steps", f"{steps.step[-1]:,}"],
        ["tokens seen (targets)", f"{steps.tokens_seen:,}"],
        ["last training loss", _loss(steps.loss[-1])],
        ["last held-out loss", "" if held_out is None else _held_out(*held_out)],
    ]
    if trainer is not None:
        rows += [
            ["seed", _value(trainer.get("seed"))],
            ["generator", _value(trainer.get("generator"))],
        ]
        hyperparameters = trainer.get("hyperparameters", {})
        rows += [[name, _value(value)] for name, value in hyperparameters.items() if name != "seed"]
        rows += [[name, _value(value)] for name, value in trainer.get("environment", {}).items()]
    return [
        "## Training",
        "",
        *_table(["record", "value"], rows),
        "",
        *(line for name in charts for line in (f"![{CHART_TITLES[name]}]({name})", "")),
    ]


def scores_section(metrics: dict, metrics_path: Path) -> list[str]:
    model = metrics["model"]
    lines = [
        "## Scores",
        "",
        f"Loss in nats per target (token or end of document) of {model.get('path')}, from "
        f"{metrics_path}; the bigram baseline counts the token pairs of "
        f"{model.get('baseline') or 'no corpus'} and scores the same windows.",
        "",
    ]
    header = [
        "corpus", "loss", "perplexity", "bits/char", "bits/byte", "bigram loss", "loss / bigram",
    ]  # fmt: skip
    rows = []
    for name, entry in metrics["corpora"].items():
        bigram = entry.get("bigram_loss")
        rows.append(
            [
                name,
                _loss(entry["loss"]),
                f"{entry['perplexity']:.3f}",
                _loss(entry.get("bits_per_character")),
                _loss(entry.get("bits_per_byte")),
                _loss(bigram),
                f"{entry['loss'] / bigram:.3f}" if bigram else "",
                f"{entry['targets']:,}",
                _rate(entry.get("unknown_rate")),
            ]
        )
    lines += [*_table([*header, "targets", "unknown rate"], rows), ""]
    validation = metrics["corpora"].get("validation")
    if validation is not None and validation.get("bigram_loss"):
        ratio = validation["loss"] / validation["bigram_loss"]
        lines += [
            f"Validation loss over the bigram baseline: {ratio:.3f} "
            f"({_loss(validation['loss'])} against {_loss(validation['bigram_loss'])} nats); "
            "below 1 the model predicts better than token pairs alone.",
            "",
        ]
    return lines


def sample_section(sample: str, note: str) -> list[str]:
    fence = _fence(sample)
    return ["## Sample", "", note, "", f"{fence}text", sample, fence, ""]


def commands_section(commands: list[list[str]]) -> list[str]:
    return ["## Commands", "", "```sh", *(shlex.join(command) for command in commands), "```", ""]


def render(
    *,
    pools: list[Pool],
    steps: Steps,
    metrics: dict,
    metrics_path: Path,
    model_path: Path,
    config: dict,
    parameters: int,
    trainer: dict | None,
    sample: str,
    sample_note: str,
    charts: list[str],
    commands: list[list[str]],
) -> str:
    """The report as markdown. `steps` are the records through the model's step; `trainer` is the
    checkpoint's trainer.json (None for a model directory that was never trained); chart paths are
    relative to the report."""
    lines = [
        f"# Run report: {model_path}",
        "",
        *data_section(pools),
        *model_section(config, parameters),
        *training_section(steps, trainer, charts),
        *scores_section(metrics, metrics_path),
        *sample_section(sample, sample_note),
        *commands_section(commands),
    ]
    return "\n".join(lines)

"""The report of a run: its records read back (corpus manifests, steps.csv, the evaluation scores)
and written as one markdown page with charts of the loss, the learning rate, the gradient norm and,
where the step times are at hand, the tokens per second.

Every number on the page is copied from a file the earlier stages wrote; nothing is recomputed, so
the report says what the run recorded. Bad or missing records are refused with a sentence naming the
file and the command that writes it.
"""

from __future__ import annotations

import csv
import json
import math
import shlex
import warnings
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from zrodlo.data.corpus import MANIFEST_FILE
from zrodlo.evaluation.charts import Series, line_chart
from zrodlo.storage import jsonfile
from zrodlo.storage.outputs import check_parent, directory_of_files, replace_file
from zrodlo.storage.refusal import Refusal
from zrodlo.training.records import STEPS_FILE, STEPS_HEADER, TIMING_FILE, TIMING_HEADER

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
# The pools of the pipeline, in the order people read them; other corpora follow by name.
POOL_ORDER = ("train", "validation", "test")

TRAINING_COLOR = (31, 119, 180)
HELD_OUT_COLOR = (255, 127, 14)
LEARNING_RATE_COLOR = (44, 160, 44)
GRAD_NORM_COLOR = (148, 103, 189)
SPEED_COLOR = (140, 86, 75)


@dataclass(frozen=True)
class Pool:
    """A prepared corpus as its corpus.json describes it."""

    name: str
    path: Path
    documents: int
    characters: int
    tokens: int
    targets: int
    unknown_tokens: int
    unknown_rate: float
    digest: str


@dataclass(frozen=True)
class Steps:
    """steps.csv by column; eval_loss is NaN on the steps without a held-out score."""

    step: list[int]
    loss: list[float]
    learning_rate: list[float]
    grad_norm: list[float]
    targets: list[int]
    eval_loss: list[float]

    def through(self, last: int) -> Steps:
        """The records of steps 1..last only."""
        keep = [i for i, step in enumerate(self.step) if step <= last]
        return Steps(*([getattr(self, f.name)[i] for i in keep] for f in fields(self)))

    @property
    def tokens_seen(self) -> int:
        """The targets the model was trained on: every step's scored tokens, summed."""
        return sum(self.targets)

    def last_held_out(self) -> tuple[int, float] | None:
        """The last step with a held-out score, and the score."""
        scored = [
            (s, v) for s, v in zip(self.step, self.eval_loss, strict=True) if not math.isnan(v)
        ]
        return scored[-1] if scored else None


def _read_json(path: Path, what: str, written_by: str) -> Any:
    if not path.is_file():
        raise Refusal(f"{path} does not exist; {written_by} writes {what}")
    try:
        return jsonfile.loads(path.read_bytes())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise Refusal(f"{path} does not load as {what}: {error}") from None


def _pool_order(name: str) -> tuple[int, str]:
    return (POOL_ORDER.index(name) if name in POOL_ORDER else len(POOL_ORDER), name)


def read_pools(corpora: Path) -> list[Pool]:
    """Every prepared corpus directly under `corpora` (a directory holding corpus.json)."""
    if not corpora.is_dir():
        raise Refusal(
            f"{corpora} is not a directory; prepared corpora are read from a directory that "
            "holds one corpus directory each"
        )
    found = sorted(
        (entry for entry in corpora.iterdir() if (entry / MANIFEST_FILE).is_file()),
        key=lambda entry: _pool_order(entry.name),
    )
    if not found:
        raise Refusal(
            f"{corpora} holds no prepared corpus (no <pool>/{MANIFEST_FILE}); "
            "corpora are written by zrodlo corpus prepare"
        )
    pools = []
    for entry in found:
        file = entry / MANIFEST_FILE
        manifest = _read_json(file, "a corpus manifest", "zrodlo corpus prepare")
        try:
            pools.append(
                Pool(
                    name=entry.name,
                    path=entry,
                    documents=int(manifest["documents"]),
                    characters=int(manifest["characters"]),
                    tokens=int(manifest["tokens"]),
                    targets=int(manifest["targets"]),
                    unknown_tokens=int(manifest["unknown_tokens"]),
                    unknown_rate=float(manifest["unknown_rate"]),
                    digest=str(manifest["corpus_digest"]),
                )
            )
        except (KeyError, TypeError, ValueError) as error:
            raise Refusal(f"{file} does not load as a corpus manifest: {_problem(error)}") from None
    return pools


def _problem(error: Exception) -> str:
    return f"it has no {error.args[0]}" if isinstance(error, KeyError) else str(error)


def _number(text: str) -> float:
    return math.nan if text == "" else float(text)


def read_steps(run: Path) -> Steps:
    """A run's steps.csv, as zrodlo model train writes it."""
    file = run / STEPS_FILE
    if not file.is_file():
        raise Refusal(
            f"{run} holds no {STEPS_FILE}; a run directory is written by zrodlo model train"
        )
    with open(file, encoding="utf-8", newline="") as handle:
        lines = list(csv.reader(handle))
    if not lines or ",".join(lines[0]) != STEPS_HEADER:
        header = ",".join(lines[0]) if lines else "nothing"
        raise Refusal(
            f"{file} starts with {header!r}; a run's {STEPS_FILE} starts with {STEPS_HEADER!r}"
        )
    columns: tuple[list, ...] = ([], [], [], [], [], [])
    for number, line in enumerate(lines[1:], start=2):
        try:
            step, loss, rate, norm, targets, eval_loss = line
            values = (
                int(step),
                float(loss),
                float(rate),
                float(norm),
                int(targets),
                _number(eval_loss),
            )
        except ValueError as error:
            raise Refusal(f"{file} line {number} does not read as a step record: {error}") from None
        for column, value in zip(columns, values, strict=True):
            column.append(value)
    if not columns[0]:
        raise Refusal(f"{file} records no step; the run made no update")
    return Steps(*columns)


def read_metrics(path: Path) -> dict:
    """The scores zrodlo model evaluate --output wrote: {"model": {...}, "corpora": {...}}."""
    metrics = _read_json(path, "evaluation scores", "zrodlo model evaluate --output")
    if not (
        isinstance(metrics, dict)
        and isinstance(metrics.get("model"), dict)
        and isinstance(metrics.get("corpora"), dict)
        and metrics["corpora"]
    ):
        raise Refusal(
            f"{path} does not load as evaluation scores: it needs a model and one corpus or more"
        )
    for name, entry in metrics["corpora"].items():
        missing = [
            key
            for key in ("loss", "perplexity", "bits_per_character", "targets")
            if not isinstance(entry, dict) or not isinstance(entry.get(key), int | float)
        ]
        if missing:
            raise Refusal(
                f"{path} does not load as evaluation scores: corpus {name} has no number "
                f"{missing[0]}"
            )
    return metrics


def chart_files(with_speed: bool) -> list[str]:
    """The charts of a report, in the order the page shows them."""
    return [*CHARTS, SPEED_CHART] if with_speed else list(CHARTS)


def write_charts(steps: Steps, directory: Path, speed: Timing | None = None) -> list[Path]:
    """The charts of a run against step: training and held-out loss, learning rate, gradient
    norm, and, given the step times, tokens per second; return the files written."""
    written = []

    def chart(name: str, series: list[Series], y_label: str, log_y: bool = False) -> None:
        line_chart(directory / name, series, CHART_TITLES[name], "step", y_label, log_y=log_y)
        written.append(directory / name)

    chart(
        LOSS_CHART,
        [
            Series("training loss", steps.step, steps.loss, TRAINING_COLOR),
            Series("held-out loss", steps.step, steps.eval_loss, HELD_OUT_COLOR),
        ],
        "loss (nats per character)",
    )
    chart(
        LEARNING_RATE_CHART,
        [Series("learning rate", steps.step, steps.learning_rate, LEARNING_RATE_COLOR)],
        "learning rate (per update)",
    )
    chart(
        GRAD_NORM_CHART,
        [Series("gradient norm", steps.step, steps.grad_norm, GRAD_NORM_COLOR)],
        "global L2 norm before clipping",
        log_y=True,
    )
    if speed is not None:
        chart(
            SPEED_CHART,
            [Series("tokens per second", speed.step, speed.tokens_per_second, SPEED_COLOR)],
            "tokens per second (targets)",
        )
    return written


@dataclass(frozen=True)
class Timing:
    """A run's step times by column: step, seconds and tokens (targets) per second."""

    step: list[int]
    seconds: list[float]
    tokens_per_second: list[float]


def read_timing(path: Path) -> Timing:
    """A run's timing file, as zrodlo model train writes it (timing.csv or its --timing file)."""
    if not path.is_file():
        raise Refusal(f"{path} is not a file; --timing names a run's step times")
    with open(path, encoding="utf-8", newline="") as handle:
        lines = list(csv.reader(handle))
    if not lines or ",".join(lines[0]) != TIMING_HEADER:
        header = ",".join(lines[0]) if lines else "nothing"
        raise Refusal(f"{path} starts with {header!r}; step times start with {TIMING_HEADER!r}")
    timing = Timing([], [], [])
    for number, line in enumerate(lines[1:], start=2):
        try:
            step, seconds, rate = line
            values = (int(step), float(seconds), float(rate))
        except ValueError as error:
            raise Refusal(f"{path} line {number} does not read as a step time: {error}") from None
        columns = (timing.step, timing.seconds, timing.tokens_per_second)
        for column, value in zip(columns, values, strict=True):
            column.append(value)
    return timing


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


# --- Markdown ----------------------------------------------------------------------------------


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
            f"{p.targets:,}",
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
        "Unknown tokens are characters the tokenizer, fitted on the training pool, does not know.",
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


def training_section(steps: Steps, trainer: dict | None, charts: list[str]) -> list[str]:
    held_out = steps.last_held_out()
    rows = [
        ["steps", f"{steps.step[-1]:,}"],
        ["tokens seen (targets)", f"{steps.tokens_seen:,}"],
        ["last training loss", _loss(steps.loss[-1])],
        [
            "last held-out loss",
            "" if held_out is None else f"{_loss(held_out[1])} (step {held_out[0]:,})",
        ],
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
        f"Loss in nats per target (character or end of document) of {model.get('path')}, from "
        f"{metrics_path}; the bigram baseline counts the character pairs of "
        f"{model.get('baseline') or 'no corpus'} and scores the same windows.",
        "",
    ]
    header = ["corpus", "loss", "perplexity", "bits/char", "bigram loss", "loss / bigram"]
    rows = []
    for name, entry in metrics["corpora"].items():
        bigram = entry.get("bigram_loss")
        rows.append(
            [
                name,
                _loss(entry["loss"]),
                f"{entry['perplexity']:.3f}",
                f"{entry['bits_per_character']:.4f}",
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
            "below 1 the model predicts better than character pairs alone.",
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


def write_report(path: Path, markdown: str) -> None:
    """Write the report, replacing any earlier one whole."""
    replace_file(path, markdown.encode("utf-8"))


def write_run_report(
    run: Path,
    metrics: Path,
    corpora: Path,
    model: Path,
    output: Path,
    sample_seed: int = 1,
    sample_prompt: str = "",
    sample_tokens: int = 300,
    sample_temperature: float = 0.8,
    timing: Path | None = None,
) -> list[Path]:
    """Write report.md and the charts of `run` into `output`, about the checkpoint `model`, with
    the scores `metrics` and the pools under `corpora`; return the files written, report first.

    The speed chart is drawn from `timing` (a run's --timing file), or from the run directory's
    timing.csv when it has one; without either there is none.
    """
    # The model and the sampler need torch: imported here, so reading records does not.
    from zrodlo.draws.chacha import check_seed
    from zrodlo.evaluation.sample import (
        UnknownCharactersWarning,
        check_sampling,
        draw,
        unknown_warning,
    )
    from zrodlo.model.device import resolve_device
    from zrodlo.model.gpt import GPT, parameter_count
    from zrodlo.training.checkpoint import (
        TRAINER_FILE,
        check_tokenizer_fits,
        read_model,
        read_record,
    )

    # Everything is read and checked before the first file is written.
    check_sampling(sample_tokens, sample_temperature, None)
    check_seed(sample_seed)
    loaded = read_model(model)
    check_tokenizer_fits(loaded)
    trainer = read_record(model) if (model / TRAINER_FILE).exists() else None
    steps = read_steps(run)
    if trainer is not None:
        step = int(trainer["step"])
        if step not in steps.step:
            raise Refusal(
                f"{run / STEPS_FILE} records steps {steps.step[0]} to {steps.step[-1]}, and "
                f"{model} is at step {step}; --run must be the run the model was trained in"
            )
        steps = steps.through(step)
    pools = read_pools(corpora)
    scores = read_metrics(metrics)
    parameters = parameter_count(loaded.config)
    scored = scores["model"].get("parameters")
    if scored is not None and scored != parameters:
        raise Refusal(
            f"{metrics} scores a model of {scored} parameters, and {model} has {parameters}; "
            f"score {model} with zrodlo model evaluate --output {metrics}"
        )
    if output.exists() and not output.is_dir():
        raise Refusal(f"{output} exists and is not a directory; --output names a directory")
    if not output.exists():
        check_parent(output)

    named_timing = timing
    if timing is None and (run / TIMING_FILE).exists():
        timing = run / TIMING_FILE
    speed = None if timing is None else read_timing(timing)

    warning = unknown_warning(loaded.tokenizer, sample_prompt)
    if warning:
        warnings.warn(warning, UnknownCharactersWarning, stacklevel=2)
    # On the CPU, so that the sample in the report is the same text on every machine.
    cpu = resolve_device("cpu", None, "f32")
    network = GPT.from_weights(loaded.config, loaded.weights, cpu, str(model))
    text = draw(
        network,
        loaded.tokenizer,
        sample_prompt,
        sample_tokens,
        sample_temperature,
        None,
        sample_seed,
        cpu,
    )

    sample_command = [
        "zrodlo", "model", "sample", "--model", str(model), "--prompt", sample_prompt,
        "--tokens", str(sample_tokens), "--temperature", str(sample_temperature),
        "--seed", str(sample_seed),
    ]  # fmt: skip
    report_command = [
        "zrodlo", "report", "--run", str(run), "--metrics", str(metrics),
        "--corpora", str(corpora), "--model", str(model), "--output", str(output),
        "--sample-seed", str(sample_seed), "--sample-prompt", sample_prompt,
        "--sample-tokens", str(sample_tokens), "--sample-temperature", str(sample_temperature),
        *([] if named_timing is None else ["--timing", str(named_timing)]),
    ]  # fmt: skip
    prompt_note = f"the prompt {sample_prompt!r} and then" if sample_prompt else "no prompt, so"
    markdown = render(
        pools=pools,
        steps=steps,
        metrics=scores,
        metrics_path=metrics,
        model_path=model,
        config=loaded.config.to_json(),
        parameters=parameters,
        trainer=trainer,
        sample=sample_prompt + text,
        sample_note=(
            f"Drawn on the CPU with seed {sample_seed}, temperature {sample_temperature} and up "
            f"to {sample_tokens} tokens: {prompt_note} the model's text."
        ),
        charts=chart_files(speed is not None),
        commands=[evaluate_command(scores, metrics, pools), sample_command, report_command],
    )

    with directory_of_files(output):
        charts = write_charts(steps, output, speed)
        report_file = output / REPORT_FILE
        write_report(report_file, markdown)
    return [report_file, *charts]

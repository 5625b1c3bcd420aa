"""The report of a run: its records read back (corpus manifests, steps.csv, the evaluation scores)
and written as one markdown page with charts of the loss, the learning rate, the gradient norm and,
where the step times are at hand, the tokens per second.

Every number on the page is copied from a file the earlier stages wrote; nothing is recomputed, so
the report says what the run recorded. Bad or missing records are refused with a sentence naming the
file and the command that writes it.
"""

from __future__ import annotations

import warnings
from pathlib import Path

from zrodlo.evaluation.charts import Series, line_chart
from zrodlo.evaluation.markdown import (
    CHART_TITLES,
    CHARTS,
    GRAD_NORM_CHART,
    LEARNING_RATE_CHART,
    LOSS_CHART,
    REPORT_FILE,
    SPEED_CHART,
    evaluate_command,
    render,
)
from zrodlo.evaluation.run_records import (
    Steps,
    Timing,
    read_metrics,
    read_pools,
    read_steps,
    read_timing,
)
from zrodlo.storage.outputs import check_parent, directory_of_files, replace_file
from zrodlo.storage.refusal import Refusal
from zrodlo.training.records import STEPS_FILE, TIMING_FILE

TRAINING_COLOR = (31, 119, 180)
HELD_OUT_COLOR = (255, 127, 14)
LEARNING_RATE_COLOR = (44, 160, 44)
GRAD_NORM_COLOR = (148, 103, 189)
SPEED_COLOR = (140, 86, 75)


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
        "loss (nats per token)",
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


def write_report(path: Path, markdown: str) -> None:
    """Write the report, replacing any earlier one whole."""
    replace_file(path, markdown.encode("utf-8"))


def report(
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
        check_prompt,
        check_sampling,
        draw,
        unknown_warning,
    )
    from zrodlo.model.decoder import build_model
    from zrodlo.model.device import resolve_device
    from zrodlo.model.directory import check_tokenizer_fits
    from zrodlo.model.parts import parameter_count
    from zrodlo.training.checkpoint import read_model_and_record

    # Everything is read and checked before the first file is written.
    check_sampling(sample_tokens, sample_temperature, None)
    check_seed(sample_seed)
    loaded, trainer = read_model_and_record(model)  # each file read and checked once
    check_tokenizer_fits(loaded)
    check_prompt(loaded.tokenizer, sample_prompt)
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
    network = build_model(loaded, cpu)
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

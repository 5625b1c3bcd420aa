"""`zrodlo report`: the markdown report of a run, with its loss and learning-rate charts."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

EXAMPLE = (
    "Example: zrodlo report --run run --metrics reports/metrics.json --corpora corpus --model "
    "run/step-2000 --output reports"
)


def report(
    run: Path = typer.Option(..., help="The run directory whose steps.csv is charted."),
    metrics: Path = typer.Option(..., help="The scores written by zrodlo model evaluate --output."),
    corpora: Path = typer.Option(
        ..., help="The directory holding the prepared corpora, one directory per pool."
    ),
    model: Path = typer.Option(
        ..., help="The checkpoint the report is about; the sample is drawn from it."
    ),
    output: Path = typer.Option(
        ...,
        help="The directory report.md, loss.png and learning_rate.png are written into (replacing them); created if missing.",
    ),
    sample_seed: int = typer.Option(
        1, help="Keys the sample's ChaCha20 draws: the same seed gives the same text."
    ),
    sample_prompt: str = typer.Option("", help="The text the sample continues (after BOS)."),
    sample_tokens: int = typer.Option(
        300, help="The most tokens the sample draws; it also ends at EOS."
    ),
    sample_temperature: float = typer.Option(
        0.8, help="Divides the logits; 0 takes the most likely token."
    ),
) -> None:
    """Write report.md (data, model, training, scores, a sample) and the charts of a run."""
    # Imported here, not at the top: `zrodlo --help` and the data stages then start without torch.
    from zrodlo.chacha import check_seed
    from zrodlo.checkpoint import TRAINER_FILE, check_tokenizer_fits, read_model, read_record
    from zrodlo.device import resolve_device
    from zrodlo.model import GPT, parameter_count
    from zrodlo.output import check_parent, directory_of_files
    from zrodlo.refusal import Refusal
    from zrodlo.report import (
        LEARNING_RATE_CHART,
        LOSS_CHART,
        REPORT_FILE,
        evaluate_command,
        read_metrics,
        read_pools,
        read_steps,
        render,
        write_charts,
        write_report,
    )
    from zrodlo.runlog import STEPS_FILE
    from zrodlo.sample import check_sampling, draw, unknown_warning

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

    warning = unknown_warning(loaded.tokenizer, sample_prompt)
    if warning:
        print(f"warning: {warning}", file=sys.stderr)
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
        charts=(LOSS_CHART, LEARNING_RATE_CHART),
        commands=[evaluate_command(scores, metrics, pools), sample_command, report_command],
    )

    with directory_of_files(output):
        loss_chart, rate_chart = write_charts(steps, output)
        report_file = output / REPORT_FILE
        write_report(report_file, markdown)
    typer.echo(f"wrote {report_file}, {loss_chart} and {rate_chart}")

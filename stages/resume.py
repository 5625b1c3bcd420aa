"""`zrodlo checkpoint resume`: continue a checkpoint exactly (the `resume` stage)."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from stages import options


def resume(
    checkpoint: Path = typer.Option(..., help="The step-<n> checkpoint directory to continue."),
    corpus: Path = typer.Option(..., help="The corpus the checkpoint was trained on."),
    output: Path = typer.Option(
        ..., help="The run directory each new step-<n> checkpoint is written into."
    ),
    steps: int = typer.Option(
        ..., help="Total steps the run reaches, counting the checkpoint's own."
    ),
    eval_corpus: Path | None = options.EVAL_CORPUS,
    eval_every: int | None = options.EVAL_EVERY,
    checkpoint_every: int | None = options.CHECKPOINT_EVERY,
    keep_checkpoints: int | None = options.KEEP_CHECKPOINTS,
    device: str = options.DEVICE,
    ordinal: int | None = options.ORDINAL,
    processes: int = options.PROCESSES,
) -> None:
    """Continue a checkpoint with its own optimizer state and data position, on any number of
    processes that divides a step's micro-batches."""
    # Imported here, not at the top: `zrodlo --help` and the data stages then start without torch.
    from stages.progress import step_display
    from zrodlo.chacha import GENERATOR
    from zrodlo.checkpoint import TOKENIZER_FILE, read_checkpoint
    from zrodlo.corpus import Corpus
    from zrodlo.device import check_device, resolve_device
    from zrodlo.launch import run_as_workers
    from zrodlo.parallel import join
    from zrodlo.plan import RunPlan
    from zrodlo.refusal import Refusal
    from zrodlo.run import check_data, check_held_out, match_environment, open_held_out, train
    from zrodlo.trainer import Trainer

    state = read_checkpoint(checkpoint)
    record = state.record
    if state.model.tokenizer.digest != record.get("tokenizer_digest"):
        raise Refusal(
            f"{checkpoint / TOKENIZER_FILE} is not the tokenizer {checkpoint} was trained with"
        )
    data = Corpus.open(corpus)
    if data.digest != record.get("corpus_digest"):
        raise Refusal(
            f"{corpus} holds corpus {data.digest}, and this checkpoint was trained on corpus "
            f"{record.get('corpus_digest')}; resume on the same corpus"
        )
    done = state.step
    if steps <= done:
        raise Refusal(f"--steps {steps} is not past the {done} steps already done")
    if record.get("generator") != GENERATOR:
        named = record.get("generator") or "no named generator"
        raise Refusal(
            f"this checkpoint's {done} steps drew their window order and dropout masks from "
            f"{named}, and this build draws from {GENERATOR}; a resume would not continue the "
            "same run"
        )
    try:
        plan = RunPlan.from_hyperparameters(
            record["hyperparameters"],
            steps=steps,
            eval_every=eval_every,
            checkpoint_every=checkpoint_every,
            keep_checkpoints=keep_checkpoints,
        )
        plan.validate()
    except (KeyError, TypeError) as error:
        raise Refusal(
            f"{checkpoint} records hyperparameters this build cannot read: {error}"
        ) from None
    if run_as_workers(processes, plan):
        return
    table = check_data(data, state.model, plan.context)
    check_held_out(eval_corpus, eval_every)
    held_out = open_held_out(eval_corpus, state.model, plan.context)
    check_device(device, ordinal, plan.precision)
    target = resolve_device(device, ordinal, plan.precision)
    warnings = match_environment(checkpoint, record.get("environment", {}))
    ranks = join(target)
    for warning in warnings if ranks.leads else []:
        print(f"warning: {warning}", file=sys.stderr)
    trainer = Trainer.restore(plan, state, data.tokens, table, target, ranks)
    with step_display(done, steps) as on_step:
        written = train(
            trainer,
            plan,
            done,
            output,
            state.model,
            state.provenance,
            held_out,
            on_step,
            continues=record["files"],
        )
    if ranks.leads:
        typer.echo(f"continued {checkpoint} to step {steps}; the last checkpoint is {written[-1]}")

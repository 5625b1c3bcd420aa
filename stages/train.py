"""`zrodlo model train`: train every weight of a model directory (the `train` stage)."""

from __future__ import annotations

from pathlib import Path

import typer

from zrodlo.stages import options

EXAMPLE = (
    "Example: zrodlo model train --model model --corpus corpus/train --output run --steps 1000 "
    "--context 129 --batch-size 32 --learning-rate 0.002 --beta1 0.9 --beta2 0.99 --epsilon "
    "1e-8 --weight-decay 0.1 --decay-scope matrices --seed 1 --precision f32 --device cpu "
    "--shuffle"
)


def train_command(
    model: Path = typer.Option(
        ..., help="The model directory or checkpoint whose weights are trained."
    ),
    corpus: Path = typer.Option(..., help="The prepared corpus the windows are read from."),
    output: Path = typer.Option(
        ..., help="The run directory each step-<n> checkpoint is written into."
    ),
    steps: int = typer.Option(..., help="How many optimizer updates the run makes."),
    context: int = typer.Option(
        ..., help="Tokens per training window; the model reads all but the last."
    ),
    batch_size: int = typer.Option(..., help="Windows per optimizer update."),
    learning_rate: float = typer.Option(..., help="AdamW's step size: a positive finite number."),
    beta1: float = typer.Option(
        ..., help="AdamW's decay of the gradient's running mean, between 0 and 1."
    ),
    beta2: float = typer.Option(
        ..., help="AdamW's decay of the squared gradient's running mean, between 0 and 1."
    ),
    epsilon: float = typer.Option(
        ..., help="AdamW's term added to the denominator: a positive finite number."
    ),
    weight_decay: float = typer.Option(
        ..., help="AdamW's decoupled weight decay: a finite number, zero or more."
    ),
    decay_scope: str = typer.Option(
        ...,
        metavar="[all|matrices]",
        help="The weights --weight-decay pulls toward zero: all, or matrices only (no biases or norm scales).",
    ),
    seed: int = typer.Option(
        ..., help="Keys the dropout masks and the shuffled window order; a resumed run keeps it."
    ),
    precision: str = typer.Option(
        ...,
        metavar="[f32|bf16]",
        help="f32, or bf16 for mixed precision on a GPU; a resumed run keeps it.",
    ),
    micro_batch_size: int | None = typer.Option(
        None,
        help="Windows per forward pass, dividing --batch-size; the step's gradient is the sum over its micro-batches.",
    ),
    warmup_steps: int = typer.Option(
        0, help="Updates over which the learning rate rises linearly to --learning-rate."
    ),
    stable_steps: int | None = typer.Option(
        None,
        help="Updates after the warmup at the full rate before the decay starts; needs --decay-steps.",
    ),
    decay_steps: int | None = typer.Option(
        None, help="Updates over which the rate falls in --decay-shape to --min-learning-rate."
    ),
    decay_shape: str | None = typer.Option(
        None,
        metavar="[cosine|linear]",
        help="How the rate falls over --decay-steps: cosine or linear; required with it.",
    ),
    min_learning_rate: float | None = typer.Option(
        None, help="The rate the decay ends at and keeps; required with --decay-steps."
    ),
    clip_norm: float | None = typer.Option(
        None,
        help="The largest global L2 norm a step's gradient keeps; a larger one is scaled down to it.",
    ),
    shuffle: bool = typer.Option(
        False,
        "--shuffle",
        metavar="",  # a switch: present or not
        help="Read each pass over the corpus in an order drawn from --seed and the pass.",
    ),
    eval_corpus: Path | None = options.EVAL_CORPUS,
    eval_every: int | None = options.EVAL_EVERY,
    checkpoint_every: int | None = options.CHECKPOINT_EVERY,
    keep_checkpoints: int | None = options.KEEP_CHECKPOINTS,
    device: str = options.DEVICE,
    ordinal: int | None = options.ORDINAL,
    processes: int = options.PROCESSES,
    timing: Path | None = options.TIMING,
    threads: int | None = typer.Option(
        None,
        help="Threads each process computes on; the weights depend on it, and not on --processes. "
        "Default: OMP_NUM_THREADS, else the cores for one process and 1 for each of several.",
    ),
) -> None:
    """Train every weight of a model directory with AdamW on next-token cross-entropy.

    Under torchrun, or with --processes, each process computes a share of every step, and the run
    is the one-process run to the bit."""
    # Imported here, not at the top: `zrodlo --help` and the data stages then start without torch.
    from zrodlo.stages.progress import step_display
    from zrodlo.training.plan import RunPlan
    from zrodlo.training.runs import Compute, train

    plan = RunPlan(
        steps=steps,
        context=context,
        batch_size=batch_size,
        learning_rate=learning_rate,
        beta1=beta1,
        beta2=beta2,
        epsilon=epsilon,
        weight_decay=weight_decay,
        decay_scope=decay_scope,
        seed=seed,
        precision=precision,
        micro_batch_size=micro_batch_size,
        warmup_steps=warmup_steps,
        stable_steps=stable_steps,
        decay_steps=decay_steps,
        decay_shape=decay_shape,
        min_learning_rate=min_learning_rate,
        clip_norm=clip_norm,
        shuffle=shuffle,
        eval_every=eval_every,
        checkpoint_every=checkpoint_every,
        keep_checkpoints=keep_checkpoints,
    )
    compute = Compute(device, ordinal, processes)
    written = train(
        model, corpus, output, plan, compute, threads, eval_corpus, step_display, timing
    )
    if written:
        typer.echo(f"wrote {len(written)} checkpoints into {output}; the last is {written[-1]}")

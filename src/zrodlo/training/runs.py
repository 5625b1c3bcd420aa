"""Training from what lies on disk: `train` a model directory on a prepared corpus, or `resume` a
checkpoint, each read and checked, computed on this process or on worker processes it starts, and
carried through the loop of `zrodlo.training.loop`. The commands `model train` and `checkpoint
resume` call these, and so can a script or a notebook.

Every check that can refuse runs before anything is written, in the order seed 001 (train) and
seed 000 (resume) give; in a data-parallel run every process reaches the same refusal.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

from zrodlo.data.corpus import Corpus
from zrodlo.draws.chacha import GENERATOR
from zrodlo.model.device import resolve_device
from zrodlo.storage.refusal import Refusal
from zrodlo.training.checkpoint import (
    read_base,
    read_checkpoint,
    with_fresh_adapters,
)
from zrodlo.training.display import StepDisplay
from zrodlo.training.environment import EnvironmentWarning, match_environment
from zrodlo.training.launch import run_workers
from zrodlo.training.loop import (
    check_held_out,
    fresh_provenance,
    held_out_notices,
    open_held_out,
    run_updates,
)
from zrodlo.training.place import launched
from zrodlo.training.plan import RunPlan
from zrodlo.training.ranks import (
    check_processes,
    check_share,
    check_threads,
    join,
    local_rank,
    use_threads,
)
from zrodlo.training.record import recorded_plan
from zrodlo.training.records import Progress, StepRecord
from zrodlo.training.schedule import ScheduleWarning
from zrodlo.training.score import check_data
from zrodlo.training.step import Trainer


def quiet(done: int, steps: int) -> AbstractContextManager[Callable[[StepRecord], None]]:
    """The progress of a run that shows none."""
    return nullcontext(lambda record: None)


def _schedule_notices(plan: RunPlan) -> list[Warning]:
    unfinished = plan.schedule.unfinished(plan.steps)
    return [ScheduleWarning(unfinished)] if unfinished else []


def train(
    model: Path,
    corpus: Path,
    output: Path,
    *,
    device: str,
    ordinal: int | None = None,
    processes: int = 1,
    threads: int | None = None,
    eval_corpus: Path | None = None,
    timing: Path | None = None,
    progress: Progress | None = None,
    **plan: Any,
) -> list[Path]:
    """Train every weight of `model` on `corpus`, writing checkpoints into `output`; `plan` holds
    the hyperparameters, the fields of `RunPlan` (the command's flags with underscores).

    `processes` processes share each step (started here, or already by torchrun), each computing on
    `threads` threads, which the weights depend on (torch's own default where None); `timing` is
    the file the step times go to, if not the run directory's timing.csv; `progress` shows the
    run's steps (as the command does where None; `quiet` shows none). Returns the checkpoints
    written (none in a process of torchrun's other than process 0). A schedule that ends after
    the last step is warned of with a `ScheduleWarning`, before the first."""
    progress = StepDisplay() if progress is None else progress
    checked = RunPlan(**plan)
    checked.validate()
    check_threads(threads)
    if not launched() and processes != 1:  # launched() refuses a half-set launch first
        check_processes(processes)
        check_share(processes, checked.batch_size, checked.micro_batch)
        request = {
            "command": "train", "model": model, "corpus": corpus, "output": output,
            "device": device, "ordinal": ordinal, "threads": threads,
            "eval_corpus": eval_corpus, "timing": timing, **plan,
        }  # fmt: skip
        return run_workers(request, processes, threads, progress)
    use_threads(threads)
    # A checkpoint of adapters continues only with resume: a run starts from every weight.
    spec = checked.adapters
    start = read_base(model)[0] if spec is None else with_fresh_adapters(model, spec, checked.seed)
    data = Corpus.open(corpus)
    table = check_data(data, start, checked.context)
    check_held_out(eval_corpus, checked.eval_every)
    held_out = open_held_out(eval_corpus, start, checked)
    target = resolve_device(device, ordinal, checked.precision, local_rank())
    ranks = join(target)
    provenance = fresh_provenance(start, data.digest, checked)
    trainer = Trainer.start(checked, start, data.tokens, table, target, ranks)
    start = start.without_weights()  # the network holds copies: the bytes read are let go
    with progress(0, checked.steps) if ranks.leads else quiet(0, checked.steps) as on_step:
        written = run_updates(
            trainer, checked, 0, output, start, provenance, held_out, on_step,
            timing=timing, corpus=data,
            notices=_schedule_notices(checked) + held_out_notices(held_out, checked),
        )  # fmt: skip
    return written if ranks.leads else []


def resume(
    checkpoint: Path,
    corpus: Path,
    output: Path,
    *,
    steps: int,
    device: str,
    ordinal: int | None = None,
    processes: int = 1,
    eval_corpus: Path | None = None,
    eval_every: int | None = None,
    eval_windows: int | None = None,
    checkpoint_every: int | None = None,
    keep_checkpoints: int | None = None,
    timing: Path | None = None,
    progress: Progress | None = None,
) -> list[Path]:
    """Continue `checkpoint` to `steps` with its own plan, optimizer state, data position and
    thread count, writing checkpoints into `output`; the run equals the uninterrupted one.

    Returns the checkpoints written; `progress` as `train` takes it. A resume on another torch
    version, processor or GPU warns with an `EnvironmentWarning` and goes on, and one whose
    schedule ends after `steps` with a `ScheduleWarning`."""
    progress = StepDisplay() if progress is None else progress
    if not launched() and processes != 1:  # launched() refuses a half-set launch first
        check_processes(processes)
        request = {
            "command": "resume", "checkpoint": checkpoint, "corpus": corpus, "output": output,
            "steps": steps, "device": device, "ordinal": ordinal, "eval_corpus": eval_corpus,
            "eval_every": eval_every, "eval_windows": eval_windows,
            "checkpoint_every": checkpoint_every,
            "keep_checkpoints": keep_checkpoints, "timing": timing,
        }  # fmt: skip
        return run_workers(request, processes, None, progress)
    state = read_checkpoint(checkpoint)  # its tokenizer the one it was trained with, or refused
    record = state.record
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
    plan = recorded_plan(
        checkpoint, record, steps, eval_every, checkpoint_every, keep_checkpoints, eval_windows
    )
    table = check_data(data, state.model, plan.context)
    check_held_out(eval_corpus, eval_every)
    held_out = open_held_out(eval_corpus, state.model, plan)
    target = resolve_device(device, ordinal, plan.precision, local_rank())
    reasons = match_environment(checkpoint, record.get("environment", {}), target)
    ranks = join(target)
    trainer = Trainer.restore(plan, state, data.tokens, table, target, ranks)
    model, provenance = state.model.without_weights(), state.provenance
    del state  # the network and AdamW hold copies: the bytes read are let go
    with progress(done, steps) if ranks.leads else quiet(done, steps) as on_step:
        written = run_updates(
            trainer, plan, done, output, model, provenance, held_out, on_step,
            continues=record["files"], timing=timing, corpus=data,
            notices=[EnvironmentWarning(reason) for reason in reasons]
            + _schedule_notices(plan) + held_out_notices(held_out, plan),
        )  # fmt: skip
    return written if ranks.leads else []

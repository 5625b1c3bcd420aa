"""The DVC pipeline's params (params.yaml), checked together before any stage runs work.

Each stage's command checks its own flags; what no command can see is how the sections agree: the
checkpoint the resume stage continues must be one the train stage writes and keeps, the context a
window reads must fit the model's positions, the processes must divide a step's micro-batches.
The `params` stage checks all of it first, with sentences that name the params, so that an
experiment that could not finish is refused before it trains.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from zrodlo.data.pools import check_shares
from zrodlo.draws.chacha import check_seed
from zrodlo.model.config import ModelConfig
from zrodlo.model.presets import PRESETS, SHAPE, shape_of
from zrodlo.pipeline.params import as_params, read_params
from zrodlo.pipeline.schedule import schedule_steps
from zrodlo.pipeline.tokenizer import tokenizer_args
from zrodlo.storage.outputs import check_replaceable, replace_file
from zrodlo.storage.refusal import Refusal
from zrodlo.training.plan import RunPlan

# What the check holds the params to; the `params` stage writes these lines, which change only
# when the rules do, so the stages after it rerun for a change of their own params alone.
RULES = (
    "documents: a source and the flags documents import takes",
    "splits: shares of held-out documents that leave documents to train on",
    "tokenizer: a kind and, for bpe, a vocabulary size tokenizer fit accepts",
    "init: a model configuration model init accepts",
    "train.warmup and train.decay: shares of train.steps that add up to 1 at most",
    "train: a plan model train accepts, with --shuffle and the schedule as the stage passes them",
    "train.context - 1 at most init.positions",
    "train.processes divides the micro-batches of a step",
    "resume.check is true or false",
    "resume.before_end names a checkpoint the train stage writes and keeps, where resume.check",
    "evaluate.train_windows: a whole number of windows",
    "report: a sample model sample accepts",
)

# The sections the pipeline's stages read, each checked below.
SECTIONS = ("documents", "splits", "tokenizer", "init", "train", "resume", "evaluate", "report")


def check_params(params: Path = Path("params.yaml"), output: Path | None = None) -> tuple[str, ...]:
    """Refuse params.yaml when its sections do not make a pipeline that can finish, naming the
    params; with `output`, write the rules checked there. Returns the rules."""
    if output is not None:
        check_replaceable(output)
    sections = read_params(params)
    for name in SECTIONS:
        if not isinstance(sections.get(name), dict):
            raise Refusal(f"{params} has no section {name}; the pipeline's stages read it")
    _check_documents(sections["documents"])
    splits, init, train = sections["splits"], sections["init"], sections["train"]
    as_params("splits", lambda: check_shares(splits["validation"], splits["test"]))
    tokenizer_args(sections["tokenizer"])
    _check_init(init)
    as_params("init", lambda: check_seed(init["seed"]))
    values = {key: value for key, value in train.items() if key in RunPlan.__dataclass_fields__}
    values.update(schedule_steps(train))
    plan = as_params("train", lambda: RunPlan(**values, shuffle=True))
    as_params("train", plan.validate)
    if train["context"] - 1 > init["positions"]:
        raise Refusal(
            f"train.context {train['context']} makes the model read {train['context'] - 1} "
            f"tokens, more than the init.positions {init['positions']} it has; raise "
            "init.positions or lower train.context"
        )
    micro_batches = plan.batch_size // plan.micro_batch
    processes = train.get("processes", 1)
    if not (isinstance(processes, int) and processes >= 1 and micro_batches % processes == 0):
        raise Refusal(
            f"train.processes {processes} does not divide the {micro_batches} micro-batches of a "
            f"step (train.batch_size {plan.batch_size} in train.micro_batch_size "
            f"{plan.micro_batch}); every process computes an equal share of each step"
        )
    resume = sections["resume"]
    if not isinstance(resume.get("check"), bool):
        raise Refusal(
            f"resume.check is {resume.get('check')}; it is true (the resume stage continues a "
            "checkpoint and compares it with the run) or false (the stage checks nothing)"
        )
    if resume["check"]:
        _check_resume(resume["before_end"], plan)
    windows = sections["evaluate"].get("train_windows")
    if isinstance(windows, bool) or not isinstance(windows, int) or windows < 1:
        raise Refusal(
            f"evaluate.train_windows is {windows}; it must be a whole number of 1 or more"
        )
    report = sections["report"]
    if not (isinstance(report["sample_tokens"], int) and report["sample_tokens"] >= 1):
        raise Refusal(
            f"report.sample_tokens is {report['sample_tokens']}; a sample needs one token or more"
        )
    as_params("report", lambda: check_seed(report["sample_seed"]))
    if output is not None:
        heading = f"The sections of {params.name} held to these rules:"
        replace_file(output, "\n".join([heading, *RULES, ""]).encode())
    return RULES


# The documents section, each key the flag of `documents import` it becomes, with its kind.
DOCUMENT_FLAGS = {
    "source": str, "include": list, "exclude": list, "skip-empty": bool,
    "skip-undecodable": bool, "id-column": str, "text-column": str,
}  # fmt: skip


def _check_documents(documents: dict) -> None:
    """The documents section is the import's flags: DVC passes each key as --key."""
    for key, value in documents.items():
        kind = DOCUMENT_FLAGS.get(key)
        if kind is None:
            raise Refusal(
                f"documents.{key} is no flag of zrodlo documents import; the section takes "
                f"{', '.join(DOCUMENT_FLAGS)}"
            )
        if not isinstance(value, kind) or (
            kind is list and not all(isinstance(v, str) for v in value)
        ):
            wanted = {str: "a string", list: "a list of patterns", bool: "true or false"}[kind]
            raise Refusal(f"documents.{key} is {value!r}; it is {wanted}")
    if not documents.get("source"):
        raise Refusal(
            "documents.source is not given; it is the folder, .jsonl, .parquet or .csv file the "
            "documents stage imports"
        )


def _check_init(init: dict) -> None:
    """The init section names a preset for the model's shape, which the stage passes as --preset;
    a shape key of its own would be read by nothing."""
    for key in SHAPE:
        if key in init:
            raise Refusal(
                f"init.{key} is read by no stage: the init stage takes the model's shape from "
                f"init.preset ({', '.join(PRESETS)})"
            )
    rest = {key: value for key, value in init.items() if key not in ("seed", "preset")}
    shape = as_params("init", lambda: shape_of(init.get("preset"), {}))
    as_params("init", lambda: ModelConfig(vocab_size=1, **shape, **rest).validate())


def _check_resume(before_end: Any, plan: RunPlan) -> None:
    """The checkpoint the resume stage continues, train.steps - resume.before_end, is one the train
    stage writes and retention keeps."""
    if isinstance(before_end, bool) or not isinstance(before_end, int) or before_end < 1:
        raise Refusal(f"resume.before_end is {before_end}; it must be a whole number of 1 or more")
    if before_end >= plan.steps:
        raise Refusal(
            f"resume.before_end {before_end} is not below train.steps {plan.steps}; the resume "
            "stage continues a checkpoint before the last step"
        )
    written = plan.checkpoint_steps(0)
    kept = written[-plan.keep_checkpoints :] if plan.keep_checkpoints else written
    start = plan.steps - before_end
    if start in kept:
        return
    names = ", ".join(f"step-{step}" for step in kept)
    held = f"train.steps {plan.steps}, train.checkpoint_every {plan.checkpoint_every}"
    if plan.keep_checkpoints:
        held += f" and train.keep_checkpoints {plan.keep_checkpoints}"
    choices = [plan.steps - step for step in kept if step < plan.steps]
    fix = (
        f"set resume.before_end to {' or '.join(map(str, choices))}"
        if choices
        else "keep two checkpoints or more"
    )
    raise Refusal(
        f"resume.before_end {before_end} has the resume stage continue step-{start}, and with "
        f"{held} the train stage keeps {names}; {fix}"
    )

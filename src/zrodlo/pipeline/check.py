"""The DVC pipeline's params (params.yaml), checked together before any stage runs work.

Each stage's command checks its own options, which it takes from its section
(`zrodlo.pipeline.sections`); here the same values are held to the same rules first, with
sentences that name the params, and so is what no command can see, how the sections agree: the
checkpoint the resume stage continues must be one the train stage writes and keeps, the context a
window reads must fit the model's positions, the processes must divide a step's micro-batches. The
`pipeline` stage checks all of it, so that an experiment that could not finish is refused before
it trains. Where init.from names a transformers directory to start from, the tokenizer and the
model are the directory's, and the keys of the tokenizer and init sections that would make them
are not read (the train stage holds the context to the imported model's positions).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from zrodlo.data.pools import check_shares
from zrodlo.data.tokenizer.fitting import check_fit
from zrodlo.draws.chacha import check_seed
from zrodlo.model.config import ModelConfig
from zrodlo.model.presets import SHAPE, shape_of
from zrodlo.pipeline.params import as_params, read_params
from zrodlo.pipeline.sections import COMMANDS, command_options, init_options
from zrodlo.storage.outputs import check_replaceable, replace_file
from zrodlo.storage.refusal import Refusal
from zrodlo.training.plan import RunPlan

# What the check holds the params to; the `params` stage writes these lines, which change only
# when the rules do, so the stages after it rerun for a change of their own params alone.
RULES = (
    "documents: a source and the flags documents import takes, cut where it says",
    "splits: a splits.json of your own that is a file, or shares that leave documents to train on",
    "every key of a stage's section: an option of the command the stage runs",
    "tokenizer: a kind and, for bpe, a vocabulary size tokenizer fit accepts",
    "prepare.enable_thinking: true, false or null",
    "init: a model configuration model init accepts, its shape a preset's where not given",
    "train.warmup and train.decay: shares of train.steps that add up to 1 at most",
    "train: a plan model train accepts, with --shuffle and the schedule as the stage passes them",
    "train.context - 1 at most init.positions",
    "train.processes divides the micro-batches of a step",
    "resume.check is true or false",
    "resume.before_end names a checkpoint the train stage writes and keeps, where resume.check",
    "evaluate.train_windows: a whole number of windows",
    "report: a sample model sample accepts",
)

# The folder that holds the transformers directories init.from may name. DVC hashes every
# dependency of a stage and refuses one whose path is null, so the tokenizer and init stages depend
# on this folder, which the repository keeps, whether or not init.from names a directory in it.
PRETRAINED = "pretrained"

# The documents file the documents stage writes and the splits stage reads (dvc.yaml). As
# splits.source it has the splits stage draw each id's pool from a hash of the id; any other path
# names a splits.json of the user's, a dependency of the stage, so dvc.lock holds its hash.
DOCUMENTS = "data/documents.jsonl"
_SOURCE_RULE = (
    f"it is {DOCUMENTS}, each id's pool drawn from a hash of the id, or a splits.json of your own"
)

# The sections the pipeline's stages read, each checked below.
SECTIONS = (
    "documents", "splits", "tokenizer", "prepare", "init", "train", "resume", "evaluate", "report",
)  # fmt: skip


def check_params(
    params: Path = Path("params.yaml"),
    output: Path | None = None,
    options: Mapping[str, Collection[str]] | None = None,
) -> tuple[str, ...]:
    """Refuse params.yaml when its sections do not make a pipeline that can finish, naming the
    params; with `options`, each command's options (the command line knows them), a key that is
    none of its command's is refused too. With `output`, write the rules checked there. Returns
    the rules."""
    if output is not None:
        check_replaceable(output)
    sections = read_params(params)
    for name in SECTIONS:
        if not isinstance(sections.get(name), dict):
            raise Refusal(f"{params} has no section {name}; the pipeline's stages read it")
    _check_documents(sections["documents"])
    taken = {
        command: command_options(sections, command, (options or {}).get(command), str(params))
        for command in COMMANDS
    }
    thinking = sections["prepare"].get("enable_thinking")
    if thinking is not None and not isinstance(thinking, bool):
        raise Refusal(
            f"prepare.enable_thinking is {thinking}; it is true or false (passed to a chat "
            "template as enable_thinking) or null (the template's own default)"
        )
    splits, init, train = sections["splits"], sections["init"], sections["train"]
    if _draws_pools(splits.get("source"), params.parent):  # else the shares are unread
        as_params("splits", lambda: check_shares(splits["validation"], splits["test"]))
    drawn = _check_from(init.get("from"))
    if drawn:
        tokenizer = taken["tokenizer fit"]
        as_params(
            "tokenizer", lambda: check_fit(tokenizer.get("kind"), tokenizer.get("vocab_size"))
        )
        config = _check_init(taken["model init"])
        as_params("init", lambda: check_seed(init["seed"]))
    values = {
        key: v for key, v in taken["model train"].items() if key in RunPlan.__dataclass_fields__
    }
    plan = as_params("train", lambda: RunPlan(**values, shuffle=True))
    as_params("train", plan.validate)
    if drawn and plan.adapters is not None:  # an import's projections are known once imported
        as_params("train", lambda: plan.adapters.check(config))
    if drawn and train["context"] - 1 > init["positions"]:
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
    "skip-undecodable": bool, "skip-invalid": bool, "id-column": str, "text-column": str,
    "cut-at": str, "max-characters": int,
}  # fmt: skip


def _check_documents(documents: dict) -> None:
    """The documents section is the import's flags, spelled with - or _ between words; null is
    none given."""
    for key, value in documents.items():
        kind = DOCUMENT_FLAGS.get(str(key).replace("_", "-"))
        if kind is None:
            raise Refusal(
                f"documents.{key} is no flag of zrodlo documents import; the section takes "
                f"{', '.join(DOCUMENT_FLAGS)}"
            )
        if value is None:
            continue
        if (
            not isinstance(value, kind)
            or (kind is int and isinstance(value, bool))
            or (kind is list and not all(isinstance(v, str) for v in value))
        ):
            wanted = {
                str: "a string", list: "a list of patterns", bool: "true or false",
                int: "a whole number",
            }[kind]  # fmt: skip
            raise Refusal(f"documents.{key} is {value!r}; it is {wanted}")
    if not documents.get("source"):
        raise Refusal(
            "documents.source is not given; it is the folder, .txt, .jsonl, .parquet or .csv "
            "file the documents stage imports"
        )


def _draws_pools(source: Any, root: Path) -> bool:
    """Whether the splits stage draws the pools (splits.source the documents file), or takes
    those of a splits.json of the user's, which must be a file where DVC looks for it, beside
    dvc.yaml and params.yaml. Its ids are checked by the splits stage, which reads the documents."""
    if not isinstance(source, str) or not source:
        raise Refusal(f"splits.source is {source!r}; {_SOURCE_RULE}")
    if PurePosixPath(source) == PurePosixPath(DOCUMENTS):
        return True
    if not (root / source).is_file():
        raise Refusal(f"splits.source is {source!r}, which is no file; {_SOURCE_RULE}")
    return False


def _check_from(source: Any) -> bool:
    """Whether the pipeline fits its tokenizer and draws its weights (init.from null), or imports
    the transformers directory init.from names, which must lie inside the folder the tokenizer and
    init stages depend on, so that dvc.lock holds its hash."""
    if source is None:
        return True
    parts = PurePosixPath(source).parts if isinstance(source, str) else ()
    # A quote would end the shell's quoting of the path in dvc.yaml's commands.
    if len(parts) < 2 or parts[0] != PRETRAINED or ".." in parts or "'" in source:
        raise Refusal(
            f"init.from is {source!r}; it is null, for a tokenizer fitted and weights drawn, or a "
            f"transformers directory inside {PRETRAINED}/, the folder the tokenizer and init "
            "stages depend on"
        )
    return False


def _check_init(init: dict[str, Any]) -> ModelConfig:
    """What model init takes from the init section: a preset's shape, with the shape keys given
    in their place, and the rest of a model's configuration; return that configuration."""
    init = init_options(init)  # what model init reads: another family's keys are unread
    given = {key: init.get(key) for key in SHAPE}
    rest = {key: v for key, v in init.items() if key not in ("seed", "preset", *SHAPE)}
    shape = as_params("init", lambda: shape_of(init.get("preset"), given))
    config = as_params("init", lambda: ModelConfig.of(vocab_size=1, **shape, **rest))
    as_params("init", config.validate)
    return config


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

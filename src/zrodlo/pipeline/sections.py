"""How each command a stage of dvc.yaml runs takes its options from params.yaml: the one road from
a param to a flag. `zrodlo --params params.yaml <command> ...` fills every option the command line
does not give from here; `zrodlo pipeline check` holds the same values to the commands' rules.

A command reads its stage's own section, every key one of its options (`skip-empty` and
`skip_empty` alike), and may take single values of other sections (the resume stage continues the
train stage's run); a null value is no value. Where the params say a thing otherwise than the flag
does, the section's conversion turns one into the other: the schedule's shares of train.steps
become whole updates, only the keys of the tokenizer kind in use reach tokenizer fit (and of the
model family in use, model init), and init.from
(the transformers directory the pipeline imports instead of running tokenizer fit and model init,
dvc.yaml passing it to the import commands) reaches no command.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

from zrodlo.data.tokenizer import FITTED
from zrodlo.model.config import foreign_settings
from zrodlo.model.families import FAMILIES
from zrodlo.pipeline.schedule import schedule_steps
from zrodlo.storage.refusal import Refusal


def _schedule(train: dict[str, Any]) -> dict[str, Any]:
    """train.warmup and train.decay, shares of train.steps, as model train's whole updates."""
    steps = schedule_steps(train)
    return {key: value for key, value in train.items() if key not in ("warmup", "decay")} | steps


def _kind_keys(tokenizer: dict[str, Any]) -> dict[str, Any]:
    """The kind, and the keys the kind takes (vocab_size is read for bpe only)."""
    name = tokenizer.get("kind")
    kind = FITTED.get(name) if isinstance(name, str) else None
    taken = {"kind", *(kind.fit_options if kind is not None else ())}
    return {key: value for key, value in tokenizer.items() if key in taken or kind is None}


def init_options(init: dict[str, Any]) -> dict[str, Any]:
    """The init section less `from`, the directory the init stage imports when it is set, and
    less the settings of the families other than the one in use (init.kv_heads for a gpt model),
    as only the keys of the tokenizer kind in use reach tokenizer fit: what model init takes."""
    taken = {key: value for key, value in init.items() if key != "from"}
    architecture = taken.get("architecture")
    if architecture is None or (isinstance(architecture, str) and architecture in FAMILIES):
        for key in foreign_settings(architecture, taken):
            del taken[key]
    return taken


@dataclass(frozen=True)
class Reads:
    """What a command reads: `section`, whose every key is an option of the command once
    `convert` has run, and `shared`: option -> "section.key" of a value another stage owns."""

    section: str | None
    shared: dict[str, str] = field(default_factory=dict)
    convert: Callable[[dict[str, Any]], dict[str, Any]] = dict


_RESUMED = ("steps", "eval_every", "eval_windows", "checkpoint_every", "device", "processes")
COMMANDS = {
    "documents import": Reads("documents"),
    "documents assign": Reads("splits"),
    "tokenizer fit": Reads("tokenizer", convert=_kind_keys),
    "corpus prepare": Reads("prepare"),
    "model init": Reads("init", convert=init_options),
    "model train": Reads("train", convert=_schedule),
    "checkpoint resume": Reads(None, {name: f"train.{name}" for name in _RESUMED}),
    "model evaluate": Reads(
        None,
        {
            "sample_windows": "evaluate.train_windows",
            "context": "train.context",
            "device": "train.device",
        },
    ),
    "report": Reads("report"),
    # The stages that choose by their params, each one command (stages/pipeline_*.py).
    "pipeline tokenizer": Reads("tokenizer", {"source": "init.from"}, convert=_kind_keys),
    "pipeline model": Reads("init", {"source": "init.from"}, convert=init_options),
    "pipeline resume": Reads(
        None,
        {name: f"train.{name}" for name in _RESUMED}
        | {"check": "resume.check", "before_end": "resume.before_end"},
    ),
}


def section_of(params: dict[str, Any], name: str, source: str) -> dict[str, Any]:
    """A section of the params read from `source`, refused where it is missing or not a table."""
    section = params.get(name)
    if not isinstance(section, dict):
        raise Refusal(f"{source} has no section {name}; the pipeline's stages read it")
    return section


def command_options(
    params: dict[str, Any],
    command: str,
    accepted: Collection[str] | None = None,
    source: str = "params.yaml",
) -> dict[str, Any]:
    """The options `zrodlo <command>` takes from the params read from `source`, by their names in
    the library (`skip_empty`); with `accepted`, the command's options, a key of its own section
    that is none of them is refused naming it."""
    reads = COMMANDS[command]
    values: dict[str, Any] = {}
    spelled: dict[str, str] = {}
    if reads.section is not None:
        section = section_of(params, reads.section, source)
        spelled = {str(key).replace("-", "_"): str(key) for key in section}
        values = reads.convert({str(key).replace("-", "_"): v for key, v in section.items()})
    for option, place in reads.shared.items():
        section_name, key = place.split(".")
        section = section_of(params, section_name, source)
        if key not in section:
            raise Refusal(f"{source} has no {place}; the stage that runs zrodlo {command} reads it")
        values[option] = section[key]
    if accepted is not None:
        for name in values:
            if name not in accepted and name not in reads.shared:
                shown = spelled.get(name, name)
                raise Refusal(
                    f"{reads.section}.{shown} is no flag of zrodlo {command}; its section takes "
                    f"the flags zrodlo {command} --help lists, with - or _ between words"
                )
    return {name: value for name, value in values.items() if value is not None}

"""The init stage's architecture flags: params.yaml's `init.architecture`, and for llama the
settings only it has (`kv_heads`, `rope_theta`, `tie_embeddings`, each optional), as model init's
flags, so that `dvc exp run -S init.architecture=llama -S init.kv_heads=2` switches the pipeline's
decoder."""

from __future__ import annotations

from pathlib import Path

from zrodlo.pipeline.params import read_params
from zrodlo.storage.refusal import Refusal

LLAMA_ONLY = ("kv_heads", "rope_theta", "tie_embeddings")


def architecture_args(init: object) -> dict:
    """model init's architecture keywords from the init section: gpt's settings alone, or llama's
    with the optional ones the section gives."""
    if not isinstance(init, dict):
        raise Refusal("params.yaml has no section init; the init stage reads it")
    architecture = init.get("architecture", "gpt")
    if architecture not in ("gpt", "llama"):
        raise Refusal(f"init.architecture is {architecture}; it is gpt or llama")
    # Absent, null and false give no flag; 0 is a value, refused where it is checked.
    given = {
        key: init[key] for key in LLAMA_ONLY if init.get(key) is not None and init[key] is not False
    }
    if architecture == "gpt" and given:
        raise Refusal(
            f"init.{next(iter(given))} is for init.architecture llama; a gpt model has none"
        )
    return {"architecture": architecture, **given}


def architecture_flags(params: Path = Path("params.yaml")) -> str:
    """The flags of `architecture_args` for the init stage's command line, from params.yaml."""
    args = architecture_args(read_params(params).get("init"))
    flags = []
    for name, value in args.items():
        flag = "--" + name.replace("_", "-")
        flags.append(flag if value is True else f"{flag} {value}")
    return " ".join(flags)

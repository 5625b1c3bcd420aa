"""The tokenizer stage's flags: params.yaml's tokenizer section (`kind`, and `vocab_size`, read
when the kind is bpe) as tokenizer fit's flags, so that `dvc exp run -S tokenizer.kind=bpe` alone
switches the pipeline to subword tokens."""

from __future__ import annotations

from pathlib import Path

from zrodlo.data.fitting import check_fit
from zrodlo.pipeline.params import as_params, read_params
from zrodlo.storage.refusal import Refusal


def tokenizer_args(section: object) -> dict:
    """tokenizer fit's keywords from the section, checked as the command checks them."""
    if not isinstance(section, dict):
        raise Refusal("params.yaml has no section tokenizer; the tokenizer stage reads it")
    kind = section.get("kind")
    vocab_size = section.get("vocab_size") if kind == "bpe" else None
    as_params("tokenizer", lambda: check_fit(kind, vocab_size))
    return {"kind": kind, "vocab_size": vocab_size}


def tokenizer_flags(params: Path = Path("params.yaml")) -> str:
    """The flags of `tokenizer_args` for the tokenizer stage's command line, from params.yaml."""
    args = tokenizer_args(read_params(params).get("tokenizer"))
    flags = f"--kind {args['kind']}"
    if args["vocab_size"] is not None:
        flags += f" --vocab-size {args['vocab_size']}"
    return flags

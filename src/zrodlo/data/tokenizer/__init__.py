"""Tokenizers, one module a kind on the base in `base.py`, and the registry of the kinds: a
tokenizer.json is read by the kind it names; `fitting.py` fits the kinds that are fitted.

    char          each character of the training documents (char.py)
    bpe           a byte-level BPE whose merges are learned from them (bpe.py, bpe_training.py)
    imported-bpe  a byte-level BPE the tokenizers library wrote, its ids as they are (imported.py)
    imported-sentencepiece  a SentencePiece-style BPE with byte fallback, the same way
                  (imported_sentencepiece.py, sentencepiece_file.py)

A new kind is a module with a class on `Tokenizer` and its line in `KINDS` (and in `FITTED` when
it is fitted: a `check_fit` and a `fit`).
"""

from __future__ import annotations

import json
from pathlib import Path

from zrodlo.data.tokenizer.base import FILE_NAME, Tokenizer
from zrodlo.data.tokenizer.bpe import BPETokenizer
from zrodlo.data.tokenizer.char import CharTokenizer
from zrodlo.data.tokenizer.imported import ImportedBPE
from zrodlo.data.tokenizer.imported_sentencepiece import ImportedSentencePiece
from zrodlo.storage import jsonfile
from zrodlo.storage.inputs import read_input
from zrodlo.storage.refusal import Refusal, listed

__all__ = ["FILE_NAME", "FITTED", "KINDS", "Tokenizer", "load_tokenizer"]

KINDS: dict[str, type[Tokenizer]] = {
    kind.kind: kind for kind in (CharTokenizer, BPETokenizer, ImportedBPE, ImportedSentencePiece)
}
# The kinds `tokenizer fit` makes, the first its default.
FITTED: dict[str, type[CharTokenizer | BPETokenizer]] = {
    kind.kind: kind for kind in (CharTokenizer, BPETokenizer)
}


def load_tokenizer(path: Path) -> Tokenizer:
    """Load a tokenizer directory (or any directory holding tokenizer.json, such as a model)."""
    file = path / FILE_NAME if path.is_dir() else path
    if not file.is_file():
        raise Refusal(
            f"{path} holds no {FILE_NAME}; a tokenizer is written by zrodlo tokenizer fit"
        )
    try:
        data = read_input(file)
    except OSError as error:
        raise Refusal(f"{file} does not load as a tokenizer: {error}") from None
    return tokenizer_from_bytes(file, data)


def tokenizer_from_bytes(file: Path, content: bytes | memoryview) -> Tokenizer:
    """The tokenizer whose tokenizer.json bytes are `content` (already read, maybe checked), of
    the kind the file names; refused where its content is not what its digest records."""

    def broken(reason: str) -> Refusal:
        return Refusal(f"{file} does not load as a tokenizer: {reason}")

    try:
        data = jsonfile.loads(content)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise broken(str(error)) from None
    named = data.get("kind") if isinstance(data, dict) else None
    kind = KINDS.get(named) if isinstance(named, str) else None
    if kind is None:
        kinds = listed([json.dumps(name) for name in KINDS])
        raise broken(f"it is not a JSON object of kind {kinds}")
    tokenizer = kind.from_document(data, broken)
    if data.get("digest") != tokenizer.digest:
        raise Refusal(
            f"{file} records digest {data.get('digest')}, and its content has digest "
            f"{tokenizer.digest}; the file was changed after it was fitted"
        )
    return tokenizer

"""Fitting a tokenizer on a documents file: the training documents only, written whole as a
tokenizer directory, of a kind the registry fits (`FITTED`: characters by default, or a byte-level
BPE of a vocabulary size the caller chooses)."""

from __future__ import annotations

from pathlib import Path

from zrodlo.data.documents import read_documents
from zrodlo.data.tokenizer import FITTED, Tokenizer
from zrodlo.storage.outputs import new_directory
from zrodlo.storage.refusal import Refusal, listed


def check_fit(kind: str, vocab_size: int | None) -> None:
    """Refuse a kind that is not fitted, or a vocabulary size the kind does not take."""
    if not isinstance(kind, str) or kind not in FITTED:
        raise Refusal(f"--kind is {kind}; it is {listed(list(FITTED))}")
    FITTED[kind].check_fit(vocab_size)


def fit_tokenizer(
    documents: Path, output: Path, kind: str = "char", vocab_size: int | None = None
) -> Tokenizer:
    """Fit a tokenizer of `kind` on `documents` and write it into the new directory `output`.

    char: UNK 0, BOS 1, EOS 2, then every character of the documents by code point from 3.
    bpe: BOS 0, EOS 1, the 256 bytes from 2, then the symbols merges make, `vocab_size` in all
    (fewer where the documents hold no more pairs to merge)."""
    check_fit(kind, vocab_size)
    with new_directory(output) as partial:
        texts = [document.text for document in read_documents(documents)]
        if not texts:
            raise Refusal(
                f"{documents} holds no documents; a tokenizer is fitted on one document or more"
            )
        tokenizer = FITTED[kind].fit(texts, vocab_size)
        tokenizer.save(partial)
    return tokenizer

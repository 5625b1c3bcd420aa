"""Fitting the character tokenizer on a documents file: the training documents only, written whole
as a tokenizer directory."""

from __future__ import annotations

from pathlib import Path

from zrodlo.data.documents import read_documents
from zrodlo.data.tokenizer import CharTokenizer
from zrodlo.storage.outputs import new_directory
from zrodlo.storage.refusal import Refusal


def fit_tokenizer(documents: Path, output: Path) -> CharTokenizer:
    """Fit a character tokenizer on `documents` and write it into the new directory `output`.

    Ids: UNK 0, BOS 1, EOS 2, then every character of the documents by code point from 3."""
    with new_directory(output) as partial:
        texts = [document.text for document in read_documents(documents)]
        if not texts:
            raise Refusal(
                f"{documents} holds no documents; a tokenizer is fitted on one document or more"
            )
        tokenizer = CharTokenizer.fit(texts)
        tokenizer.save(partial)
    return tokenizer

"""Fitting a tokenizer on a documents file: the training documents only, written whole as a
tokenizer directory. `char` (the default) is the character tokenizer; `bpe` a byte-level BPE of a
vocabulary size the caller chooses."""

from __future__ import annotations

from pathlib import Path

from zrodlo.data.documents import read_documents
from zrodlo.data.tokenizer import CharTokenizer, Tokenizer
from zrodlo.storage.outputs import new_directory
from zrodlo.storage.refusal import Refusal

KINDS = ("char", "bpe")


def check_fit(kind: str, vocab_size: int | None) -> None:
    """Refuse a kind that is none, or a vocabulary size the kind does not take."""
    if kind not in KINDS:
        raise Refusal(f"--kind is {kind}; it is char or bpe")
    if kind == "char" and vocab_size is not None:
        raise Refusal(
            "--vocab-size is for --kind bpe; a character tokenizer holds every character of the "
            "training documents"
        )
    if kind == "bpe":
        from zrodlo.data.bpe_tokenizer import SMALLEST_VOCABULARY, check_vocab_size

        if vocab_size is None:
            raise Refusal(
                f"--kind bpe needs --vocab-size, the tokens its vocabulary holds "
                f"({SMALLEST_VOCABULARY} or more)"
            )
        check_vocab_size(vocab_size)


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
        if kind == "char":
            tokenizer: Tokenizer = CharTokenizer.fit(texts)
        else:
            from zrodlo.data.bpe_tokenizer import SMALLEST_VOCABULARY, BPETokenizer
            from zrodlo.data.bpe_training import count_pieces, fit_merges

            merges = fit_merges(count_pieces(texts), vocab_size - SMALLEST_VOCABULARY)
            tokenizer = BPETokenizer(tuple(merges))
        tokenizer.save(partial)
    return tokenizer

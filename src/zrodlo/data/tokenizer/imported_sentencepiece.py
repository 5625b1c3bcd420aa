"""A SentencePiece-style BPE the user already has (Gemma's, Llama 2's, Mistral's, TinyLlama's
tokenizer.json, `sentencepiece_file.py` says which), kept with its own ids and encoded by the
`tokenizers` library exactly as the file says, as the byte-level import is (`imported.py`).

Zrodlo's tokenizer.json of kind "imported-sentencepiece" holds the same as an "imported-bpe" one.
A token's text is its piece with each mark read as a space, or the one byte of a byte token, so
bits per byte count the text's own UTF-8 bytes; where the layout puts a mark before each text
(Llama 2's), that mark is no byte of the text, and the windows' scores leave it out
(`Tokenizer.marks_before`). A document is encoded whole: pieces cross lines, so no cut between
lines is one the encoding would make itself.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np

from zrodlo.data.tokenizer.imported import ImportedBPE
from zrodlo.data.tokenizer.sentencepiece_file import (
    BYTE_TOKENS,
    MARK,
    marks_before,
    sentencepiece_problem,
)

KIND = "imported-sentencepiece"


class ImportedSentencePiece(ImportedBPE):
    """The library file's JSON text, the ids framing each document and its chat template, as an
    imported byte-level BPE holds them; encoded whole, its texts free of the word mark."""

    kind = KIND
    file_problem = staticmethod(sentencepiece_problem)

    @property
    def normal_form(self) -> str | None:  # type: ignore[override]
        return None

    @property
    def splits_at_lines(self) -> bool:  # type: ignore[override]
        return False

    @cached_property
    def marks_before(self) -> int:  # type: ignore[override]
        return marks_before(self.file)

    def text_problem(self, text: str) -> str | None:
        if MARK not in text:
            return None
        return (
            f"holding {MARK} (U+2581), the word mark the tokenizer writes each space as, so it would "
            "decode as a space; replace it first"
        )

    @cached_property
    def text_sizes(self) -> np.ndarray:
        """(2, V) int64: each token's UTF-8 bytes and the characters they start: a piece's text
        with each mark a space, a byte token's one byte; special tokens hold none, an added
        token its text."""
        byte_of = {token: byte for byte, token in enumerate(BYTE_TOKENS)}
        sizes = np.zeros((2, self.vocab_size), dtype=np.int64)
        for token, index in self.file["model"]["vocab"].items():
            if token in byte_of:
                sizes[:, index] = 1, byte_of[token] & 0xC0 != 0x80
            else:
                text = token.replace(MARK, " ")
                sizes[:, index] = len(text.encode("utf-8")), len(text)
        for added in self.file.get("added_tokens") or []:
            text = "" if added["special"] else added["content"]
            sizes[:, added["id"]] = len(text.encode("utf-8")), len(text)
        return sizes

"""What every kind of tokenizer shares: its tokenizer.json (the kind's canonical content, its size
and the digest over that content), saving it, and framing documents as BOS tokens EOS.

A kind (`char.py`, `bpe.py`, `imported.py`) says what it holds (`canonical`), reads it back
(`from_document`), encodes and decodes, and gives the `tokenizers` library's tokenizer that encodes
as it does (`library`), which export writes for transformers. The digest covers the canonical
content, so two tokenizers with one digest encode every text the same way.
"""

from __future__ import annotations

import unicodedata
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar, Self

import numpy as np

from zrodlo.data.tokenizer.chat_template import ChatTemplate
from zrodlo.storage.digest import json_sha256, write_json
from zrodlo.storage.refusal import Refusal

FILE_NAME = "tokenizer.json"
# Token ids are stored as uint32 in a corpus, and a fitted BPE's merges each rewrite the pieces
# that hold its pair: past a million entries a fit would take hours.
LARGEST_VOCABULARY = 1 << 20


class Tokenizer(ABC):
    """A tokenizer of some kind: `bos` and `eos` frame each document, `unk` is the id of a text it
    cannot encode (None for a kind that encodes every text)."""

    kind: ClassVar[str]
    bos: int
    eos: int
    unk: int | None
    # The Unicode normalization form the kind puts each text in before encoding it, or None: a
    # text in another form would come back changed, so it is refused (`text_problem`).
    normal_form: str | None = None
    # How many marks (each one byte and one character of a token's text) the kind puts before
    # each text that is not empty, in its first token: no part of the text (Llama 2's ▁).
    marks_before: int = 0
    # The chat template conversations are rendered with (an imported tokenizer's, where its files
    # carry one), or None for Zrodlo's plain form (`zrodlo.data.chat_encoding`).
    template: ChatTemplate | None = None

    @property
    @abstractmethod
    def vocab_size(self) -> int:
        """How many ids the tokenizer gives, from 0."""

    @property
    @abstractmethod
    def text_sizes(self) -> np.ndarray:
        """(2, V) int64: the UTF-8 bytes and the characters of each token's text (a frame, or a
        token whose text is unknown, holds none)."""

    @property
    @abstractmethod
    def library(self) -> Any:
        """The `tokenizers` library's tokenizer that encodes texts to these ids."""

    @abstractmethod
    def canonical(self) -> dict[str, Any]:
        """The content the digest is taken over, its "kind" first."""

    @classmethod
    @abstractmethod
    def from_document(cls, data: dict[str, Any], broken: Callable[[str], Refusal]) -> Self:
        """The tokenizer a parsed tokenizer.json of this kind holds; `broken(reason)` is the
        refusal for a file that holds none."""

    @abstractmethod
    def encode(self, text: str, out: np.ndarray | None = None) -> np.ndarray:
        """Token ids of a text, (n,) int32, without BOS or EOS; into `out` if given."""

    @abstractmethod
    def encode_documents(
        self, texts: list[str], dtype: np.dtype | type = np.int32, out: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Each text as BOS t1..tn EOS, one after another: (sum(n)+2k,) tokens of `dtype` (one
        that holds every id) and the (k,) lengths n+2; the start of `out` where it has room."""

    @abstractmethod
    def decode(self, ids: Iterable[int]) -> str:
        """Text of token ids; BOS and EOS are dropped."""

    def text_problem(self, text: str) -> str | None:
        """Why `text` would not decode back as written once encoded, the end of a sentence that
        names it; None for a text that would (every text, for a kind without a normal form)."""
        form = self.normal_form
        if form is None or unicodedata.is_normalized(form, text):
            return None
        return (
            f"not in Unicode normalization form {form}, which the tokenizer puts every text in "
            "before encoding it, so it would not decode back as written; normalize the text to "
            f"{form} first"
        )

    @cached_property
    def digest(self) -> str:
        return json_sha256(self.canonical())

    def document(self) -> dict[str, Any]:
        """What tokenizer.json holds."""
        return {**self.canonical(), "vocab_size": self.vocab_size, "digest": self.digest}

    def save(self, directory: Path) -> None:
        write_json(directory / FILE_NAME, self.document())


def framed(
    sizes: np.ndarray, ends_of: tuple[int, int], dtype: np.dtype | type, out: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray]:
    """Room for documents of `sizes` (k,) tokens each, one after another, each's first and last
    token written (`ends_of`: its BOS and EOS ids): the tokens (sum(sizes),) of `dtype`, the start
    of `out` where it has room for them all, and each document's end (k,)."""
    ends = np.cumsum(sizes)
    total = int(ends[-1]) if len(ends) else 0
    tokens = out[:total] if out is not None and total <= len(out) else np.empty(total, dtype)
    tokens[ends - sizes], tokens[ends - 1] = ends_of
    return tokens, ends

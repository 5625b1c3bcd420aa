"""Tokenizer files, and the character tokenizer: fitted on training documents only, encoding whole
batches at once. A tokenizer.json names its kind: "char" (here), "bpe" (`zrodlo.data.bpe_tokenizer`)
or "imported-bpe" (`zrodlo.data.bpe_import`); `load_tokenizer` reads each.

Ids: UNK 0, BOS 1, EOS 2, then the fitted characters from 3 in code point order. A character the
training documents never held encodes as UNK. Lone surrogates are not characters and are never
fitted. The digest covers the canonical form (kind, special ids, characters), so two tokenizers with
the same digest encode every text the same way.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Protocol

import numpy as np

from zrodlo.storage import jsonfile
from zrodlo.storage.digest import json_sha256, write_json
from zrodlo.storage.inputs import read_input
from zrodlo.storage.refusal import Refusal

UNK, BOS, EOS = 0, 1, 2
FIRST_CHARACTER = 3
SPECIAL = {"UNK": UNK, "BOS": BOS, "EOS": EOS}
FILE_NAME = "tokenizer.json"
_SURROGATES = (0xD800, 0xDFFF)


def code_points(text: str) -> np.ndarray:
    """The code points of a text, (len(text),) uint16 when every one is below U+10000, else
    uint32, without a Python loop per character."""
    # UTF-16 is half the bytes of UTF-32 and twice as fast to make; it holds each character in
    # two bytes exactly when none lies past U+FFFF (such a one takes four), so its length tells.
    # Lone surrogates pass through as the code points they are, in both.
    narrow = text.encode("utf-16-le", "surrogatepass")
    if len(narrow) == 2 * len(text):
        return np.frombuffer(narrow, dtype="<u2")
    return np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype="<u4")


@dataclass(frozen=True)
class CharTokenizer:
    """A character vocabulary; `points` are the fitted code points in id order from 3."""

    points: tuple[int, ...]

    kind = "char"
    bos, eos, unk = BOS, EOS, UNK

    @classmethod
    def fit(cls, texts: Iterable[str]) -> CharTokenizer:
        seen = np.zeros(0, dtype=np.uint32)
        for text in texts:
            seen = np.union1d(seen, np.unique(code_points(text)))
        outside = (seen < _SURROGATES[0]) | (seen > _SURROGATES[1])
        return cls(tuple(int(p) for p in seen[outside]))

    @property
    def vocab_size(self) -> int:
        return FIRST_CHARACTER + len(self.points)

    @property
    def characters(self) -> list[str]:
        return [chr(p) for p in self.points]

    def canonical(self) -> dict:
        """The content the digest is taken over."""
        return {"kind": "char", "special": SPECIAL, "characters": self.characters}

    @cached_property
    def digest(self) -> str:
        return json_sha256(self.canonical())

    @cached_property
    def text_sizes(self) -> np.ndarray:
        """(2, V) int64: the UTF-8 bytes and the characters of each token's text; BOS, EOS and
        UNK (whose character is not known) hold none."""
        sizes = np.zeros((2, self.vocab_size), dtype=np.int64)
        sizes[0, FIRST_CHARACTER:] = [len(c.encode("utf-8")) for c in self.characters]
        sizes[1, FIRST_CHARACTER:] = 1
        return sizes

    @cached_property
    def _table(self) -> np.ndarray:
        # One slot per code point up to the largest fitted one, plus a last slot for all beyond it.
        largest = self.points[-1] if self.points else 0
        table = np.full(largest + 2, UNK, dtype=np.int32)
        table[np.asarray(self.points, dtype=np.int64)] = np.arange(
            FIRST_CHARACTER, self.vocab_size, dtype=np.int32
        )
        return table

    def encode(self, text: str, out: np.ndarray | None = None) -> np.ndarray:
        """Character ids of a text, (len(text),) int32, without BOS or EOS; into `out` if given."""
        # Code points past the table clip to its last slot, which is UNK.
        return np.take(self._table, code_points(text), mode="clip", out=out)

    def encode_documents(
        self, texts: list[str], dtype: np.dtype | type = np.int32, out: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Each text as BOS c1..cn EOS, one after another: (sum(n)+2k,) tokens of `dtype` (one
        that holds every id) and the (k,) lengths n+2. The tokens are the start of `out` (of
        `dtype`) where it has room for them all, and a new array otherwise."""
        sizes = np.fromiter((len(t) + 2 for t in texts), dtype=np.int64, count=len(texts))
        tokens, ends = framed(sizes, (BOS, EOS), dtype, out)
        table = self._table.astype(dtype, copy=False)  # written straight in the wanted type
        # One vectorised encode a document, straight into its place between BOS and EOS.
        for text, end in zip(texts, ends.tolist(), strict=True):
            np.take(
                table, code_points(text), mode="clip", out=tokens[end - 1 - len(text) : end - 1]
            )
        return tokens, sizes

    def decode(self, ids: Iterable[int]) -> str:
        """Text of character ids; BOS and EOS are dropped and UNK reads as U+FFFD."""
        out = []
        for i in ids:
            i = int(i)
            if i >= FIRST_CHARACTER:
                out.append(chr(self.points[i - FIRST_CHARACTER]))
            elif i == UNK:
                out.append("\ufffd")
        return "".join(out)

    def document(self) -> dict:
        """What tokenizer.json holds."""
        return {**self.canonical(), "vocab_size": self.vocab_size, "digest": self.digest}

    def save(self, directory: Path) -> None:
        write_json(directory / FILE_NAME, self.document())

    @classmethod
    def from_document(cls, data: dict, broken: Callable[[str], Refusal]) -> CharTokenizer:
        """The tokenizer a parsed tokenizer.json of kind "char" holds; `broken(reason)` is the
        refusal for a file that holds none."""
        if data.get("special") != SPECIAL:
            raise broken("its special ids are not UNK 0, BOS 1, EOS 2")
        characters = data.get("characters")
        if not isinstance(characters, list) or not all(
            isinstance(c, str) and len(c) == 1 for c in characters
        ):
            raise broken("its characters are not a list of single characters")
        points = [ord(c) for c in characters]
        if any(a >= b for a, b in itertools.pairwise(points)):
            raise broken("its characters are not in strictly rising code point order")
        return cls(tuple(points))


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


class Tokenizer(Protocol):
    """What every kind of tokenizer offers: `CharTokenizer`, `BPETokenizer` and `ImportedBPE`. `unk` is None
    for a tokenizer that encodes every text without an unknown token."""

    kind: str
    bos: int
    eos: int
    unk: int | None

    @property
    def vocab_size(self) -> int: ...
    @property
    def digest(self) -> str: ...
    @property
    def text_sizes(self) -> np.ndarray: ...
    def canonical(self) -> dict: ...
    def document(self) -> dict: ...
    def save(self, directory: Path) -> None: ...
    def encode(self, text: str, out: np.ndarray | None = None) -> np.ndarray: ...
    def encode_documents(
        self, texts: list[str], dtype: np.dtype | type = np.int32, out: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]: ...
    def decode(self, ids: Iterable[int]) -> str: ...


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
    kind = data.get("kind") if isinstance(data, dict) else None
    if kind == "char":
        tokenizer: Tokenizer = CharTokenizer.from_document(data, broken)
    elif kind == "bpe":
        from zrodlo.data.bpe_tokenizer import BPETokenizer  # the tokenizers library, when needed

        tokenizer = BPETokenizer.from_document(data, broken)
    elif kind == "imported-bpe":
        from zrodlo.data.bpe_import import ImportedBPE

        tokenizer = ImportedBPE.from_document(data, broken)
    else:
        raise broken('it is not a JSON object of kind "char", "bpe" or "imported-bpe"')
    if data.get("digest") != tokenizer.digest:
        raise Refusal(
            f"{file} records digest {data.get('digest')}, and its content has digest "
            f"{tokenizer.digest}; the file was changed after it was fitted"
        )
    return tokenizer

"""The character tokenizer (kind "char"): fitted on training documents only, encoding whole
batches at once.

Ids: UNK 0, BOS 1, EOS 2, then the fitted characters from 3 in code point order. A character the
training documents never held encodes as UNK. Lone surrogates are not characters and are never
fitted. The digest covers the canonical form (kind, special ids, characters), so two tokenizers with
the same digest encode every text the same way.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
from tokenizers import Regex, decoders, models, pre_tokenizers
from tokenizers import Tokenizer as LibraryTokenizer

from zrodlo.data.tokenizer.base import Tokenizer, framed
from zrodlo.storage.refusal import Refusal

UNK, BOS, EOS = 0, 1, 2
FIRST_CHARACTER = 3
SPECIAL = {"UNK": UNK, "BOS": BOS, "EOS": EOS}
SPECIAL_TOKENS = {UNK: "<unk>", BOS: "<bos>", EOS: "<eos>"}  # their names in the library's file
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
class CharTokenizer(Tokenizer):
    """A character vocabulary; `points` are the fitted code points in id order from 3."""

    points: tuple[int, ...]

    kind = "char"
    bos, eos, unk = BOS, EOS, UNK
    fit_options = ()  # what `fit` takes besides the texts: the characters decide the vocabulary

    @staticmethod
    def check_fit(vocab_size: int | None) -> None:
        """Refuse a vocabulary size: the characters of the documents decide it."""
        if vocab_size is not None:
            raise Refusal(
                "--vocab-size is for --kind bpe; a character tokenizer holds every character of "
                "the training documents"
            )

    @classmethod
    def fit(cls, texts: Iterable[str], vocab_size: None = None) -> CharTokenizer:
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

    @cached_property
    def library(self) -> Any:
        """The library's word-level tokenizer over single characters, ids as here: a character
        it never saw is UNK."""
        vocabulary = {text: token for token, text in SPECIAL_TOKENS.items()}
        vocabulary.update({c: FIRST_CHARACTER + i for i, c in enumerate(self.characters)})
        built = LibraryTokenizer(models.WordLevel(vocabulary, unk_token=SPECIAL_TOKENS[UNK]))
        # One piece per code point, line breaks included; a piece not in the vocabulary is UNK.
        built.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
        built.decoder = decoders.Fuse()
        built.add_special_tokens(list(SPECIAL_TOKENS.values()))
        return built

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

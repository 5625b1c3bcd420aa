"""The byte-level BPE tokenizer: GPT-2's pre-tokenizer, the 256 bytes as its alphabet, and the merges
`zrodlo.data.bpe_training` learned from the training documents.

Ids: BOS 0, EOS 1, the bytes 0x00..0xFF as 2..257, then each symbol the merges made, in the order
they made it. Every text encodes without an unknown token, and decodes back to itself. The
`tokenizers` library encodes (its BPE applies the merges by their rank, as they were learned); the
digest covers the canonical form (kind, specials, pre-tokenizer, normalisation, vocabulary and
merges), so two tokenizers with one digest encode every text the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
from tokenizers import AddedToken, Tokenizer, decoders, models

from zrodlo.data.bpe_training import PIECES, byte_symbols
from zrodlo.data.tokenizer import FILE_NAME, framed
from zrodlo.storage.digest import json_sha256, write_json
from zrodlo.storage.refusal import Refusal

BOS, EOS = 0, 1
SPECIAL = {"BOS": BOS, "EOS": EOS}
SPECIAL_TOKENS = {BOS: "<bos>", EOS: "<eos>"}
FIRST_BYTE = 2
SMALLEST_VOCABULARY = FIRST_BYTE + 256
PRE_TOKENIZER = "gpt2"  # `bpe_training.PIECES`: GPT-2's split into words, numbers and the rest
NORMALIZATION = "none"  # texts are encoded as they are: no Unicode normalisation, no lowercasing


@dataclass(frozen=True)
class BPETokenizer:
    """The merges, each a pair of symbols written in GPT-2's byte stand-ins, in rank order."""

    merges: tuple[tuple[str, str], ...]

    kind = "bpe"
    bos, eos, unk = BOS, EOS, None

    @cached_property
    def vocabulary(self) -> list[str]:
        """Every token's text, by id: the specials' names, then the byte stand-ins and the merged
        symbols (a merge that spells a symbol already made adds none)."""
        tokens = [SPECIAL_TOKENS[BOS], SPECIAL_TOKENS[EOS], *byte_symbols()]
        seen = set(tokens)
        for left, right in self.merges:
            if left + right not in seen:
                seen.add(left + right)
                tokens.append(left + right)
        return tokens

    @property
    def vocab_size(self) -> int:
        return len(self.vocabulary)

    @cached_property
    def text_sizes(self) -> np.ndarray:
        """(2, V) int64: the UTF-8 bytes of each token and the characters they start (the bytes
        that are not a character's continuation, 0b10xxxxxx); BOS and EOS hold none."""
        byte_of = {symbol: byte for byte, symbol in enumerate(byte_symbols())}
        sizes = np.zeros((2, self.vocab_size), dtype=np.int64)
        for index, token in enumerate(self.vocabulary[FIRST_BYTE:], start=FIRST_BYTE):
            raw = [byte_of[symbol] for symbol in token]
            sizes[:, index] = len(raw), sum(byte & 0xC0 != 0x80 for byte in raw)
        return sizes

    def canonical(self) -> dict[str, Any]:
        """The content the digest is taken over."""
        return {
            "kind": self.kind,
            "special": SPECIAL,
            "pre_tokenizer": PRE_TOKENIZER,
            "normalization": NORMALIZATION,
            "vocabulary": self.vocabulary,
            "merges": [list(pair) for pair in self.merges],
        }

    @cached_property
    def digest(self) -> str:
        return json_sha256(self.canonical())

    @cached_property
    def library(self) -> Tokenizer:
        """The `tokenizers` library's tokenizer with this vocabulary and these merges."""
        vocabulary = {token: index for index, token in enumerate(self.vocabulary)}
        built = Tokenizer(models.BPE(vocabulary, list(self.merges)))
        built.pre_tokenizer = PIECES
        built.decoder = decoders.ByteLevel()
        built.add_special_tokens([AddedToken(SPECIAL_TOKENS[i], special=True) for i in (BOS, EOS)])
        return built

    def encode(self, text: str, out: np.ndarray | None = None) -> np.ndarray:
        """Token ids of a text, (n,) int32, without BOS or EOS; into `out` if given."""
        ids = np.asarray(self.library.encode(text, add_special_tokens=False).ids, dtype=np.int32)
        if out is None:
            return ids
        out[: len(ids)] = ids
        return out[: len(ids)]

    def encode_documents(
        self, texts: list[str], dtype: np.dtype | type = np.int32, out: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Each text as BOS t1..tn EOS, one after another: (sum(n)+2k,) tokens of `dtype` and the
        (k,) lengths n+2; in the start of `out` where it has room for them all."""
        parts = [_parts(text) for text in texts]
        flat = [part for text_parts in parts for part in text_parts]
        ids_of_parts = iter([ids for chunk in _chunks(flat) for ids in self._encode_batch(chunk)])
        encoded = [np.concatenate([next(ids_of_parts) for _ in text_parts]) for text_parts in parts]
        sizes = np.fromiter((len(ids) + 2 for ids in encoded), dtype=np.int64, count=len(texts))
        tokens, ends = framed(sizes, (BOS, EOS), dtype, out)
        for ids, end, size in zip(encoded, ends.tolist(), sizes.tolist(), strict=True):
            tokens[end - size + 1 : end - 1] = ids
        return tokens, sizes

    def _encode_batch(self, texts: list[str]) -> list[np.ndarray]:
        """Each text's ids, (n,) int32, encoded by the library on all cores at once."""
        encoded = self.library.encode_batch_fast(texts, add_special_tokens=False)
        return [np.asarray(encoding.ids, dtype=np.int32) for encoding in encoded]

    def decode(self, ids: Any) -> str:
        """Text of token ids; BOS and EOS are dropped, and bytes that end mid-character read as
        U+FFFD."""
        return self.library.decode([int(i) for i in ids], skip_special_tokens=True)

    def document(self) -> dict[str, Any]:
        """What tokenizer.json holds."""
        return {**self.canonical(), "vocab_size": self.vocab_size, "digest": self.digest}

    def save(self, directory: Path) -> None:
        write_json(directory / FILE_NAME, self.document())

    @classmethod
    def from_document(cls, data: dict[str, Any], broken: Any) -> BPETokenizer:
        """The tokenizer a parsed tokenizer.json of kind "bpe" holds; `broken(reason)` is the
        refusal for a file that holds none."""
        if data.get("special") != SPECIAL:
            raise broken("its special ids are not BOS 0, EOS 1")
        if (data.get("pre_tokenizer"), data.get("normalization")) != (PRE_TOKENIZER, NORMALIZATION):
            raise broken(f'its pre-tokenizer is not "{PRE_TOKENIZER}" with normalization "none"')
        merges = data.get("merges")
        if not isinstance(merges, list) or not all(
            isinstance(m, list) and len(m) == 2 and all(isinstance(s, str) and s for s in m)
            for m in merges
        ):
            raise broken("its merges are not a list of pairs of symbols")
        tokenizer = cls(tuple((left, right) for left, right in merges))
        known = set(byte_symbols())
        for left, right in tokenizer.merges:
            if left not in known or right not in known:
                raise broken(f"its merge {left} {right} joins a symbol no earlier merge made")
            known.add(left + right)
        if data.get("vocabulary") != tokenizer.vocabulary:
            raise broken("its vocabulary is not the one its merges make")
        return tokenizer


# The library's encodings hold far more than ids (each token's text, offsets, masks): texts are
# encoded this many characters at a time, so that their memory stays small beside the ids kept.
_CHUNK_CHARACTERS = 1 << 18


def _parts(text: str) -> list[str]:
    """A text cut before line breaks into parts of about `_CHUNK_CHARACTERS` characters, which
    encode to the text's ids one after another: GPT-2's split starts a piece at a line break that
    follows a visible character (no piece holds both), and BPE never merges across pieces. So a
    long document costs the library's memory for a part at a time."""
    parts, start = [], 0
    while len(text) - start > _CHUNK_CHARACTERS:
        cut = text.find("\n", start + _CHUNK_CHARACTERS)
        while cut != -1 and not "!" <= text[cut - 1] <= "~":  # after a visible ASCII character
            cut = text.find("\n", cut + 1)
        if cut == -1:
            break
        parts.append(text[start:cut])
        start = cut
    parts.append(text[start:])
    return parts


def _chunks(texts: list[str]) -> list[list[str]]:
    """The texts in order, in runs of about `_CHUNK_CHARACTERS` characters."""
    runs: list[list[str]] = [[]]
    held = 0
    for text in texts:
        if held >= _CHUNK_CHARACTERS:
            runs.append([])
            held = 0
        runs[-1].append(text)
        held += len(text)
    return [run for run in runs if run]


def check_vocab_size(vocab_size: int) -> None:
    """Refuse a BPE vocabulary that cannot hold the bytes and the specials, or one past the most
    a corpus stores (token ids are uint32)."""
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int):
        raise Refusal(f"--vocab-size is {vocab_size!r}; it must be a whole number")
    if not SMALLEST_VOCABULARY <= vocab_size <= LARGEST_VOCABULARY:
        raise Refusal(
            f"--vocab-size is {vocab_size}; a byte-level BPE holds the 256 bytes and BOS and EOS, "
            f"so it is {SMALLEST_VOCABULARY:,} or more, and at most {LARGEST_VOCABULARY:,}"
        )


# Each merge rewrites the pieces that hold its pair: past a million entries a fit would take hours.
LARGEST_VOCABULARY = 1 << 20

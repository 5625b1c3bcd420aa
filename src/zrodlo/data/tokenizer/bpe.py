"""The byte-level BPE tokenizer: GPT-2's pre-tokenizer, the 256 bytes as its alphabet, and the merges
`zrodlo.data.tokenizer.bpe_training` learned from the training documents.

Ids: BOS 0, EOS 1, the bytes 0x00..0xFF as 2..257, then each symbol the merges made, in the order
they made it. Every text encodes without an unknown token, and decodes back to itself. The
`tokenizers` library encodes (its BPE applies the merges by their rank, as they were learned); the
digest covers the canonical form (kind, specials, pre-tokenizer, normalisation, vocabulary and
merges), so two tokenizers with one digest encode every text the same way.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
from tokenizers import AddedToken, Tokenizer, decoders, models

from zrodlo.data.tokenizer.base import LARGEST_VOCABULARY
from zrodlo.data.tokenizer.bpe_training import PIECES, byte_symbols, count_pieces, fit_merges
from zrodlo.data.tokenizer.library_encoding import LibraryEncoding
from zrodlo.storage.refusal import Refusal

BOS, EOS = 0, 1
SPECIAL = {"BOS": BOS, "EOS": EOS}
SPECIAL_TOKENS = {BOS: "<bos>", EOS: "<eos>"}
FIRST_BYTE = 2
SMALLEST_VOCABULARY = FIRST_BYTE + 256
PRE_TOKENIZER = "gpt2"  # `bpe_training.PIECES`: GPT-2's split into words, numbers and the rest
NORMALIZATION = "none"  # texts are encoded as they are: no Unicode normalisation, no lowercasing


@dataclass(frozen=True)
class BPETokenizer(LibraryEncoding):
    """The merges, each a pair of symbols written in GPT-2's byte stand-ins, in rank order."""

    merges: tuple[tuple[str, str], ...]

    kind = "bpe"
    bos, eos, unk = BOS, EOS, None
    fit_options = ("vocab_size",)  # what `fit` takes besides the texts
    splits_at_lines = True  # GPT-2's pre-tokenizer

    @staticmethod
    def check_fit(vocab_size: int | None) -> None:
        """Refuse a vocabulary size that is not given, or that cannot hold the bytes and the
        specials, or is past the most a corpus stores."""
        if vocab_size is None:
            raise Refusal(
                f"--kind bpe needs --vocab-size, the tokens its vocabulary holds "
                f"({SMALLEST_VOCABULARY} or more)"
            )
        if isinstance(vocab_size, bool) or not isinstance(vocab_size, int):
            raise Refusal(f"--vocab-size is {vocab_size!r}; it must be a whole number")
        if not SMALLEST_VOCABULARY <= vocab_size <= LARGEST_VOCABULARY:
            raise Refusal(
                f"--vocab-size is {vocab_size}; a byte-level BPE holds the 256 bytes and BOS and "
                f"EOS, so it is {SMALLEST_VOCABULARY:,} or more, and at most "
                f"{LARGEST_VOCABULARY:,}"
            )

    @classmethod
    def fit(cls, texts: Iterable[str], vocab_size: int) -> BPETokenizer:
        """The BPE of `vocab_size` tokens (`check_fit` accepts it) learned from the texts; fewer
        where they hold no more pairs to merge."""
        return cls(tuple(fit_merges(count_pieces(texts), vocab_size - SMALLEST_VOCABULARY)))

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
    def library(self) -> Tokenizer:
        """The `tokenizers` library's tokenizer with this vocabulary and these merges."""
        vocabulary = {token: index for index, token in enumerate(self.vocabulary)}
        built = Tokenizer(models.BPE(vocabulary, list(self.merges)))
        built.pre_tokenizer = PIECES
        built.decoder = decoders.ByteLevel()
        built.add_special_tokens([AddedToken(SPECIAL_TOKENS[i], special=True) for i in (BOS, EOS)])
        built.encode_special_tokens = True  # a text holding "<eos>" is text: BOS and EOS only frame
        return built

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

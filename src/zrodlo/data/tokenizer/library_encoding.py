"""Encoding with the `tokenizers` library, for every BPE Zrodlo holds (its own and imported ones):
one text, or whole batches of documents framed by BOS and EOS on all cores, in bounded memory.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from zrodlo.data.tokenizer.base import Tokenizer, framed


class LibraryEncoding(Tokenizer):
    """Encoding and decoding through `library`, the `tokenizers` tokenizer that encodes for
    Zrodlo, with the ids `bos` and `eos` around each document. `splits_at_lines`: the
    pre-tokenizer never puts a line break that follows a visible ASCII character in one piece
    with what precedes it (GPT-2's split), so a long document may be encoded a part at a time.
    `kept_whole`: texts the library finds in a whole text before splitting it (added tokens), which
    a part must never end inside."""

    splits_at_lines: bool
    kept_whole: tuple[str, ...] = ()

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
        parts = [
            _parts(text, self.kept_whole) if self.splits_at_lines else [text] for text in texts
        ]
        flat = [part for text_parts in parts for part in text_parts]
        ids_of_parts = iter([ids for chunk in _chunks(flat) for ids in self._encode_batch(chunk)])
        encoded = [np.concatenate([next(ids_of_parts) for _ in text_parts]) for text_parts in parts]
        sizes = np.fromiter((len(ids) + 2 for ids in encoded), dtype=np.int64, count=len(texts))
        tokens, ends = framed(sizes, (self.bos, self.eos), dtype, out)
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


# The library's encodings hold far more than ids (each token's text, offsets, masks): texts are
# encoded this many characters at a time, so that their memory stays small beside the ids kept.
_CHUNK_CHARACTERS = 1 << 18


def _parts(text: str, kept_whole: tuple[str, ...] = ()) -> list[str]:
    """A text cut before line breaks into parts of about `_CHUNK_CHARACTERS` characters, which
    encode to the text's ids one after another: GPT-2's split starts a piece at a line break that
    follows a visible character (no piece holds both), and BPE never merges across pieces. So a
    long document costs the library's memory for a part at a time. No cut falls inside a text of
    `kept_whole` wherever it occurs, since the library finds those in the whole text first."""
    # A cut before a line break falls inside such a text only where the text holds that line
    # break after its first character: each (where the line break is in it, the text).
    straddling = [
        (at, kept) for kept in kept_whole for at, c in enumerate(kept) if c == "\n" and at > 0
    ]
    parts, start = [], 0
    while len(text) - start > _CHUNK_CHARACTERS:
        cut = text.find("\n", start + _CHUNK_CHARACTERS)
        while cut != -1 and (
            not "!" <= text[cut - 1] <= "~"  # after a visible ASCII character
            or any(at <= cut and text.startswith(kept, cut - at) for at, kept in straddling)
        ):
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

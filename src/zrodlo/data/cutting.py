"""Cutting texts into documents where the user says, so that one text file (tiny Shakespeare's
input.txt, say) becomes many documents, which the pools are then drawn from.

`cut_at` is a regular expression whose every match separates two documents (a run of blank lines:
`\\n\\s*\\n`); `max_characters` then cuts each piece longer than that into parts at the last line
break before the limit (or at the limit, in a line longer than it). A piece that is empty or only
white space is dropped. The pieces of a text with id `name` are `name#1`, `name#2`, ..., numbered
in text order, zero-padded to one width (`name#001` among a hundred or more) so that ids sort in
text order too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from zrodlo.storage.refusal import Refusal


@dataclass(frozen=True)
class Cutting:
    """Where texts are cut: at each match of `separator`, then into parts of at most
    `max_characters`; neither given, nowhere."""

    separator: re.Pattern[str] | None = None
    max_characters: int | None = None

    @classmethod
    def of(cls, cut_at: str | None, max_characters: int | None) -> Cutting:
        """The cutting the options `--cut-at` and `--max-characters` state, checked."""
        separator = None
        if cut_at is not None:
            try:
                separator = re.compile(cut_at)
            except re.error as error:
                raise Refusal(f"--cut-at {cut_at!r} is not a regular expression: {error}") from None
            if separator.fullmatch(""):
                raise Refusal(
                    f"--cut-at {cut_at!r} matches an empty text; the separator between two "
                    "documents holds one character or more, such as '\\n\\s*\\n' (a blank line)"
                )
        if max_characters is not None and (
            isinstance(max_characters, bool)
            or not isinstance(max_characters, int)
            or max_characters < 1
        ):
            raise Refusal(
                f"--max-characters is {max_characters}; it must be a whole number of 1 or more"
            )
        return cls(separator, max_characters)

    @property
    def cuts(self) -> bool:
        return self.separator is not None or self.max_characters is not None

    def pieces(self, text: str) -> list[str]:
        """The documents `text` is cut into, in order, without empty or blank ones."""
        parts = self.separator.split(text) if self.separator is not None else [text]
        if self.separator is not None and self.separator.groups:
            parts = parts[:: self.separator.groups + 1]  # split() adds what the groups caught
        if self.max_characters is not None:
            parts = [part for whole in parts for part in _limited(whole, self.max_characters)]
        return [part for part in parts if part.strip()]

    def documents(self, doc_id: str, text: str) -> list[tuple[str, str]]:
        """The (id, text) documents of one text: itself where nothing is cut, else its pieces
        numbered from its id."""
        if not self.cuts:
            return [(doc_id, text)]
        pieces = self.pieces(text)
        width = len(str(len(pieces)))
        return [(f"{doc_id}#{n:0{width}d}", piece) for n, piece in enumerate(pieces, start=1)]


def _limited(text: str, limit: int) -> list[str]:
    """`text` in parts of at most `limit` characters, each ending at the last line break within
    the limit where there is one."""
    parts, start = [], 0
    while len(text) - start > limit:
        cut = text.rfind("\n", start, start + limit)
        end = cut + 1 if cut >= start else start + limit
        parts.append(text[start:end])
        start = end
    parts.append(text[start:])
    return parts

"""Which documents of a source an import takes: the ids its patterns choose, and, only when asked,
without the empty ones, the files that are not UTF-8 and the chat documents that are no
conversation, each skipped one listed with its reason.

A pattern is shell-style (`*`, `?`, `[...]`) over a document's id, which for a folder is the file's
path relative to it: `*` crosses folders, so `*.py` takes every Python file at any depth.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path

from zrodlo.storage.outputs import check_new_file, new_file

EMPTY = "empty"
NOT_UTF8 = "not UTF-8"
INVALID = "not a conversation"


@dataclass(frozen=True)
class Selection:
    """What an import takes of its source; the default takes every document and skips none."""

    include: tuple[str, ...] = ()  # ids matching one of these, or every id where none is given
    exclude: tuple[str, ...] = ()  # ids matching one of these are left out
    skip_empty: bool = False  # leave out a document with an empty text, instead of refusing
    skip_undecodable: bool = False  # leave out a file that is not UTF-8, instead of refusing
    skip_invalid: bool = False  # leave out a chat document that is no conversation, likewise

    def takes(self, doc_id: str) -> bool:
        """Whether the patterns choose `doc_id` (before its text is read)."""
        chosen = not self.include or any(fnmatchcase(doc_id, p) for p in self.include)
        return chosen and not any(fnmatchcase(doc_id, pattern) for pattern in self.exclude)


EVERY = Selection()  # every document, none skipped


@dataclass
class Imported:
    """What an import wrote: the documents, the ids its patterns left out, and the documents it
    skipped as it was asked to, with the reason (`EMPTY`, `NOT_UTF8`, `INVALID`) and the file
    listing them."""

    documents: int = 0
    left_out: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)
    skipped_file: Path | None = None
    cut_from: int | None = None  # the texts cut into the documents, where they were cut

    def skipped_for(self, reason: str) -> int:
        return sum(1 for _, why in self.skipped if why == reason)


def skipped_file_of(output: Path) -> Path:
    """The side file beside a documents file that lists the documents its import skipped."""
    return output.with_name(output.name + ".skipped.jsonl")


def check_skipped_file(output: Path, selection: Selection, listed: Path | None = None) -> None:
    """Refuse, before anything is read, a list of skipped documents that exists where the import
    writes one: `listed` where given, else beside `output` where skipping may write one."""
    if listed is not None:
        check_new_file(listed)
    elif selection.skip_empty or selection.skip_undecodable or selection.skip_invalid:
        check_new_file(skipped_file_of(output))


def write_skipped(output: Path, imported: Imported, listed: Path | None = None) -> None:
    """List the skipped documents, each a JSON object with the id and the reason, one a line or,
    where the file's name ends in .json, in one JSON array (`[]` when none: a file a pipeline
    declares is then never empty): into `listed` where given, even when none was skipped, else
    beside `output` when there are any."""
    if not imported.skipped and listed is None:
        return
    imported.skipped_file = listed or skipped_file_of(output)
    entries = [{"id": doc_id, "reason": why} for doc_id, why in imported.skipped]
    if imported.skipped_file.suffix == ".json":
        text = json.dumps(entries, ensure_ascii=False, indent=1) + "\n"
    else:
        text = "".join(json.dumps(entry) + "\n" for entry in entries)
    with new_file(imported.skipped_file) as partial:
        partial.write_text(text, encoding="utf-8")

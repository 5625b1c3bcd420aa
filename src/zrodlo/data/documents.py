"""The documents file: one JSON object a line with a unique, non-empty string id and a non-empty text,
or, for a chat document, a conversation in `messages` (`zrodlo.data.conversation`) and no text.

Reading validates every line as it streams, so a file far larger than memory is checked with memory
that grows only with the number of ids. Fields other than id and text stay in the line untouched and
never enter the training text.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from zrodlo.data.conversation import Conversation, conversation, conversation_problem, plain_text
from zrodlo.storage import inputs, jsonfile
from zrodlo.storage.refusal import Refusal

_NEEDS = "each line holds one JSON object with an id and a text"
_READ_BUFFER = 1 << 20


class InvalidConversation(Refusal):
    """A chat document whose messages are no conversation; an import may skip it (`doc_id`)."""

    def __init__(self, sentence: str, doc_id: str) -> None:
        super().__init__(sentence)
        self.doc_id = doc_id


@dataclass(frozen=True)
class Document:
    """One validated line: its id, its text, its 1-based line number and the line's exact bytes;
    for a chat document its conversation too, and as text the conversation's plain form."""

    id: str
    text: str
    line: int
    raw: bytes
    messages: Conversation | None = None


def open_documents(path: Path) -> BinaryIO:
    """Open an input file for binary reading, or refuse with a sentence naming the path."""
    try:
        # A large buffer: documents run to tens of kilobytes a line, and a line longer than the
        # buffer is gathered from several reads.
        return inputs.open_input(path, "a documents file", buffering=_READ_BUFFER)
    except OSError as error:
        raise Refusal(f"{path} cannot be read: {error.strerror}") from None


# The longest line a documents file may hold, 256 MiB: a longer one (a file without line breaks, a
# sparse file of gigabytes) is refused after that many bytes, never read whole into memory.
MAX_LINE_BYTES = 1 << 28


def document_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """The lines of a documents file with their numbers from 1, each read up to the bound."""
    with open_documents(path) as handle:
        number = 0
        while raw := handle.readline(MAX_LINE_BYTES + 1):
            number += 1
            if len(raw) > MAX_LINE_BYTES:
                raise Refusal(
                    f"{path} line {number} is longer than {MAX_LINE_BYTES:,} bytes; {_NEEDS}, "
                    "a line a document"
                )
            yield number, raw


def is_unicode(text: str) -> bool:
    """Whether a string holds no lone surrogate, so that UTF-8 can encode it."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def parse_line(path: Path, number: int, raw: bytes, empty_text: bool = False) -> Document:
    """Validate one line of a documents file; an empty text is refused unless `empty_text`."""
    if not raw.strip():
        raise Refusal(f"{path} line {number} is empty; {_NEEDS}")
    try:
        value = jsonfile.loads(raw, only_text=False)
    except UnicodeDecodeError:
        raise Refusal(f"{path} line {number} is not UTF-8 text; {_NEEDS}") from None
    except json.JSONDecodeError as error:
        # One line is one document: the line of the file is the line to name.
        reason = error.problem if isinstance(error, jsonfile.JSONLimit) else error.msg
        raise Refusal(f"{path} line {number} is not valid JSON ({reason}); {_NEEDS}") from None
    if not isinstance(value, dict):
        kind = type(value).__name__
        raise Refusal(f"{path} line {number} holds a JSON {kind}, not an object; {_NEEDS}")
    if "id" not in value:
        raise Refusal(
            f"{path} line {number} has no id; each document needs an id that is a non-empty string"
        )
    doc_id = value["id"]
    if not isinstance(doc_id, str):
        raise Refusal(
            f"{path} line {number} has id {json.dumps(doc_id)}, which is not a string; "
            "each document needs an id that is a non-empty string"
        )
    if not doc_id:
        raise Refusal(
            f"{path} line {number} has an empty id; "
            "each document needs an id that is a non-empty string"
        )
    if not is_unicode(doc_id):
        raise Refusal(
            f"{path} line {number} has an id with a lone surrogate ({json.dumps(doc_id)}); "
            "an id must be Unicode text that UTF-8 can hold"
        )
    name = f"{path} line {number} (id {json.dumps(doc_id, ensure_ascii=False)})"
    if "messages" in value and "text" not in value:
        problem = conversation_problem(value["messages"])
        if problem is not None:
            raise InvalidConversation(f"{name} {problem}", doc_id)
        messages = conversation(value["messages"])
        return Document(doc_id, plain_text(messages), number, raw.rstrip(b"\r\n"), messages)
    if "text" not in value:
        raise Refusal(f"{name} has no text; each document needs a text that is a string")
    text = value["text"]
    if not isinstance(text, str):
        raise Refusal(
            f"{name} has text {json.dumps(text)[:40]}, which is not a string; "
            "each document needs a text that is a string"
        )
    if not text and not empty_text:
        raise Refusal(f"{name} has an empty text; a document needs one character or more")
    return Document(doc_id, text, number, raw.rstrip(b"\r\n"))


def read_documents(path: Path) -> Iterator[Document]:
    """Stream the validated documents of a file, refusing the first bad line or duplicate id."""
    first_line: dict[str, int] = {}
    for number, raw in document_lines(path):
        document = parse_line(path, number, raw)
        earlier = first_line.setdefault(document.id, number)
        if earlier != number:
            shown = json.dumps(document.id, ensure_ascii=False)
            raise Refusal(
                f"{path} lines {earlier} and {number} both have id {shown}; "
                "every document needs an id of its own"
            )
        yield document


def batched(documents: Iterable[Document], characters: int) -> Iterator[list[Document]]:
    """Group documents into lists of about `characters` characters, bounding memory per batch."""
    batch: list[Document] = []
    size = 0
    for document in documents:
        batch.append(document)
        size += len(document.text)
        if size >= characters:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def document_line(doc_id: str, text: str) -> bytes:
    """The JSONL line Zrodlo writes for a document (UTF-8, no trailing newline)."""
    return json.dumps({"id": doc_id, "text": text}, ensure_ascii=False).encode("utf-8")

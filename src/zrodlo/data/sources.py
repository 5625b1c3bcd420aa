"""Where documents come from before they are a documents file: a folder of text files, one text
file, a documents file (JSONL), or a Parquet or CSV table with id and text columns
(`zrodlo.data.tables`); the default documents are `zrodlo.data.torch_docs`.

Each source yields (id, text) pairs, which may be cut into more documents (`zrodlo.data.cutting`);
`write_documents` checks them as the documents file does and writes the JSONL that the rest of
Zrodlo reads.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from zrodlo.data.conversation import Conversation, chat_line
from zrodlo.data.cutting import Cutting
from zrodlo.data.documents import (
    InvalidConversation,
    document_line,
    document_lines,
    is_unicode,
    parse_line,
)
from zrodlo.data.selection import (
    EMPTY,
    EVERY,
    INVALID,
    NOT_UTF8,
    Imported,
    Selection,
    check_skipped_file,
    write_skipped,
)
from zrodlo.data.tables import TABLE_SUFFIXES, table_documents
from zrodlo.storage.inputs import open_input
from zrodlo.storage.outputs import check_new_file, new_file
from zrodlo.storage.refusal import Refusal


def folder_documents(
    folder: Path, selection: Selection = EVERY, imported: Imported | None = None
) -> Iterator[tuple[str, str]]:
    """Every file under a folder that `selection` takes, id = its path relative to the folder (with
    /), in id order; `imported` counts what was left out and skipped.

    Hidden files and folders (names starting with a dot) are skipped.
    """
    imported = Imported() if imported is None else imported
    files = sorted(
        (path.relative_to(folder).as_posix(), path)
        for path in folder.rglob("*")
        if path.is_file()
        and not any(part.startswith(".") for part in path.relative_to(folder).parts)
    )
    for doc_id, path in files:
        if not selection.takes(doc_id):
            imported.left_out += 1
            continue
        if not is_unicode(doc_id):
            raise Refusal(
                f"{folder} holds a file whose name is not UTF-8 ({doc_id.encode('utf-8', 'replace').decode()}); "
                "a file's relative path becomes its id, so rename it"
            )
        try:
            with open_input(path) as handle:
                text = handle.read().decode("utf-8")
        except UnicodeDecodeError as error:
            if selection.skip_undecodable:
                imported.skipped.append((doc_id, NOT_UTF8))
                continue
            raise Refusal(
                f"{path} is not UTF-8 text (byte {error.start}); every file of a folder of "
                "documents is read as UTF-8"
            ) from None
        if selection.skip_empty and not text:
            imported.skipped.append((doc_id, EMPTY))
            continue
        yield doc_id, text


def text_documents(
    path: Path, selection: Selection = EVERY, imported: Imported | None = None
) -> Iterator[tuple[str, str]]:
    """One text file as one document, id = its name (cut into more by `zrodlo.data.cutting`)."""
    imported = Imported() if imported is None else imported
    if not selection.takes(path.name):
        imported.left_out += 1
        return
    try:
        with open_input(path) as handle:
            text = handle.read().decode("utf-8")
    except UnicodeDecodeError as error:
        raise Refusal(
            f"{path} is not UTF-8 text (byte {error.start}); a text file is read as UTF-8"
        ) from None
    if selection.skip_empty and not text:
        imported.skipped.append((path.name, EMPTY))
        return
    yield path.name, text


def jsonl_documents(
    path: Path, selection: Selection = EVERY, imported: Imported | None = None
) -> Iterator[tuple[str, str | Conversation]]:
    """The documents of a documents file (JSONL, one object a line with an id and a text or a
    conversation in messages; other fields are dropped) that `selection` takes, in file order."""
    imported = Imported() if imported is None else imported
    for number, raw in document_lines(path):
        try:
            document = parse_line(path, number, raw, empty_text=selection.skip_empty)
        except InvalidConversation as invalid:
            if not selection.skip_invalid:
                raise
            if selection.takes(invalid.doc_id):
                imported.skipped.append((invalid.doc_id, INVALID))
            else:
                imported.left_out += 1
            continue
        if not selection.takes(document.id):
            imported.left_out += 1
        elif document.messages is not None:
            yield document.id, document.messages
        elif not document.text:
            imported.skipped.append((document.id, EMPTY))
        else:
            yield document.id, document.text


def source_documents(
    source: Path,
    id_column: str,
    text_column: str,
    selection: Selection = EVERY,
    imported: Imported | None = None,
) -> Iterator[tuple[str, str]]:
    """The documents of a folder, a text file, a documents file or a table, chosen by what
    `source` is and by `selection`, which `imported` counts."""
    if source.is_dir():
        return folder_documents(source, selection, imported)
    if source.is_file() and source.suffix.lower() in TABLE_SUFFIXES:
        return table_documents(source, id_column, text_column, selection, imported)
    if source.is_file() and source.suffix.lower() == ".jsonl":
        return jsonl_documents(source, selection, imported)
    if source.is_file() and source.suffix.lower() == ".txt":
        return text_documents(source, selection, imported)
    if not source.exists():
        raise Refusal(
            f"{source} does not exist; import reads a folder, a .txt, a .jsonl, a .parquet or a "
            ".csv file"
        )
    raise Refusal(
        f"{source} is neither a folder nor a .txt, .jsonl, .parquet or .csv file; import reads "
        "those five forms"
    )


def cut(
    pairs: Iterable[tuple[str, str | Conversation]], cutting: Cutting, imported: Imported
) -> Iterator[tuple[str, str | Conversation]]:
    """Each (id, text) pair as the documents `cutting` cuts it into; `imported` counts the texts
    cut. A conversation is never cut."""
    if cutting.cuts:
        imported.cut_from = 0
    for doc_id, text in pairs:
        if cutting.cuts and not isinstance(text, str):
            raise Refusal(
                f"document {json.dumps(doc_id, ensure_ascii=False)} is a conversation, which is "
                "not cut: a chat document is one conversation, so import it without --cut-at "
                "and --max-characters"
            )
        if cutting.cuts:
            imported.cut_from += 1
        yield from cutting.documents(doc_id, text)


def write_documents(
    pairs: Iterable[tuple[str, str | Conversation]], output: Path, source: str
) -> int:
    """Write checked (id, text or conversation) pairs as a documents file; return how many were
    written."""
    first: dict[str, int] = {}
    count = 0
    with open(output, "wb") as handle:
        for number, (doc_id, text) in enumerate(pairs, start=1):
            shown = json.dumps(doc_id, ensure_ascii=False)
            if not doc_id:
                raise Refusal(f"{source} document {number} has an empty id; ids must not be empty")
            earlier = first.setdefault(doc_id, number)
            if earlier != number:
                raise Refusal(
                    f"{source} documents {earlier} and {number} both have id {shown}; "
                    "every document needs an id of its own"
                )
            if not text:
                raise Refusal(
                    f"{source} document {shown} has an empty text; a document needs one "
                    "character or more"
                )
            line = document_line(doc_id, text) if isinstance(text, str) else chat_line(doc_id, text)
            handle.write(line + b"\n")
            count += 1
    if count == 0:
        raise Refusal(f"{source} holds no documents; import needs one document or more")
    return count


def import_documents(
    source: Path,
    output: Path,
    id_column: str = "id",
    text_column: str = "text",
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
    skip_empty: bool = False,
    skip_undecodable: bool = False,
    skipped: Path | None = None,
    cut_at: str | None = None,
    max_characters: int | None = None,
    skip_invalid: bool = False,
) -> Imported:
    """Write the documents of a folder of UTF-8 files, a text file, a documents file or a Parquet
    or CSV table as the new documents file `output`: those whose ids match `include` (all where
    empty) and not `exclude`, skipping empty texts, files that are not UTF-8 and chat documents
    that are no conversation only when asked (they are listed beside `output`, or in `skipped`
    where given, `zrodlo.data.selection`), each cut into documents at `cut_at` and into parts of
    `max_characters` where given
    (`zrodlo.data.cutting`); return what was written, left out and skipped."""
    selection = Selection(
        tuple(include), tuple(exclude), skip_empty, skip_undecodable, skip_invalid
    )
    cutting = Cutting.of(cut_at, max_characters)
    check_new_file(output)
    check_skipped_file(output, selection, skipped)
    imported = Imported()
    chosen = source_documents(source, id_column, text_column, selection, imported)
    pairs = cut(chosen, cutting, imported)
    with new_file(output) as partial:
        imported.documents = write_documents(pairs, partial, str(source))
    write_skipped(output, imported, skipped)
    return imported

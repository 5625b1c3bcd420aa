"""Where documents come from before they are a documents file: a folder of text files, or a Parquet
or CSV table with id and text columns (the default documents are `zrodlo.data.torch_docs`).

Each source yields (id, text) pairs; `write_documents` checks them as the documents file does and
writes the JSONL that the rest of Zrodlo reads.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from zrodlo.data.documents import document_line, is_unicode
from zrodlo.data.selection import (
    EMPTY,
    NOT_UTF8,
    Imported,
    Selection,
    check_skipped_file,
    write_skipped,
)
from zrodlo.storage.inputs import open_input
from zrodlo.storage.outputs import check_new_file, new_file
from zrodlo.storage.refusal import Refusal

TABLE_SUFFIXES = {".parquet": "Parquet", ".csv": "CSV"}
EVERY = Selection()  # every document, none skipped


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


def table_documents(
    table: Path,
    id_column: str,
    text_column: str,
    selection: Selection = EVERY,
    imported: Imported | None = None,
) -> Iterator[tuple[str, str]]:
    """Rows of a Parquet or CSV table that `selection` takes, streamed in record batches; ids may
    be strings or integers; `imported` counts what was left out and skipped."""
    imported = Imported() if imported is None else imported
    kind = TABLE_SUFFIXES[table.suffix.lower()]
    try:
        batches = _table_batches(table, kind, id_column, text_column)
        row = 0
        for batch in batches:
            ids = batch.column(id_column)
            if pa.types.is_integer(ids.type):
                ids = ids.cast(pa.string())
            if not _is_string(ids.type):
                raise Refusal(
                    f"{table} has column {id_column} of type {ids.type}; ids are strings or integers"
                )
            texts = batch.column(text_column)
            if not _is_string(texts.type):
                raise Refusal(
                    f"{table} has column {text_column} of type {texts.type}; texts are strings"
                )
            pairs = zip(
                _decoded(table, ids, "an id", row),
                _decoded(table, texts, "a text", row),
                strict=True,
            )
            for doc_id, text in pairs:
                row += 1
                if doc_id is None or text is None:
                    empty = id_column if doc_id is None else text_column
                    raise Refusal(
                        f"{table} row {row} has no {empty}; every row needs an id and a text"
                    )
                if not selection.takes(doc_id):
                    imported.left_out += 1
                elif selection.skip_empty and not text:
                    imported.skipped.append((doc_id, EMPTY))
                else:
                    yield doc_id, text
    except (pa.ArrowInvalid, pa.ArrowKeyError, OSError) as error:
        raise Refusal(f"{table} does not read as a {kind} table: {error}") from None


def _is_string(kind: pa.DataType) -> bool:
    return pa.types.is_string(kind) or pa.types.is_large_string(kind)


def _decoded(table: Path, column: pa.Array, role: str, rows_before: int) -> list[str | None]:
    """A string column's values. Parquet stores strings as bytes that no writer has to check, so a
    value that is not UTF-8 is refused, naming its row."""
    try:
        return column.to_pylist()
    except UnicodeDecodeError:
        binary = pa.large_binary() if pa.types.is_large_string(column.type) else pa.binary()
        for row, value in enumerate(column.cast(binary).to_pylist(), start=rows_before + 1):
            try:
                value is None or value.decode("utf-8")
            except UnicodeDecodeError as error:
                raise Refusal(
                    f"{table} row {row} has {role} that is not UTF-8 (byte {error.start}); a "
                    "table's strings are read as UTF-8"
                ) from None
        raise


def _table_batches(
    table: Path, kind: str, id_column: str, text_column: str
) -> Iterator[pa.RecordBatch]:
    open_input(table, f"a {kind} table").close()  # pyarrow would wait on a FIFO's writer
    if kind == "Parquet":
        parquet = pq.ParquetFile(table)
        _check_columns(table, parquet.schema_arrow.names, id_column, text_column)
        yield from parquet.iter_batches(columns=[id_column, text_column])
        return
    yield from _csv_batches(table, id_column, text_column)


# pyarrow reads a CSV in blocks, and a row must fit in one: start at 1 MiB and, when a row is larger,
# read again with blocks four times as large, skipping the rows already given. A block is an int32.
_FIRST_CSV_BLOCK = 1 << 20
_LARGEST_CSV_BLOCK = 2**31 - 1


def _csv_batches(table: Path, id_column: str, text_column: str) -> Iterator[pa.RecordBatch]:
    convert = pacsv.ConvertOptions(
        column_types={id_column: pa.string(), text_column: pa.string()},
        include_columns=[id_column, text_column],
        strings_can_be_null=False,
    )
    # A quoted cell may hold line breaks (RFC 4180), so rows are not cut at every newline.
    parse = pacsv.ParseOptions(newlines_in_values=True)
    block, given = _FIRST_CSV_BLOCK, 0
    while True:
        read = pacsv.ReadOptions(block_size=block)
        try:
            header = pacsv.open_csv(table, read_options=read, parse_options=parse).schema.names
            _check_columns(table, header, id_column, text_column)
            seen = 0
            batches = pacsv.open_csv(
                table, read_options=read, parse_options=parse, convert_options=convert
            )
            for batch in batches:
                if seen + batch.num_rows > given:
                    yield batch.slice(max(0, given - seen))
                    given = seen + batch.num_rows
                seen += batch.num_rows
            return
        except pa.ArrowInvalid as error:
            if "block size" not in str(error) or block == _LARGEST_CSV_BLOCK:
                raise
            block = min(4 * block, _LARGEST_CSV_BLOCK)


def _check_columns(table: Path, names: list[str], id_column: str, text_column: str) -> None:
    missing = sorted({id_column, text_column} - set(names))
    if missing:
        raise Refusal(
            f"{table} has no column {missing[0]}; a table of documents needs the columns "
            f"{id_column} and {text_column} (see --id-column and --text-column)"
        )
    for column, role in ((id_column, "id"), (text_column, "text")):
        if names.count(column) > 1:
            raise Refusal(
                f"{table} has {names.count(column)} columns named {column}; a document takes its "
                f"{role} from one column, so rename the others or choose another with "
                f"--{role}-column"
            )


def source_documents(
    source: Path,
    id_column: str,
    text_column: str,
    selection: Selection = EVERY,
    imported: Imported | None = None,
) -> Iterator[tuple[str, str]]:
    """The documents of a folder or a table, chosen by what `source` is and by `selection`, which
    `imported` counts."""
    if source.is_dir():
        return folder_documents(source, selection, imported)
    if source.is_file() and source.suffix.lower() in TABLE_SUFFIXES:
        return table_documents(source, id_column, text_column, selection, imported)
    if not source.exists():
        raise Refusal(f"{source} does not exist; import reads a folder, a .parquet or a .csv file")
    raise Refusal(
        f"{source} is neither a folder nor a .parquet or .csv file; import reads those three forms"
    )


def write_documents(pairs: Iterable[tuple[str, str]], output: Path, source: str) -> int:
    """Write checked (id, text) pairs as a documents file; return how many were written."""
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
            handle.write(document_line(doc_id, text) + b"\n")
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
) -> Imported:
    """Write the documents of a folder of UTF-8 files or a Parquet or CSV table as the new
    documents file `output`: those whose ids match `include` (all where empty) and not `exclude`,
    skipping empty texts and files that are not UTF-8 only when asked (they are listed beside
    `output`, `zrodlo.data.selection`); return what was written, left out and skipped."""
    selection = Selection(tuple(include), tuple(exclude), skip_empty, skip_undecodable)
    check_new_file(output)
    check_skipped_file(output, selection)
    imported = Imported()
    pairs = source_documents(source, id_column, text_column, selection, imported)
    with new_file(output) as partial:
        imported.documents = write_documents(pairs, partial, str(source))
    write_skipped(output, imported)
    return imported

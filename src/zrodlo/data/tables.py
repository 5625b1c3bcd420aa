"""Documents from a Parquet or CSV table with an id and a text column, streamed in record batches
so that a table larger than memory is read in bounded memory. A Parquet table with a `messages`
column in place of the text column holds chat documents (`zrodlo.data.conversation`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from zrodlo.data.conversation import MESSAGES, Conversation, conversation, conversation_problem
from zrodlo.data.selection import EMPTY, EVERY, INVALID, Imported, Selection
from zrodlo.storage.inputs import open_input
from zrodlo.storage.refusal import Refusal

TABLE_SUFFIXES = {".parquet": "Parquet", ".csv": "CSV"}


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
            if MESSAGES in batch.schema.names:
                for doc_id, messages in zip(
                    _decoded(table, ids, "an id", row),
                    batch.column(MESSAGES).to_pylist(),
                    strict=True,
                ):
                    row += 1
                    chat = _conversation(table, row, doc_id, messages, selection, imported)
                    if chat is not None:
                        yield doc_id, chat
                continue
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


def _conversation(
    table: Path, row: int, doc_id: str | None, messages: object, selection: Selection,
    imported: Imported,
) -> Conversation | None:  # fmt: skip
    """A row's conversation, or None for a row left out or skipped (counted in `imported`)."""
    if doc_id is None:
        raise Refusal(f"{table} row {row} has no id; every row needs an id and messages")
    if not selection.takes(doc_id):
        imported.left_out += 1
        return None
    problem = conversation_problem(messages)
    if problem is None:
        return conversation(messages)  # type: ignore[arg-type]
    if not selection.skip_invalid:
        raise Refusal(f"{table} row {row} (id {doc_id}) {problem}")
    imported.skipped.append((doc_id, INVALID))
    return None


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
        names = parquet.schema_arrow.names
        if text_column not in names and MESSAGES in names:  # chat documents
            text_column = MESSAGES
        _check_columns(table, names, id_column, text_column)
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

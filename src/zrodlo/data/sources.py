"""Where documents come from before they are a documents file: a folder of text files, a Parquet or
CSV table with id and text columns, or the default documents, the docstrings of torch.nn's modules in
the torch the project pins (the same bytes on every Python, checked against their recorded sha256).

Each source yields (id, text) pairs; `write_documents` checks them as the documents file does and
writes the JSONL that the rest of Zrodlo reads.
"""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import json
import warnings
from collections.abc import Iterable, Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from zrodlo.data.documents import document_line, is_unicode
from zrodlo.storage.digest import file_sha256
from zrodlo.storage.refusal import Refusal

TABLE_SUFFIXES = {".parquet": "Parquet", ".csv": "CSV"}


# The default documents: every docstring of the modules under torch/nn/modules of the pinned torch.
# The files are read as source, never imported, so the text is what the files hold whatever Python
# runs them (Python 3.13 strips a docstring's indentation on import; the source keeps it).
DEFAULT_TORCH = "2.13.0"
DEFAULT_PACKAGE_FOLDER = "nn/modules"
# The sha256 of the documents file they make: what `zrodlo documents torch-docs` writes with the
# pinned torch, measured when the pin was chosen, and the same with Python 3.10.13, 3.11.7, 3.12.1
# and 3.13.0 reading its files. A torch whose docstrings differ is refused.
DEFAULT_DOCUMENTS_SHA256 = "c50abfe6b52a32628e90f446815b8b26844bfccb7949cc34a7ea527d64670890"


def torch_folder() -> Path:
    """The folder of the installed torch package, found without importing it."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        raise Refusal("torch is not installed; install the package with its pinned dependencies")
    return Path(spec.submodule_search_locations[0])


def check_default_torch() -> None:
    """Refuse a torch other than the pinned one, whose docstrings would be other documents."""
    installed = importlib.metadata.version("torch")
    if installed.split("+")[0] != DEFAULT_TORCH:
        raise Refusal(
            f"torch {installed} is installed, and the default documents are the docstrings of "
            f"torch {DEFAULT_TORCH}; install torch=={DEFAULT_TORCH}, as pyproject.toml pins it"
        )


def write_default_documents(output: Path) -> int:
    """Write the default documents into `output` and check them against their recorded sha256;
    return how many there are."""
    check_default_torch()
    package = torch_folder()
    source = f"torch {DEFAULT_TORCH}'s {DEFAULT_PACKAGE_FOLDER}"
    count = write_documents(docstring_documents(package, DEFAULT_PACKAGE_FOLDER), output, source)
    written = file_sha256(output)
    if written != DEFAULT_DOCUMENTS_SHA256:
        raise Refusal(
            f"the docstrings of {package / DEFAULT_PACKAGE_FOLDER} make documents with sha256 "
            f"{written}, and the default documents have sha256 {DEFAULT_DOCUMENTS_SHA256}; that "
            f"torch is not the torch {DEFAULT_TORCH} the project pins, so install it again with "
            "make repro"
        )
    return count


def docstring_documents(package: Path, folder: str) -> Iterator[tuple[str, str]]:
    """The docstrings of every module, class and function in package/folder, one document each,
    in file order then source order; the id is the qualified name (`torch.nn.modules.linear.Linear`),
    the text the docstring with its common indentation removed."""
    seen: set[str] = set()
    for file in sorted((package / folder).rglob("*.py")):
        parts = file.relative_to(package.parent).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        with warnings.catch_warnings():  # invalid escapes in old docstrings are not our concern
            warnings.simplefilter("ignore")
            tree = ast.parse(file.read_bytes(), filename=str(file))
        for name, text in _docstrings(tree, module):
            if name not in seen and text:
                seen.add(name)
                yield name, text


def _docstrings(node: ast.AST, name: str) -> Iterator[tuple[str, str]]:
    body = getattr(node, "body", [])
    first = body[0] if body else None
    if (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    ):
        yield name, _dedented(first.value.value)
    for child in body:
        if isinstance(child, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            yield from _docstrings(child, f"{name}.{child.name}")


def _dedented(text: str) -> str:
    """A docstring as it reads: the first line stripped, the others' common leading spaces removed,
    trailing spaces and the blank lines around it dropped."""
    lines = [line.rstrip() for line in text.expandtabs(8).split("\n")]
    rest = [line for line in lines[1:] if line]
    margin = min((len(line) - len(line.lstrip(" ")) for line in rest), default=0)
    lines = [lines[0].strip(), *(line[margin:] for line in lines[1:])]
    return "\n".join(lines).strip("\n")


def folder_documents(folder: Path) -> Iterator[tuple[str, str]]:
    """Every file under a folder, id = its path relative to the folder (with /), in id order.

    Hidden files and folders (names starting with a dot) are skipped.
    """
    files = sorted(
        (path.relative_to(folder).as_posix(), path)
        for path in folder.rglob("*")
        if path.is_file()
        and not any(part.startswith(".") for part in path.relative_to(folder).parts)
    )
    for doc_id, path in files:
        if not is_unicode(doc_id):
            raise Refusal(
                f"{folder} holds a file whose name is not UTF-8 ({doc_id.encode('utf-8', 'replace').decode()}); "
                "a file's relative path becomes its id, so rename it"
            )
        try:
            yield doc_id, path.read_bytes().decode("utf-8")
        except UnicodeDecodeError as error:
            raise Refusal(
                f"{path} is not UTF-8 text (byte {error.start}); every file of a folder of "
                "documents is read as UTF-8"
            ) from None


def table_documents(table: Path, id_column: str, text_column: str) -> Iterator[tuple[str, str]]:
    """Rows of a Parquet or CSV table, streamed in record batches; ids may be strings or integers."""
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


def source_documents(source: Path, id_column: str, text_column: str) -> Iterator[tuple[str, str]]:
    """The documents of a folder or a table, chosen by what `source` is."""
    if source.is_dir():
        return folder_documents(source)
    if source.is_file() and source.suffix.lower() in TABLE_SUFFIXES:
        return table_documents(source, id_column, text_column)
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

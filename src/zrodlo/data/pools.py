"""The pools train, validation and test: assigning ids to them, reading splits.json, splitting.

Pools are assigned per document id, never per window, so no text of a held-out document is ever
trained on. Assignment hashes each id alone, so adding documents never moves an existing one; a
user who chooses the pools writes a splits.json of their own, which is checked as splits.json is.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from pathlib import Path

from zrodlo.data.documents import read_documents
from zrodlo.data.formats import PoolsManifest
from zrodlo.storage import jsonfile
from zrodlo.storage.digest import file_sha256, write_json
from zrodlo.storage.inputs import read_input
from zrodlo.storage.outputs import check_new_file, new_directory, new_file
from zrodlo.storage.refusal import Refusal

POOLS = ("train", "validation", "test")
_ONE_POOL = "every id belongs to exactly one pool"
# The test pool may be empty (--test 0, as a split of train and validation alone); the others not.
_NEEDED = "train and validation each need one document or more, and test does with --test above 0"


def _quoted(doc_id: str) -> str:
    """An id as JSON writes it, so quotes, spaces and control characters show."""
    return json.dumps(doc_id, ensure_ascii=False)


def id_position(doc_id: str) -> float:
    """Where an id falls in [0, 1): the first 8 bytes of its UTF-8 sha256 as a fraction."""
    head = hashlib.sha256(doc_id.encode("utf-8")).digest()[:8]
    return int.from_bytes(head, "big") / 2**64


def check_fraction(flag: str, value: float) -> None:
    if not (0.0 <= value < 1.0):
        raise Refusal(
            f"{flag} is {value!r}; it must be a fraction from 0 up to but not including 1"
        )


def check_shares(validation: float, test: float) -> None:
    """Refuse shares of held-out documents that are no fractions, or that leave none to train on."""
    check_fraction("--validation", validation)
    check_fraction("--test", test)
    if validation + test >= 1.0:
        raise Refusal(
            f"--validation {validation!r} and --test {test!r} leave no documents to train on; "
            "their sum must be below 1"
        )


def assign_pools(
    ids: list[str], validation: float, test: float, source: Path
) -> dict[str, list[str]]:
    """Pools by id hash: below `validation` goes to validation, the next `test` to test, the rest train."""
    check_shares(validation, test)
    pools: dict[str, list[str]] = {pool: [] for pool in POOLS}
    for doc_id in ids:
        position = id_position(doc_id)
        if position < validation:
            pools["validation"].append(doc_id)
        elif position < validation + test:
            pools["test"].append(doc_id)
        else:
            pools["train"].append(doc_id)
    for pool, flag in (("train", None), ("validation", validation), ("test", test)):
        if not pools[pool] and not (pool == "test" and test == 0):  # --test 0: no test pool
            asked = "what --validation and --test leave" if flag is None else f"--{pool} {flag!r}"
            puts = "does not put it" if len(ids) == 1 else "puts none of them"
            raise Refusal(
                f"{source} has {_documents(len(ids))}, and {asked} {puts} in the {pool} pool; "
                f"{_NEEDED}, so {_remedy(ids, pool)}"
            )
    return pools


def _documents(count: int) -> str:
    return f"{count} document{'' if count == 1 else 's'}"


def _remedy(ids: list[str], pool: str) -> str:
    """What to do about a pool the shares left empty."""
    if len(ids) < 10:  # too few for shares to fill three pools
        return (
            "cut the texts into more documents: documents import --cut-at '\\n\\s*\\n' cuts a "
            "text at its blank lines, --max-characters into parts"
        )
    if pool == "train":
        return "lower --validation and --test"
    return f"raise --{pool}"


def read_splits(path: Path) -> dict[str, str]:
    """Read and check splits.json; return the pool of every id it names."""
    try:
        # Ids of millions of documents: a larger bound than other JSON files.
        data = jsonfile.loads(read_input(path, limit=1 << 30))
    except OSError as error:
        raise Refusal(f"{path} cannot be read: {error.strerror}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        reason = getattr(error, "msg", "not UTF-8")
        raise Refusal(
            f"{path} is not valid JSON ({reason}); it holds one object with the pools "
            "train, validation and test"
        ) from None
    if not isinstance(data, dict):
        raise Refusal(
            f"{path} holds a JSON {type(data).__name__}, not an object; it holds one object "
            "with the pools train, validation and test"
        )
    for name in data:
        if name not in POOLS:
            raise Refusal(
                f"{path} names a pool {_quoted(name)}; the pools are train, validation and test"
            )
    pool_of: dict[str, str] = {}
    for pool in POOLS:
        ids = data.get(pool, [])
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            raise Refusal(f"{path} gives the {pool} pool something other than a list of id strings")
        if not ids and pool != "test":
            raise Refusal(
                f"{path} gives the {pool} pool no ids; train and validation each need one or "
                "more (test may have none)"
            )
        for doc_id in ids:
            earlier = pool_of.get(doc_id)
            if earlier == pool:
                raise Refusal(f"{path} lists id {_quoted(doc_id)} twice in {pool}; {_ONE_POOL}")
            if earlier is not None:
                raise Refusal(
                    f"{path} puts id {_quoted(doc_id)} in both {earlier} and {pool}; {_ONE_POOL}"
                )
            pool_of[doc_id] = pool
    return pool_of


def _pool_of_document(
    pool_of: dict[str, str], doc_id: str, line: int, documents: Path, splits: Path
) -> str:
    """The pool splits.json puts a document in, refused where it puts it in none."""
    pool = pool_of.get(doc_id)
    if pool is None:
        raise Refusal(
            f"{documents} line {line} has id {_quoted(doc_id)}, which {splits} puts in no pool; "
            "every document belongs to exactly one pool"
        )
    return pool


def _check_every_id_found(
    pool_of: dict[str, str], seen: set[str], documents: Path, splits: Path
) -> None:
    """Refuse a splits.json naming an id that no document has."""
    for doc_id, pool in pool_of.items():
        if doc_id not in seen:
            raise Refusal(
                f"{splits} names id {_quoted(doc_id)} in {pool}, and no document of {documents} "
                "has it"
            )


def chosen_pools(documents: Path, splits: Path) -> dict[str, list[str]]:
    """The pools of a splits.json a user wrote, held to what `split` holds it to (every document
    in one pool, every id a document's), each in the order of the documents file, so that they are
    written as the pools `assign_pools` draws."""
    pool_of = read_splits(splits)
    pools: dict[str, list[str]] = {pool: [] for pool in POOLS}
    seen: set[str] = set()
    for document in read_documents(documents):
        pool = _pool_of_document(pool_of, document.id, document.line, documents, splits)
        pools[pool].append(document.id)
        seen.add(document.id)
    _check_every_id_found(pool_of, seen, documents, splits)
    return pools


def split_documents(documents: Path, splits: Path, output: Path) -> PoolsManifest:
    """Write each pool's documents (their lines as read) into the directory `output`.

    Returns the manifest: counts per pool and the sha256 of every input and output file.
    """
    pool_of = read_splits(splits)
    seen: set[str] = set()
    counts = {pool: {"documents": 0, "characters": 0} for pool in POOLS}
    with contextlib.ExitStack() as stack:
        handles = {
            pool: stack.enter_context(open(output / f"{pool}.jsonl", "wb")) for pool in POOLS
        }
        for document in read_documents(documents):
            pool = _pool_of_document(pool_of, document.id, document.line, documents, splits)
            seen.add(document.id)
            handles[pool].write(document.raw + b"\n")
            counts[pool]["documents"] += 1
            counts[pool]["characters"] += len(document.text)
    _check_every_id_found(pool_of, seen, documents, splits)
    return {
        "documents": {"path": str(documents), "sha256": file_sha256(documents)},
        "splits": {"path": str(splits), "sha256": file_sha256(splits)},
        "pools": {
            pool: {**counts[pool], "sha256": file_sha256(output / f"{pool}.jsonl")}
            for pool in POOLS
        },
    }


def assign(
    documents: Path,
    output: Path,
    validation: float = 0.1,
    test: float = 0.1,
    source: Path | None = None,
) -> dict[str, list[str]]:
    """Write splits.json `output`: each id of `documents` in the pool a hash of the id alone puts
    it in, so that adding documents never moves an existing one; or, where `source` is a
    splits.json of the user's rather than `documents` itself, its pools, checked against the
    documents (the shares then unread). Return the pools."""
    check_new_file(output)
    if source is not None and source.resolve() != documents.resolve():
        pools = chosen_pools(documents, source)
    else:
        ids = [document.id for document in read_documents(documents)]
        pools = assign_pools(ids, validation, test, documents)
    with new_file(output) as partial:
        write_json(partial, pools)
    return pools


def split(documents: Path, splits: Path, output: Path) -> PoolsManifest:
    """Write each pool's documents (train.jsonl, validation.jsonl, test.jsonl) and manifest.json
    into the new directory `output`; return the manifest: counts and sha256 of every file."""
    with new_directory(output) as partial:
        manifest = split_documents(documents, splits, partial)
        write_json(partial / "manifest.json", manifest)
    return manifest

"""A prepared corpus: documents encoded by one tokenizer, in Arrow IPC, with a content digest.

`tokens.arrow` holds one row per document (id, tokens BOS c1..cn EOS); `corpus.json` records the
tokenizer digest, the corpus digest, the counts, the digests of the source and of tokens.arrow, and
the sha256 of its own canonical content (`manifest_sha256`). Preparation streams the documents in
bounded batches and encodes each batch with array operations. Opening a corpus trusts no recorded
digest: the manifest is checked against its own digest, tokens.arrow against its sha256, and the
corpus digest is computed again from the tokens read.

The corpus digest is taken over content only, in this canonical byte form, document after document:
the id's UTF-8 length (u64 LE), the id's bytes, the token count (u64 LE) and the tokens (u32 LE each),
after the prefix `zrodlo-corpus-v1`. The same content has the same digest whatever the file's
chunking, compression or path.
"""

from __future__ import annotations

import hashlib
import json
import struct
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

from zrodlo import jsonfile
from zrodlo.digest import file_sha256, json_sha256, write_json
from zrodlo.documents import batched, read_documents
from zrodlo.output import check_new_directory, new_directory
from zrodlo.refusal import Refusal
from zrodlo.tokenizer import UNK, CharTokenizer

# 2: corpus.json carries manifest_sha256, the digest of its own content.
FORMAT_VERSION = 2
TOKENS_FILE = "tokens.arrow"
MANIFEST_FILE = "corpus.json"
SCHEMA = pa.schema([("id", pa.string()), ("tokens", pa.list_(pa.int32()))])
_DIGEST_PREFIX = b"zrodlo-corpus-v1"
_BATCH_CHARACTERS = 1 << 22


class ContentDigest:
    """The running corpus digest over (id, tokens) pairs in the canonical byte form."""

    def __init__(self) -> None:
        self._hash = hashlib.sha256(_DIGEST_PREFIX)

    def update(self, ids: list[str], tokens: np.ndarray, offsets: np.ndarray) -> None:
        """Add documents: ids (k,), their tokens flat (N,), offsets (k+1,) into tokens."""
        # Token ids are never negative, so their int32 bytes are their u32 bytes: a view, not a
        # copy (astype copies only on a big-endian machine).
        data = (
            np.ascontiguousarray(tokens, dtype=np.int32).view(np.uint32).astype("<u4", copy=False)
        )
        for i, doc_id in enumerate(ids):
            encoded = doc_id.encode("utf-8")
            start, end = int(offsets[i]), int(offsets[i + 1])
            self._hash.update(struct.pack("<Q", len(encoded)) + encoded)
            self._hash.update(struct.pack("<Q", end - start))
            self._hash.update(data[start:end].data)

    def hexdigest(self) -> str:
        return self._hash.hexdigest()


class _WrittenDigest:
    """The sha256 of a file that is still being written, taken over the bytes already on disk."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._hash = hashlib.sha256()
        self._done = 0

    def update(self, end: int) -> None:
        """Hash the file's bytes up to `end`, read back from the page cache."""
        with open(self.path, "rb") as handle:
            handle.seek(self._done)
            while self._done < end:
                chunk = handle.read(min(1 << 22, end - self._done))
                self._hash.update(chunk)
                self._done += len(chunk)

    def finish(self) -> str:
        self.update(self.path.stat().st_size)
        return self._hash.hexdigest()


def _hash_batch(
    content: ContentDigest,
    written: _WrittenDigest,
    ids: list[str],
    tokens: np.ndarray,
    offsets: np.ndarray,
    end: int,
) -> None:
    content.update(ids, tokens, offsets)
    written.update(end)


def prepare(documents: Path, tokenizer: Path, output: Path) -> dict:
    """Encode a documents file with the tokenizer (or model) directory `tokenizer` into the new
    corpus directory `output`; return its manifest, as corpus.json records it."""
    check_new_directory(output)
    fitted = CharTokenizer.load(tokenizer)
    with new_directory(output) as partial:
        return prepare_corpus(documents, fitted, partial)


def prepare_corpus(
    documents: Path,
    tokenizer: CharTokenizer,
    output: Path,
    batch_characters: int = _BATCH_CHARACTERS,
) -> dict:
    """Encode a documents file into the directory `output`; return the manifest written there.

    Digests run on a second thread (hashlib releases the GIL), overlapping the encoding: the source
    file, the content of each batch, and tokens.arrow as far as it is written. At most one batch waits
    to be hashed, so memory stays bounded by two batches whatever the input size.
    """
    content = ContentDigest()
    written = _WrittenDigest(output / TOKENS_FILE)
    count = characters = unknown = 0
    with ThreadPoolExecutor(max_workers=2) as hashing:
        source_digest = hashing.submit(file_sha256, documents)
        pending = None
        with (
            pa.OSFile(str(written.path), "wb") as sink,
            ipc.new_file(sink, SCHEMA) as writer,
        ):
            for batch in batched(read_documents(documents), batch_characters):
                ids = [document.id for document in batch]
                tokens, sizes = tokenizer.encode_documents([document.text for document in batch])
                offsets = np.zeros(len(sizes) + 1, dtype=np.int32)
                np.cumsum(sizes, out=offsets[1:])
                lists = pa.ListArray.from_arrays(pa.array(offsets), pa.array(tokens, pa.int32()))
                writer.write_batch(pa.record_batch([pa.array(ids, pa.string()), lists], SCHEMA))
                if pending is not None:
                    pending.result()
                pending = hashing.submit(
                    _hash_batch, content, written, ids, tokens, offsets, sink.tell()
                )
                count += len(ids)
                characters += len(tokens) - 2 * len(ids)
                unknown += int(np.count_nonzero(tokens == UNK))
        if pending is not None:
            pending.result()
        tokens_digest = written.finish()
    if count == 0:
        raise Refusal(f"{documents} holds no documents; a corpus needs one document or more")
    manifest = {
        "format_version": FORMAT_VERSION,
        "tokenizer_digest": tokenizer.digest,
        "corpus_digest": content.hexdigest(),
        "documents": count,
        "characters": characters,
        "tokens": characters + 2 * count,
        "targets": characters + count,
        "unknown_tokens": unknown,
        "unknown_rate": unknown / characters,
        "source": {"path": str(documents), "sha256": source_digest.result()},
        "tokens_sha256": tokens_digest,
    }
    manifest["manifest_sha256"] = json_sha256(manifest)
    write_json(output / MANIFEST_FILE, manifest)
    return manifest


@dataclass(frozen=True)
class Corpus:
    """An opened corpus: `tokens` (N,) int32 all documents one after another, `offsets` (D+1,) int64."""

    path: Path
    manifest: dict
    tokens: np.ndarray
    offsets: np.ndarray

    @property
    def digest(self) -> str:
        return self.manifest["corpus_digest"]

    @property
    def tokenizer_digest(self) -> str:
        return self.manifest["tokenizer_digest"]

    @classmethod
    def open(cls, path: Path) -> Corpus:
        """Open a corpus directory, checking tokens.arrow against the digest corpus.json records."""
        manifest_file, tokens_file = path / MANIFEST_FILE, path / TOKENS_FILE
        if not manifest_file.is_file():
            raise Refusal(
                f"{path} holds no {MANIFEST_FILE}; a corpus is written by zrodlo corpus prepare"
            )
        manifest = _read_manifest(manifest_file)
        if not tokens_file.is_file():
            raise Refusal(f"{path} holds no {TOKENS_FILE}; prepare the corpus again")
        actual = file_sha256(tokens_file)
        if actual != manifest["tokens_sha256"]:
            raise Refusal(
                f"{tokens_file} has sha256 {actual}, and {manifest_file} records "
                f"{manifest['tokens_sha256']}; the corpus was changed after it was prepared"
            )
        try:
            table = ipc.open_file(pa.memory_map(str(tokens_file))).read_all()
        except (pa.ArrowException, OSError) as error:
            raise Refusal(f"{tokens_file} does not load as Arrow IPC: {error}") from None
        if table.schema != SCHEMA:
            raise Refusal(f"{tokens_file} does not hold the columns id and tokens of a corpus")
        tokens, offsets = _flatten(table.column("tokens"))
        if len(offsets) - 1 != manifest["documents"] or len(tokens) != manifest["tokens"]:
            raise Refusal(
                f"{tokens_file} holds {len(offsets) - 1} documents and {len(tokens)} tokens, "
                f"and {manifest_file} records {manifest['documents']} and {manifest['tokens']}"
            )
        content = ContentDigest()
        content.update(table.column("id").to_pylist(), tokens, offsets)
        if content.hexdigest() != manifest["corpus_digest"]:
            raise Refusal(
                f"{tokens_file} holds corpus {content.hexdigest()}, and {manifest_file} records "
                f"corpus {manifest['corpus_digest']}; the manifest is not this corpus's, so "
                "prepare the corpus again"
            )
        return cls(path, manifest, tokens, offsets)


def _read_manifest(file: Path) -> dict:
    try:
        manifest = jsonfile.loads(file.read_bytes())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise Refusal(f"{file} does not load as a corpus manifest: {error}") from None
    needed = ("format_version", "tokenizer_digest", "corpus_digest", "documents", "tokens")
    if not isinstance(manifest, dict) or not all(key in manifest for key in needed):
        raise Refusal(f"{file} does not load as a corpus manifest: it lacks {', '.join(needed)}")
    if manifest["format_version"] != FORMAT_VERSION:
        raise Refusal(
            f"{file} has format version {manifest['format_version']!r}, and this build reads "
            f"version {FORMAT_VERSION}; prepare the corpus again"
        )
    if "tokens_sha256" not in manifest:
        raise Refusal(f"{file} does not load as a corpus manifest: it lacks tokens_sha256")
    body = {key: value for key, value in manifest.items() if key != "manifest_sha256"}
    if manifest.get("manifest_sha256") != json_sha256(body):
        raise Refusal(
            f"{file} does not match the digest it was written with; it was edited after the "
            "corpus was prepared, so prepare the corpus again"
        )
    return manifest


def _flatten(column: pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """All token lists as one (N,) int32 array and (D+1,) int64 offsets.

    A single chunk stays a zero-copy view of the memory map; several chunks are concatenated.
    """
    values, offsets, base = [], [np.zeros(1, dtype=np.int64)], 0
    for chunk in column.chunks:
        chunk_offsets = chunk.offsets.to_numpy().astype(np.int64)
        values.append(chunk.flatten().to_numpy(zero_copy_only=True))
        offsets.append(chunk_offsets[1:] - chunk_offsets[0] + base)
        base += int(chunk_offsets[-1] - chunk_offsets[0])
    tokens = values[0] if len(values) == 1 else np.concatenate(values or [np.zeros(0, np.int32)])
    return tokens, np.concatenate(offsets)

"""A prepared corpus: documents encoded by one tokenizer, stored to be memory-mapped, with digests.

A corpus directory holds three files:
- `tokens.bin`: every document's tokens (BOS c1..cn EOS) one after another, little-endian uint16
  when the vocabulary fits in 16 bits and uint32 otherwise, read straight from a memory map;
- `documents.arrow`: Arrow IPC, one row per document in the same order: its id and token count;
- `corpus.json`: the tokenizer digest, the corpus digest, the counts, the token type, the largest
  token, the sha256 of the source, of tokens.bin and of documents.arrow, and the sha256 of its own
  canonical content (`manifest_sha256`).

Preparation (`zrodlo.data.preparation`) writes them. Opening a corpus trusts no recorded digest:
corpus.json is checked against its own digest and documents.arrow against its sha256; tokens.bin,
the corpus digest (`zrodlo.data.verification`) and the largest token are checked by one pass that
reads the file, not the map, a buffer at a time. A corpus of up to 32 MiB of tokens takes that pass
as it opens, so it is refused before anything else happens; a larger one takes it on a second
thread (`Corpus.verify`), so that opening costs what the document list costs whatever the size of
the tokens. A run steps while that pass goes on, writes no record or checkpoint until it has passed
(`zrodlo.training.loop`), and refuses a token outside its vocabulary in any batch it reads. The
pass on a second thread drops the pages it has read from the page cache behind it, so that a
corpus of any size passes through the cache without filling it.
"""

from __future__ import annotations

import json
import mmap
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

from zrodlo.data.verification import verify_tokens
from zrodlo.data.weights import (
    WEIGHTED_KEYS,
    WEIGHTED_VERSION,
    map_weights,
    verify_weights,
)
from zrodlo.storage import jsonfile
from zrodlo.storage.digest import file_sha256, json_sha256
from zrodlo.storage.inputs import open_input, read_input
from zrodlo.storage.refusal import Refusal

# 2: corpus.json carries manifest_sha256, the digest of its own content.
# 3: tokens.bin (uint16 or uint32, memory-mapped) and documents.arrow replace tokens.arrow.
# 4 (`zrodlo.data.weights`): a corpus of chat documents, whose weights.bin weighs each target.
FORMAT_VERSION = 3
READ_VERSIONS = (FORMAT_VERSION, WEIGHTED_VERSION)
TOKENS_FILE = "tokens.bin"
DOCUMENTS_FILE = "documents.arrow"
MANIFEST_FILE = "corpus.json"
DOCUMENTS_SCHEMA = pa.schema([("id", pa.string()), ("tokens", pa.int64())])
# A corpus up to this size is verified as it is opened (about 0.1 s here); a larger one on a
# second thread while the run steps (`Corpus.verify`), so that opening costs the same at any size.
_VERIFY_AT_OPEN_BYTES = 1 << 25


def token_type(vocab_size: int) -> str:
    """The narrowest little-endian unsigned type that holds every token of the vocabulary."""
    return "uint16" if vocab_size <= 1 << 16 else "uint32"


@dataclass(frozen=True)
class Corpus:
    """An opened corpus: `tokens` (N,) uint16 or uint32, all documents one after another, a
    read-only view of the memory-mapped tokens.bin; `offsets` (D+1,) int64 document boundaries;
    `weights` (N,) uint8 the target weights of a corpus of chat documents, or None."""

    path: Path
    manifest: dict
    tokens: np.ndarray
    offsets: np.ndarray
    weights: np.ndarray | None = None
    _verifying: list[Future] = field(default_factory=list, repr=False, compare=False)

    @property
    def digest(self) -> str:
        return self.manifest["corpus_digest"]

    @property
    def tokenizer_digest(self) -> str:
        return self.manifest["tokenizer_digest"]

    @classmethod
    def open(cls, path: Path) -> Corpus:
        """Open a corpus directory: its manifest and document list checked, its tokens mapped."""
        manifest_file = path / MANIFEST_FILE
        if not manifest_file.is_file():
            raise Refusal(
                f"{path} holds no {MANIFEST_FILE}; a corpus is written by zrodlo corpus prepare"
            )
        manifest = _read_manifest(manifest_file)
        offsets = _read_documents(path, manifest)
        weights = map_weights(path, manifest) if "weights_sha256" in manifest else None
        corpus = cls(path, manifest, _map_tokens(path, manifest), offsets, weights)
        if corpus.tokens.nbytes <= _VERIFY_AT_OPEN_BYTES:
            # Costs less than a step: refused before anything; the run then reads it cached.
            _verify(path, manifest, offsets, drop_behind=False)
            corpus._verifying.append(_passed())
        return corpus

    def verify(self) -> Future:
        """Start, once, the pass that checks tokens.bin against the sha256, corpus digest and
        largest token corpus.json records; its result is None, or it raises the Refusal."""
        if not self._verifying:
            verifying = _in_background(_verify, self.path, self.manifest, self.offsets, True)
            self._verifying.append(verifying)
        return self._verifying[0]

    def verified(self) -> None:
        """Wait for the verifying pass (starting it if need be); raise its Refusal if it failed."""
        self.verify().result()


def release_pages(tokens: np.ndarray) -> None:
    """Give back the pages of a memory-mapped token array this process has read (other arrays
    are left alone). They stay in the page cache, so a scan of a corpus larger than memory holds
    only the pages of its current batch, and reading them again costs a minor fault."""
    mapped = mapping_of(tokens)
    if mapped is not None:
        mapped.madvise(mmap.MADV_DONTNEED)


def mapping_of(tokens: np.ndarray) -> mmap.mmap | None:
    """The memory map an array is a view of, through views and buffers, or None."""
    base: object = tokens
    while base is not None and not isinstance(base, mmap.mmap):
        base = base.obj if isinstance(base, memoryview) else getattr(base, "base", None)
    return base


def _passed() -> Future:
    future: Future = Future()
    future.set_result(None)
    return future


def _in_background(work: Callable[..., None], *args: object) -> Future:
    """`work(*args)` on a daemon thread: a process that ends early does not wait for it."""
    future: Future = Future()

    def run() -> None:
        try:
            future.set_result(work(*args))
        except BaseException as error:  # handed to whoever waits on the future
            future.set_exception(error)

    threading.Thread(target=run, name="corpus-verify", daemon=True).start()
    return future


def _map_tokens(path: Path, manifest: dict) -> np.ndarray:
    tokens_file = path / TOKENS_FILE
    if not tokens_file.is_file():
        raise Refusal(f"{path} holds no {TOKENS_FILE}; prepare the corpus again")
    dtype = np.dtype(manifest["token_type"]).newbyteorder("<")
    size, expected = tokens_file.stat().st_size, manifest["tokens"] * dtype.itemsize
    if size != expected:
        raise Refusal(
            f"{tokens_file} holds {size:,} bytes, and {path / MANIFEST_FILE} records "
            f"{manifest['tokens']:,} tokens of {dtype.itemsize} bytes; the corpus was changed "
            "after it was prepared"
        )
    if size == 0:  # an empty file cannot be mapped
        return np.zeros(0, dtype=dtype)
    with open_input(tokens_file) as handle:
        mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    return np.frombuffer(mapped, dtype=dtype)


def _read_documents(path: Path, manifest: dict) -> np.ndarray:
    """The (D+1,) int64 offsets of the documents, from documents.arrow checked against its sha256."""
    documents_file, manifest_file = path / DOCUMENTS_FILE, path / MANIFEST_FILE
    if not documents_file.is_file():
        raise Refusal(f"{path} holds no {DOCUMENTS_FILE}; prepare the corpus again")
    actual = file_sha256(documents_file)
    if actual != manifest["documents_sha256"]:
        raise Refusal(
            f"{documents_file} has sha256 {actual}, and {manifest_file} records "
            f"{manifest['documents_sha256']}; the corpus was changed after it was prepared"
        )
    table = _read_listing(documents_file, columns=["tokens"])
    lengths = table.column("tokens").to_numpy()
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    if len(lengths) != manifest["documents"] or offsets[-1] != manifest["tokens"]:
        raise Refusal(
            f"{documents_file} lists {len(lengths)} documents of {int(offsets[-1])} tokens, and "
            f"{manifest_file} records {manifest['documents']} and {manifest['tokens']}"
        )
    if len(lengths) and lengths.min() < 2:
        raise Refusal(
            f"{documents_file} lists a document of {int(lengths.min())} tokens; every document "
            "holds at least BOS and EOS"
        )
    return offsets


def _read_listing(documents_file: Path, columns: list[str]) -> pa.Table:
    try:
        table = ipc.open_file(pa.memory_map(str(documents_file))).read_all()
    except (pa.ArrowException, OSError) as error:
        raise Refusal(f"{documents_file} does not load as Arrow IPC: {error}") from None
    if (
        table.schema != DOCUMENTS_SCHEMA
        or table.column("id").null_count
        or table.column("tokens").null_count
    ):
        raise Refusal(f"{documents_file} does not hold the columns id and tokens of a corpus")
    return table.select(columns)


def _verify(path: Path, manifest: dict, offsets: np.ndarray, drop_behind: bool) -> None:
    """The verifying pass over tokens.bin (`verification.verify_tokens`), with the ids of
    documents.arrow; with `drop_behind` the pages read leave the page cache as the pass goes."""
    ids = _read_listing(path / DOCUMENTS_FILE, columns=["id"]).column("id").to_pylist()
    verify_tokens(path / TOKENS_FILE, path / MANIFEST_FILE, manifest, ids, offsets, drop_behind)
    if "weights_sha256" in manifest:
        verify_weights(path, manifest, drop_behind)


_NEEDED = (
    "format_version",
    "tokenizer_digest",
    "corpus_digest",
    "documents",
    "tokens",
    "token_type",
    "largest_token",
    "tokens_sha256",
    "documents_sha256",
)


def _read_manifest(file: Path) -> dict:
    try:
        manifest = jsonfile.loads(read_input(file))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise Refusal(f"{file} does not load as a corpus manifest: {error}") from None
    needed = ("format_version", "tokenizer_digest", "corpus_digest", "documents", "tokens")
    if not isinstance(manifest, dict) or not all(key in manifest for key in needed):
        raise Refusal(f"{file} does not load as a corpus manifest: it lacks {', '.join(needed)}")
    if manifest["format_version"] not in READ_VERSIONS:
        raise Refusal(
            f"{file} has format version {manifest['format_version']!r}, and this build reads "
            f"versions {FORMAT_VERSION} and {WEIGHTED_VERSION}; prepare the corpus again"
        )
    weighted = WEIGHTED_KEYS if manifest["format_version"] == WEIGHTED_VERSION else ()
    missing = [key for key in (*_NEEDED, *weighted) if key not in manifest]
    if missing:
        raise Refusal(f"{file} does not load as a corpus manifest: it lacks {', '.join(missing)}")
    body = {key: value for key, value in manifest.items() if key != "manifest_sha256"}
    if manifest.get("manifest_sha256") != json_sha256(body):
        raise Refusal(
            f"{file} does not match the digest it was written with; it was edited after the "
            "corpus was prepared, so prepare the corpus again"
        )
    _check_values(file, manifest)
    return manifest


def _check_values(file: Path, manifest: dict) -> None:
    """Refuse recorded values no preparation writes, before anything is read by them."""
    counts = ("documents", "tokens", "largest_token", "weighted_targets")
    for key in (key for key in counts if key in manifest):
        value = manifest[key]
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 1 << 62:
            raise Refusal(
                f"{file} records {key} {json.dumps(value)}; a corpus records a whole number "
                "of 0 or more"
            )
    if manifest["token_type"] not in ("uint16", "uint32"):
        raise Refusal(
            f"{file} records token_type {json.dumps(manifest['token_type'])}; a corpus stores "
            "uint16 or uint32 tokens"
        )
    for key in ("tokens_sha256", "documents_sha256", "tokens_digest", "weights_sha256"):
        if key in manifest and not isinstance(manifest[key], str):
            raise Refusal(f"{file} records {key} {json.dumps(manifest[key])}; it is a sha256")

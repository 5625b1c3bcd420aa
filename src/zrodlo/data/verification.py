"""The corpus digest, and the pass that verifies a corpus's tokens.bin against its corpus.json.

The corpus digest is taken over content only, in this canonical byte form, document after document:
the id's UTF-8 length (u64 LE), the id's bytes, the token count (u64 LE) and the tokens (u32 LE each),
after the prefix `zrodlo-corpus-v1`. The same content has the same digest whatever the file's
layout, token width or path: it is the digest corpora of the earlier Arrow layout recorded.
"""

from __future__ import annotations

import hashlib
import os
import struct
from pathlib import Path
from typing import BinaryIO

import numpy as np

from zrodlo.storage.inputs import open_input
from zrodlo.storage.refusal import Refusal

_DIGEST_PREFIX = b"zrodlo-corpus-v1"
_VERIFY_TOKENS = 1 << 22  # tokens a verifying pass reads at a time


class ContentDigest:
    """The running corpus digest over (id, tokens) pairs in the canonical byte form."""

    def __init__(self) -> None:
        self._hash = hashlib.sha256(_DIGEST_PREFIX)

    def update(self, ids: list[str], tokens: np.ndarray, offsets: np.ndarray) -> None:
        """Add documents: ids (k,), their tokens flat (N,), offsets (k+1,) into tokens."""
        data = canonical_tokens(tokens)
        for i, doc_id in enumerate(ids):
            start, end = int(offsets[i]), int(offsets[i + 1])
            self.begin(doc_id, end - start)
            self.add(data[start:end])

    def begin(self, doc_id: str, count: int) -> None:
        """Start a document of `count` tokens; `add` then gives its tokens, in one piece or more."""
        encoded = doc_id.encode("utf-8")
        self._hash.update(struct.pack("<Q", len(encoded)) + encoded + struct.pack("<Q", count))

    def add(self, canonical: np.ndarray) -> None:
        """Tokens of the current document in canonical form (`canonical_tokens`)."""
        self._hash.update(canonical.data)

    def hexdigest(self) -> str:
        return self._hash.hexdigest()


def canonical_tokens(tokens: np.ndarray) -> np.ndarray:
    """Tokens as the corpus digest reads them: u32 little-endian (a view where they already are)."""
    return np.ascontiguousarray(tokens).astype("<u4", copy=False)


def drop_behind_pages(handle: BinaryIO, end: int) -> None:
    """Let a file's first `end` bytes, written to disk or read, go from the page cache.

    A pass over a whole corpus (preparation's writes, the verifying pass's reads) uses each byte
    once; dropping its pages behind it leaves the page cache as it was whatever the corpus's
    size, and the next buffer goes into pages just freed. Growing the cache instead costs the
    kernel several times the copy itself where memory is lent by a host that takes idle pages back
    (on a two-core virtual machine: 7 to 12 s of system time to write 3.5 GB, against 1.3 to 1.6 s
    dropped behind). The kernel keeps some pages it was just done with, so each call asks again
    for everything from the start; pages already gone cost nothing. A run's windows are then read
    from disk once and stay cached from there."""
    if end > 0 and hasattr(os, "posix_fadvise"):  # Linux; elsewhere the pages stay cached
        os.posix_fadvise(handle.fileno(), 0, end, os.POSIX_FADV_DONTNEED)


def verify_tokens(
    tokens_file: Path,
    manifest_file: Path,
    manifest: dict,
    ids: list[str],
    offsets: np.ndarray,
    drop_behind: bool,
) -> None:
    """One pass over tokens.bin, a buffer at a time: its sha256, the corpus digest and the largest
    token, each against corpus.json; a Refusal names the first that differs. With `drop_behind`
    the pages read leave the page cache as the pass goes; without, they stay for the run to read."""
    lengths = np.diff(offsets).tolist()
    dtype = np.dtype(manifest["token_type"]).newbyteorder("<")
    file_hash, content = hashlib.sha256(), ContentDigest()
    largest, document, remaining = 0, 0, 0  # remaining: tokens of `document` still to come
    buffer = np.empty(_VERIFY_TOKENS, dtype)  # (T,) as stored, filled again for each read
    wide = np.empty(_VERIFY_TOKENS, "<u4")  # (T,) the same in canonical form
    start = 0  # where the buffer being read starts in the file
    with open_input(tokens_file) as handle:
        while size := handle.readinto(memoryview(buffer).cast("B")):
            if drop_behind:
                drop_behind_pages(handle, start)
            start += size
            read = buffer[: size // dtype.itemsize]
            file_hash.update(read.data)
            largest = max(largest, int(read.max()))
            if read.dtype == wide.dtype:
                canonical = read
            else:
                canonical = wide[: len(read)]
                np.copyto(canonical, read)
            at = 0
            while at < len(canonical):
                if remaining == 0:  # a document starts here (the file holds no empty ones)
                    content.begin(ids[document], lengths[document])
                    remaining = lengths[document]
                    document += 1
                taken = min(remaining, len(canonical) - at)
                content.add(canonical[at : at + taken])
                at, remaining = at + taken, remaining - taken
        if drop_behind:
            drop_behind_pages(handle, start)
    if file_hash.hexdigest() != manifest["tokens_sha256"]:
        raise Refusal(
            f"{tokens_file} has sha256 {file_hash.hexdigest()}, and {manifest_file} records "
            f"{manifest['tokens_sha256']}; the corpus was changed after it was prepared"
        )
    # A weighted corpus records its tokens' digest apart (`zrodlo.data.weights`).
    recorded = manifest.get("tokens_digest", manifest["corpus_digest"])
    if content.hexdigest() != recorded:
        raise Refusal(
            f"{tokens_file} holds corpus {content.hexdigest()}, and {manifest_file} records "
            f"corpus {recorded}; the manifest is not this corpus's, so prepare the corpus again"
        )
    if largest != manifest["largest_token"]:
        raise Refusal(
            f"{tokens_file} holds tokens up to {largest}, and {manifest_file} records "
            f"{manifest['largest_token']}; the manifest is not this corpus's, so prepare the "
            "corpus again"
        )

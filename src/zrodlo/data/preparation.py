"""Preparing a corpus: a documents file encoded with a tokenizer into tokens.bin, documents.arrow
and corpus.json (`zrodlo.data.corpus` describes the files).

Preparation streams the documents in bounded batches, read, checked and encoded with array
operations in a child process (`zrodlo.data.encoding`), while this process writes and hashes them.
Its writes drop their pages from the page cache behind them, so that a corpus of any size passes
through the cache without filling it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

from zrodlo.data.chat_preparation import check_thinking, is_chat, prepare_chat_corpus
from zrodlo.data.corpus import (
    DOCUMENTS_FILE,
    DOCUMENTS_SCHEMA,
    FORMAT_VERSION,
    MANIFEST_FILE,
    TOKENS_FILE,
    token_type,
)
from zrodlo.data.documents import read_documents
from zrodlo.data.encoding import encoded_batches
from zrodlo.data.formats import CorpusManifest
from zrodlo.data.tokenizer import Tokenizer, load_tokenizer
from zrodlo.data.verification import ContentDigest, drop_behind_pages
from zrodlo.storage.digest import file_sha256, json_sha256, write_json
from zrodlo.storage.outputs import check_new_directory, new_directory
from zrodlo.storage.refusal import Refusal

_BATCH_CHARACTERS = 1 << 22


def prepare(
    documents: Path,
    tokenizer: Path,
    output: Path,
    enable_thinking: bool | None = None,
    allow_empty: bool = False,
) -> CorpusManifest:
    """Encode a documents file with the tokenizer (or model) directory `tokenizer` into the new
    corpus directory `output`; return its manifest, as corpus.json records it. `enable_thinking`
    is passed to a chat template that reads it (None: the template's default); a file of no
    documents is refused unless `allow_empty` (an empty test pool)."""
    check_new_directory(output)
    if not allow_empty and next(iter(read_documents(documents)), None) is None:
        raise Refusal(
            f"{documents} holds no documents; a corpus is prepared from one document or more "
            "(--allow-empty writes an empty one, as the pipeline does for an empty test pool)"
        )
    fitted = load_tokenizer(tokenizer)
    check_thinking(documents, fitted, enable_thinking)
    with new_directory(output) as partial:
        return prepare_corpus(documents, fitted, partial, thinking=enable_thinking)


def _write_through(sink: BinaryIO, tokens: np.ndarray) -> None:
    """Write a batch, wait for the disk to hold it, and drop what is written behind
    (`drop_behind_pages`): the disk writes while the next batch is encoded, instead of all at once in
    the sync that closes the corpus."""
    sink.write(tokens.data)
    sink.flush()
    os.fdatasync(sink.fileno())
    drop_behind_pages(sink, sink.tell())


def prepare_corpus(
    documents: Path,
    tokenizer: Tokenizer,
    output: Path,
    batch_characters: int = _BATCH_CHARACTERS,
    thinking: bool | None = None,
) -> CorpusManifest:
    """Encode a documents file into the directory `output`; return the manifest written there.

    A child process reads, checks and encodes the documents (`zrodlo.data.encoding`); this process
    writes and hashes what it sends, on threads that release the GIL: the source file's digest,
    each batch's content digest and the digest of its stored bytes, and the write of those bytes,
    which waits on the disk once the page cache is full of them. At most one batch is still being
    written and hashed while the next arrives, so memory stays bounded by a few batches whatever
    the input size. A file of chat documents is prepared as one (`zrodlo.data.chat_preparation`).
    """
    if is_chat(documents):
        return prepare_chat_corpus(documents, tokenizer, output, batch_characters, thinking)
    dtype = np.dtype(token_type(tokenizer.vocab_size)).newbyteorder("<")
    content, tokens_hash = ContentDigest(), hashlib.sha256()
    count = characters = total = unknown = largest = 0
    with (
        # Closed on the way out, however it goes: no child outlives the preparation.
        contextlib.closing(
            encoded_batches(documents, tokenizer, dtype, batch_characters)
        ) as batches,
        ThreadPoolExecutor(max_workers=2) as hashing,
        ThreadPoolExecutor(max_workers=1) as writing,
    ):
        source_digest = hashing.submit(file_sha256, documents)
        pending: list[Future] = []
        previous = None
        with (
            open(output / TOKENS_FILE, "wb") as sink,
            pa.OSFile(str(output / DOCUMENTS_FILE), "wb") as listing,
            ipc.new_file(listing, DOCUMENTS_SCHEMA) as writer,
        ):
            for batch in batches:
                ids, tokens, sizes = batch.ids, batch.tokens, batch.sizes
                offsets = np.zeros(len(sizes) + 1, dtype=np.int64)
                np.cumsum(sizes, out=offsets[1:])
                columns = [pa.array(ids, pa.string()), pa.array(sizes, pa.int64())]
                writer.write_batch(pa.record_batch(columns, DOCUMENTS_SCHEMA))
                for done in pending:  # the batch before: its bytes written and hashed, in order
                    done.result()
                if previous is not None:
                    previous.done()
                count += len(ids)
                characters += batch.characters
                total += len(tokens)
                if tokenizer.unk is not None:
                    unknown += int(np.count_nonzero(tokens == tokenizer.unk))
                largest = max(largest, int(tokens.max()))
                pending = [
                    writing.submit(_write_through, sink, tokens),
                    hashing.submit(content.update, ids, tokens, offsets),
                    hashing.submit(tokens_hash.update, tokens.data),
                ]
                previous = batch
            for done in pending:
                done.result()
    body = {
        "format_version": FORMAT_VERSION,
        "tokenizer_digest": tokenizer.digest,
        "corpus_digest": content.hexdigest(),
        "documents": count,
        "characters": characters,
        "tokens": total,
        "targets": total - count,  # every token but each document's BOS
        "unknown_tokens": unknown,
        # Of the tokens between BOS and EOS; an empty corpus (an empty test pool) has none.
        "unknown_rate": unknown / (total - 2 * count) if count else 0.0,
        "token_type": token_type(tokenizer.vocab_size),
        "largest_token": largest,
        "source": {"path": str(documents), "sha256": source_digest.result()},
        "tokens_sha256": tokens_hash.hexdigest(),
        "documents_sha256": file_sha256(output / DOCUMENTS_FILE),
    }
    manifest = CorpusManifest(**body, manifest_sha256=json_sha256(body))
    write_json(output / MANIFEST_FILE, manifest)
    return manifest

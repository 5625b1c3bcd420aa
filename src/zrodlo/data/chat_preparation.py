"""Preparing a corpus of chat documents: each conversation rendered and weighted
(`zrodlo.data.chat_encoding`) into tokens.bin, weights.bin, documents.arrow and corpus.json
(`zrodlo.data.weights` says what a weighted corpus adds).

Conversations are rendered one by one by Python (a template is Jinja), in batches of bounded
size, so memory stays bounded whatever the file's size; a chat corpus is prepared in this process.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

from zrodlo.data.chat_encoding import ChatProblem, encode_conversation
from zrodlo.data.corpus import (
    DOCUMENTS_FILE,
    DOCUMENTS_SCHEMA,
    MANIFEST_FILE,
    TOKENS_FILE,
    token_type,
)
from zrodlo.data.documents import Document, batched, read_documents
from zrodlo.data.formats import CorpusManifest
from zrodlo.data.tokenizer import Tokenizer
from zrodlo.data.tokenizer.chat_template import thinking_choice
from zrodlo.data.verification import ContentDigest
from zrodlo.data.weights import WEIGHTED_VERSION, WEIGHTS_FILE, weighted_digest
from zrodlo.storage.digest import file_sha256, json_sha256, write_json
from zrodlo.storage.refusal import Refusal


def is_chat(documents: Path) -> bool:
    """Whether a documents file's first document is a conversation (the file is then read as
    chat documents, each of which must be one)."""
    first = next(iter(read_documents(documents)), None)
    return first is not None and first.messages is not None


def check_thinking(documents: Path, tokenizer: Tokenizer, thinking: bool | None) -> None:
    """Refuse a choice of the template's thinking where nothing would read it."""
    if thinking is None:
        return
    flag = "--enable-thinking" if thinking else "--disable-thinking"
    if not is_chat(documents):
        raise Refusal(f"{flag} chooses how a chat template renders; {documents} holds texts")
    template = tokenizer.template
    if template is None or not template.reads_thinking:
        raise Refusal(
            f"{flag} is passed to a chat template as enable_thinking, and the tokenizer's "
            f"{'template reads none' if template else 'has no template'} (Qwen3's and SmolLM3's "
            "read it)"
        )


def _encoded(
    documents: Path, document: Document, tokenizer: Tokenizer, thinking: bool | None
) -> tuple[np.ndarray, np.ndarray]:
    name = f"{documents} line {document.line} (id {json.dumps(document.id, ensure_ascii=False)})"
    if document.messages is None:
        raise Refusal(
            f"{name} is a text, and the file's first document a conversation; a corpus of chat "
            "documents holds conversations only"
        )
    try:
        return encode_conversation(tokenizer, document.messages, thinking)
    except ChatProblem as problem:
        raise Refusal(f"{name} {problem}") from None


def prepare_chat_corpus(
    documents: Path,
    tokenizer: Tokenizer,
    output: Path,
    batch_characters: int,
    thinking: bool | None = None,
) -> CorpusManifest:
    """Render, weigh and encode a file of chat documents into the directory `output`, the template
    given `thinking` as enable_thinking where it is not None; return the manifest written there."""
    dtype = np.dtype(token_type(tokenizer.vocab_size)).newbyteorder("<")
    content, tokens_hash, weights_hash = ContentDigest(), hashlib.sha256(), hashlib.sha256()
    count = characters = total = weighted = unknown = largest = 0
    with (
        open(output / TOKENS_FILE, "wb") as sink,
        open(output / WEIGHTS_FILE, "wb") as weights_sink,
        pa.OSFile(str(output / DOCUMENTS_FILE), "wb") as listing,
        ipc.new_file(listing, DOCUMENTS_SCHEMA) as writer,
    ):
        for batch in batched(read_documents(documents), batch_characters):
            encoded = [_encoded(documents, document, tokenizer, thinking) for document in batch]
            ids = [document.id for document in batch]
            sizes = np.array([len(tokens) for tokens, _ in encoded], np.int64)  # (k,)
            offsets = np.zeros(len(sizes) + 1, np.int64)  # (k+1,)
            np.cumsum(sizes, out=offsets[1:])
            tokens = np.concatenate([tokens for tokens, _ in encoded]).astype(dtype)  # (n,)
            weights = np.concatenate([weights for _, weights in encoded])  # (n,) uint8
            writer.write_batch(
                pa.record_batch([pa.array(ids, pa.string()), pa.array(sizes)], DOCUMENTS_SCHEMA)
            )
            sink.write(tokens.data)
            weights_sink.write(weights.data)
            content.update(ids, tokens, offsets)
            tokens_hash.update(tokens.data)
            weights_hash.update(weights.data)
            count += len(ids)
            characters += sum(len(document.text) for document in batch)
            total += len(tokens)
            weighted += int(np.count_nonzero(weights))
            if tokenizer.unk is not None:
                unknown += int(np.count_nonzero(tokens == tokenizer.unk))
            largest = max(largest, int(tokens.max()))
    body = {
        "format_version": WEIGHTED_VERSION,
        "tokenizer_digest": tokenizer.digest,
        "corpus_digest": weighted_digest(content.hexdigest(), weights_hash.hexdigest(), thinking),
        "tokens_digest": content.hexdigest(),
        "documents": count,
        "characters": characters,
        "tokens": total,
        "targets": total - count,  # every token but each document's first
        "weighted_targets": weighted,
        "unknown_tokens": unknown,
        "unknown_rate": unknown / total,
        "token_type": token_type(tokenizer.vocab_size),
        "largest_token": largest,
        "source": {"path": str(documents), "sha256": file_sha256(documents)},
        "tokens_sha256": tokens_hash.hexdigest(),
        "documents_sha256": file_sha256(output / DOCUMENTS_FILE),
        "weights_sha256": weights_hash.hexdigest(),
        **thinking_choice(thinking),
    }
    manifest = CorpusManifest(**body, manifest_sha256=json_sha256(body))
    write_json(output / MANIFEST_FILE, manifest)
    return manifest

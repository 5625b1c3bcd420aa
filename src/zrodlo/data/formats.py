"""The JSON records the data commands write and return, as types: a pools directory's
manifest.json (`documents split`) and a corpus's corpus.json (`corpus prepare`). Their fields and
meanings are documented in docs/formats.md; these types let a caller of the API see them."""

from __future__ import annotations

from typing import NotRequired, TypedDict


class FileRecord(TypedDict):
    """A file a record was made from: its path as given, and the sha256 of its bytes."""

    path: str
    sha256: str


class PoolRecord(TypedDict):
    documents: int
    characters: int
    sha256: str  # of the pool's JSONL file


class PoolsManifest(TypedDict):
    """manifest.json of a pools directory."""

    documents: FileRecord
    splits: FileRecord
    pools: dict[str, PoolRecord]  # train, validation and test


class CorpusManifest(TypedDict):
    """corpus.json of a corpus directory; `corpus_digest` is the digest runs record. A corpus of
    chat documents (format version 4, `zrodlo.data.weights`) also records the fields that are
    NotRequired."""

    format_version: int
    tokenizer_digest: str
    corpus_digest: str
    tokens_digest: NotRequired[str]
    documents: int
    characters: int
    tokens: int
    targets: int
    weighted_targets: NotRequired[int]
    unknown_tokens: int
    unknown_rate: float
    token_type: str  # uint16 or uint32
    largest_token: int
    source: FileRecord
    tokens_sha256: str
    documents_sha256: str
    weights_sha256: NotRequired[str]
    enable_thinking: NotRequired[bool]  # where `corpus prepare` chose the template's thinking
    manifest_sha256: str

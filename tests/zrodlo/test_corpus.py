"""Prepared corpora: Arrow IPC on disk, counts, a content digest independent of layout, tampering."""

from __future__ import annotations

import hashlib
import json
import struct
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
import pytest

from zrodlo.corpus import Corpus, prepare_corpus
from zrodlo.refusal import Refusal
from zrodlo.tokenizer import CharTokenizer

TOKENIZER = CharTokenizer.fit(["cab"])
DOCUMENTS = {"one": "abc", "two": "ba", "three": "cz"}  # "z" is unknown to TOKENIZER
# The corpus digest of DOCUMENTS encoded by TOKENIZER.
PINNED_DIGEST = "7ef2534f0c931b545eea9999b3aafbd39a2f68fa977e4b503daaa3eb79c9e91a"


@pytest.fixture
def documents(tmp_path: Path, write_documents) -> Path:
    return write_documents(tmp_path / "documents.jsonl", DOCUMENTS)


def prepare(documents: Path, name: str, **kwargs) -> Path:
    output = documents.parent / name
    output.mkdir()
    prepare_corpus(documents, TOKENIZER, output, **kwargs)
    return output


def canonical_digest(pairs: list[tuple[str, list[int]]]) -> str:
    """The documented byte form, computed independently of the library."""
    digest = hashlib.sha256(b"zrodlo-corpus-v1")
    for doc_id, tokens in pairs:
        encoded = doc_id.encode("utf-8")
        digest.update(struct.pack("<Q", len(encoded)) + encoded)
        digest.update(struct.pack("<Q", len(tokens)) + struct.pack(f"<{len(tokens)}I", *tokens))
    return digest.hexdigest()


def test_tokens_arrow_is_arrow_ipc_with_ids_and_token_lists(documents):
    corpus = prepare(documents, "corpus")
    with pa.memory_map(str(corpus / "tokens.arrow")) as source:
        table = ipc.open_file(source).read_all()
    assert table.schema == pa.schema([("id", pa.string()), ("tokens", pa.list_(pa.int32()))])
    assert table.column("id").to_pylist() == ["one", "two", "three"]
    assert table.column("tokens").to_pylist() == [[1, 3, 4, 5, 2], [1, 4, 3, 2], [1, 5, 0, 2]]


def test_corpus_json_counts_documents_tokens_targets_and_unknowns(documents):
    manifest = json.loads((prepare(documents, "corpus") / "corpus.json").read_text())
    characters = sum(len(text) for text in DOCUMENTS.values())
    assert manifest["documents"] == 3
    assert manifest["characters"] == characters == 7
    assert manifest["tokens"] == characters + 2 * 3
    assert manifest["targets"] == characters + 3
    assert manifest["unknown_tokens"] == 1
    assert manifest["unknown_rate"] == pytest.approx(1 / 7)
    assert manifest["tokenizer_digest"] == TOKENIZER.digest
    assert manifest["source"]["sha256"] == hashlib.sha256(documents.read_bytes()).hexdigest()
    tokens_bytes = (documents.parent / "corpus" / "tokens.arrow").read_bytes()
    assert manifest["tokens_sha256"] == hashlib.sha256(tokens_bytes).hexdigest()


def test_the_corpus_digest_is_the_documented_content_hash_and_pinned(documents):
    manifest = json.loads((prepare(documents, "corpus") / "corpus.json").read_text())
    expected = canonical_digest(
        [("one", [1, 3, 4, 5, 2]), ("two", [1, 4, 3, 2]), ("three", [1, 5, 0, 2])]
    )
    assert manifest["corpus_digest"] == expected == PINNED_DIGEST


def test_the_digest_and_content_do_not_depend_on_the_batch_size(tmp_path, write_documents):
    texts = {f"d{i}": "abc"[i % 3] * (i % 5 + 1) + "cab"[: i % 4] for i in range(40)}
    documents = write_documents(tmp_path / "documents.jsonl", texts)
    opened, batches, ids = [], [], []
    for size in (1, 7, 1 << 20):
        corpus = prepare(documents, f"corpus-{size}", batch_characters=size)
        with pa.memory_map(str(corpus / "tokens.arrow")) as source:
            batches.append(ipc.open_file(source).num_record_batches)
            ids.append(ipc.open_file(source).read_all().column("id").to_pylist())
        opened.append(Corpus.open(corpus))
    assert len(set(batches)) == 3 and batches[-1] == 1
    assert ids == [list(texts)] * 3
    assert len({corpus.digest for corpus in opened}) == 1
    for corpus in opened[1:]:
        np.testing.assert_array_equal(corpus.tokens, opened[0].tokens)
        np.testing.assert_array_equal(corpus.offsets, opened[0].offsets)


def test_open_gives_flat_tokens_and_document_offsets(documents):
    corpus = Corpus.open(prepare(documents, "corpus"))
    assert corpus.tokens.dtype == np.int32
    assert corpus.tokens.tolist() == [1, 3, 4, 5, 2, 1, 4, 3, 2, 1, 5, 0, 2]
    assert corpus.offsets.tolist() == [0, 5, 9, 13]
    assert corpus.digest == PINNED_DIGEST
    assert corpus.tokenizer_digest == TOKENIZER.digest


def test_open_refuses_a_tokens_file_whose_bytes_were_altered(documents):
    corpus = prepare(documents, "corpus")
    tokens_file = corpus / "tokens.arrow"
    recorded = json.loads((corpus / "corpus.json").read_text())["tokens_sha256"]
    data = bytearray(tokens_file.read_bytes())
    data[len(data) // 2] ^= 0x01
    tokens_file.write_bytes(bytes(data))
    with pytest.raises(Refusal) as refused:
        Corpus.open(corpus)
    actual = hashlib.sha256(bytes(data)).hexdigest()
    assert refused.value.sentence == (
        f"{tokens_file} has sha256 {actual}, and {corpus / 'corpus.json'} records {recorded}; "
        "the corpus was changed after it was prepared"
    )


def test_open_refuses_a_directory_without_a_manifest(tmp_path):
    with pytest.raises(Refusal) as refused:
        Corpus.open(tmp_path)
    assert refused.value.sentence == (
        f"{tmp_path} holds no corpus.json; a corpus is written by zrodlo corpus prepare"
    )


def test_open_refuses_another_format_version(documents):
    corpus = prepare(documents, "corpus")
    manifest_file = corpus / "corpus.json"
    manifest = json.loads(manifest_file.read_text())
    manifest_file.write_text(json.dumps({**manifest, "format_version": 1}))
    with pytest.raises(Refusal) as refused:
        Corpus.open(corpus)
    assert refused.value.sentence == (
        f"{manifest_file} has format version 1, and this build reads version 2; "
        "prepare the corpus again"
    )


def test_open_refuses_a_manifest_edited_after_it_was_written(documents):
    corpus = prepare(documents, "corpus")
    manifest_file = corpus / "corpus.json"
    manifest = json.loads(manifest_file.read_text())
    manifest_file.write_text(json.dumps({**manifest, "unknown_rate": 0.0}))
    with pytest.raises(Refusal) as refused:
        Corpus.open(corpus)
    assert refused.value.sentence == (
        f"{manifest_file} does not match the digest it was written with; it was edited after the "
        "corpus was prepared, so prepare the corpus again"
    )


def test_prepare_refuses_an_empty_documents_file(tmp_path):
    documents = tmp_path / "documents.jsonl"
    documents.write_bytes(b"")
    with pytest.raises(Refusal) as refused:
        prepare(documents, "corpus")
    assert refused.value.sentence == (
        f"{documents} holds no documents; a corpus needs one document or more"
    )

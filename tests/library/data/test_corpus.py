"""Prepared corpora: uint16 tokens memory-mapped without a copy, the document list in Arrow IPC,
counts, a content digest independent of layout (and unchanged from the Arrow layout), tampering
refused at open or by the verifying pass."""

from __future__ import annotations

import ctypes
import hashlib
import json
import mmap
import os
import struct
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
import pytest

from forgery import reseal_corpus
from zrodlo.data import corpus as corpus_module
from zrodlo.data import verification
from zrodlo.data.corpus import Corpus, mapping_of
from zrodlo.data.preparation import prepare_corpus
from zrodlo.data.tokenizer.char import CharTokenizer
from zrodlo.data.windows import build_windows
from zrodlo.storage.refusal import Refusal

TOKENIZER = CharTokenizer.fit(["cab"])
DOCUMENTS = {"one": "abc", "two": "ba", "three": "cz"}  # "z" is unknown to TOKENIZER
# The corpus digest of DOCUMENTS encoded by TOKENIZER, as the Arrow layout (format 2) recorded it.
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


def test_tokens_are_little_endian_uint16_and_the_documents_an_arrow_list(documents):
    corpus = prepare(documents, "corpus")
    assert sorted(p.name for p in corpus.iterdir()) == [
        "corpus.json",
        "documents.arrow",
        "tokens.bin",
    ]
    stored = np.frombuffer((corpus / "tokens.bin").read_bytes(), dtype="<u2")
    assert stored.tolist() == [1, 3, 4, 5, 2, 1, 4, 3, 2, 1, 5, 0, 2]
    with pa.memory_map(str(corpus / "documents.arrow")) as source:
        table = ipc.open_file(source).read_all()
    assert table.schema == pa.schema([("id", pa.string()), ("tokens", pa.int64())])
    assert table.column("id").to_pylist() == ["one", "two", "three"]
    assert table.column("tokens").to_pylist() == [5, 4, 4]
    manifest = json.loads((corpus / "corpus.json").read_text())
    assert (manifest["token_type"], manifest["largest_token"]) == ("uint16", 5)


def test_a_vocabulary_past_16_bits_is_stored_as_uint32(tmp_path, write_documents):
    text = "".join(chr(0x10000 + i) for i in range(70_000))  # 70,000 characters, each once
    documents = write_documents(tmp_path / "documents.jsonl", {"wide": text})
    tokenizer = CharTokenizer.fit([text])
    output = tmp_path / "corpus"
    output.mkdir()
    manifest = prepare_corpus(documents, tokenizer, output)
    assert manifest["token_type"] == "uint32"
    corpus = Corpus.open(output)
    assert corpus.tokens.dtype == np.dtype("<u4")
    assert int(corpus.tokens.max()) == manifest["largest_token"] == tokenizer.vocab_size - 1
    assert corpus.verified() is None


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
    for name, key in (("tokens.bin", "tokens_sha256"), ("documents.arrow", "documents_sha256")):
        data = (documents.parent / "corpus" / name).read_bytes()
        assert manifest[key] == hashlib.sha256(data).hexdigest()


def test_the_corpus_digest_is_the_documented_content_hash_and_pinned(documents):
    manifest = json.loads((prepare(documents, "corpus") / "corpus.json").read_text())
    expected = canonical_digest(
        [("one", [1, 3, 4, 5, 2]), ("two", [1, 4, 3, 2]), ("three", [1, 5, 0, 2])]
    )
    assert manifest["corpus_digest"] == expected == PINNED_DIGEST


def test_the_digest_is_the_one_the_arrow_layout_recorded_for_the_same_content(
    tmp_path, write_documents
):
    # Prepared with the Arrow layout (format 2) before tokens.bin replaced it: `zrodlo tokenizer
    # fit` and `zrodlo corpus prepare` on these documents recorded corpus digest 75b3e779...
    texts = {"first": "Hello, world.", "zweite": "Grüße ☃ aus\nder Welt", "3": "x"}
    documents = write_documents(tmp_path / "documents.jsonl", texts)
    output = tmp_path / "corpus"
    output.mkdir()
    manifest = prepare_corpus(documents, CharTokenizer.fit(texts.values()), output)
    assert manifest["corpus_digest"] == (
        "75b3e779114e041d79d2b87e6562d20f1440ac987f1bfce20d606c8c43af3fe8"
    )
    assert Corpus.open(output).verified() is None


def test_the_digest_and_content_do_not_depend_on_the_batch_size(tmp_path, write_documents):
    texts = {f"d{i}": "abc"[i % 3] * (i % 5 + 1) + "cab"[: i % 4] for i in range(40)}
    documents = write_documents(tmp_path / "documents.jsonl", texts)
    opened, batches, ids = [], [], []
    for size in (1, 7, 1 << 20):
        corpus = prepare(documents, f"corpus-{size}", batch_characters=size)
        with pa.memory_map(str(corpus / "documents.arrow")) as source:
            batches.append(ipc.open_file(source).num_record_batches)
            ids.append(ipc.open_file(source).read_all().column("id").to_pylist())
        opened.append(Corpus.open(corpus))
    assert len(set(batches)) == 3 and batches[-1] == 1
    assert ids == [list(texts)] * 3
    assert len({corpus.digest for corpus in opened}) == 1
    for corpus in opened[1:]:
        np.testing.assert_array_equal(corpus.tokens, opened[0].tokens)
        np.testing.assert_array_equal(corpus.offsets, opened[0].offsets)
    assert all(corpus.verified() is None for corpus in opened)


def test_a_corpus_of_many_batches_is_read_from_its_memory_map_without_a_copy(
    tmp_path, write_documents
):
    texts = {f"d{i}": "cab" * (i % 7 + 1) for i in range(500)}
    documents = write_documents(tmp_path / "documents.jsonl", texts)
    corpus = Corpus.open(prepare(documents, "corpus", batch_characters=64))
    with pa.memory_map(str(corpus.path / "documents.arrow")) as source:
        assert ipc.open_file(source).num_record_batches > 50
    mapped = mapping_of(corpus.tokens)
    assert isinstance(mapped, mmap.mmap) and len(mapped) == corpus.tokens.nbytes
    assert not corpus.tokens.flags.writeable and not corpus.tokens.flags.owndata
    # Every window a run reads is a view into that one map.
    assert mapping_of(corpus.tokens[corpus.offsets[250] : corpus.offsets[251]]) is mapped


def cached_share(path: Path) -> float:
    """The share of a file's pages in the page cache, as mincore(2) reports them."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t] + [ctypes.c_int] * 3 + [ctypes.c_long]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    size = path.stat().st_size
    pages = (size + mmap.PAGESIZE - 1) // mmap.PAGESIZE
    with open(path, "rb") as handle:
        address = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, handle.fileno(), 0)
        assert address not in (None, ctypes.c_void_p(-1).value)
        try:
            residency = (ctypes.c_ubyte * pages)()
            assert libc.mincore(address, size, residency) == 0, ctypes.get_errno()
        finally:
            libc.munmap(address, size)
    return sum(byte & 1 for byte in residency) / pages


def test_preparing_and_the_background_pass_leave_the_tokens_out_of_the_page_cache(
    tmp_path, write_documents, monkeypatch
):
    # The measure, checked first: a file just written is cached, and one whose pages were
    # synced and let go is not, where the filesystem lets them go (tmpfs holds them: no test).
    probe = tmp_path / "probe.bin"
    with open(probe, "wb") as handle:
        handle.write(bytes(1 << 22))
        handle.flush()
        assert cached_share(probe) > 0.9
        os.fdatasync(handle.fileno())
        os.posix_fadvise(handle.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
    if cached_share(probe) > 0.1:
        pytest.skip(f"the filesystem of {tmp_path} keeps synced pages cached whatever the advice")
    texts = {f"d{i}": "cab" * 20_000 for i in range(40)}  # 4.8 MB of uint16 tokens
    documents = write_documents(tmp_path / "documents.jsonl", texts)
    tokens = prepare(documents, "corpus", batch_characters=1 << 14) / "tokens.bin"
    assert cached_share(tokens) < 0.05
    # A corpus small enough to be verified as it opens stays cached for the run to read ...
    Corpus.open(tokens.parent)
    assert cached_share(tokens) > 0.9
    # ... and the pass on a second thread, which a large corpus takes, drops its reads behind.
    with open(tokens, "rb") as handle:
        os.posix_fadvise(handle.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
    monkeypatch.setattr(corpus_module, "_VERIFY_AT_OPEN_BYTES", 0)
    monkeypatch.setattr(verification, "_VERIFY_TOKENS", 1 << 14)
    opened = Corpus.open(tokens.parent)
    assert opened.verified() is None
    assert cached_share(tokens) < 0.05
    assert opened.tokens[:4].tolist() == [1, 5, 3, 4]


def test_open_gives_flat_tokens_and_document_offsets(documents):
    corpus = Corpus.open(prepare(documents, "corpus"))
    assert corpus.tokens.dtype == np.dtype("<u2")
    assert corpus.tokens.tolist() == [1, 3, 4, 5, 2, 1, 4, 3, 2, 1, 5, 0, 2]
    assert corpus.offsets.tolist() == [0, 5, 9, 13]
    assert corpus.digest == PINNED_DIGEST
    assert corpus.tokenizer_digest == TOKENIZER.digest


def flip_a_byte(file: Path) -> str:
    """Flip one bit in the middle of a file; return the file's new sha256."""
    data = bytearray(file.read_bytes())
    data[len(data) // 2] ^= 0x01
    file.write_bytes(bytes(data))
    return hashlib.sha256(bytes(data)).hexdigest()


def test_the_verifying_pass_refuses_a_tokens_file_whose_bytes_were_altered(documents, monkeypatch):
    corpus = prepare(documents, "corpus")
    tokens_file = corpus / "tokens.bin"
    recorded = json.loads((corpus / "corpus.json").read_text())["tokens_sha256"]
    actual = flip_a_byte(tokens_file)
    assert refusals_both_ways(corpus, monkeypatch) == 2 * [
        (
            f"{tokens_file} has sha256 {actual}, and {corpus / 'corpus.json'} records {recorded}; "
            "the corpus was changed after it was prepared"
        )
    ]


def refusals_both_ways(corpus: Path, monkeypatch) -> list[str]:
    """The sentences a corpus is refused with when the verifying pass runs as it opens (small
    corpora) and when it runs on a second thread (large ones), in that order."""
    sentences = []
    with pytest.raises(Refusal) as refused:
        Corpus.open(corpus)
    sentences.append(refused.value.sentence)
    monkeypatch.setattr(corpus_module, "_VERIFY_AT_OPEN_BYTES", 0)
    opened = Corpus.open(corpus)  # the sizes are right: only the pass can tell
    with pytest.raises(Refusal) as refused:
        opened.verified()
    sentences.append(refused.value.sentence)
    return sentences


def test_the_verifying_pass_refuses_a_manifest_that_lies_about_the_largest_token(
    documents, monkeypatch
):
    corpus = prepare(documents, "corpus")
    reseal_corpus(corpus, largest_token=4)
    assert refusals_both_ways(corpus, monkeypatch) == 2 * [
        f"{corpus / 'tokens.bin'} holds tokens up to 5, and {corpus / 'corpus.json'} records 4; "
        "the manifest is not this corpus's, so prepare the corpus again"
    ]


def test_the_verifying_pass_refuses_a_manifest_that_claims_another_corpus(documents, monkeypatch):
    corpus = prepare(documents, "corpus")
    claimed = "0" * 64
    reseal_corpus(corpus, corpus_digest=claimed)
    assert refusals_both_ways(corpus, monkeypatch) == 2 * [
        f"{corpus / 'tokens.bin'} holds corpus {PINNED_DIGEST}, and {corpus / 'corpus.json'} "
        f"records corpus {claimed}; the manifest is not this corpus's, so prepare the corpus again"
    ]


def test_a_large_corpus_opens_at_once_and_passes_its_pass_on_a_second_thread(
    documents, monkeypatch
):
    monkeypatch.setattr(corpus_module, "_VERIFY_AT_OPEN_BYTES", 0)
    monkeypatch.setattr(verification, "_VERIFY_TOKENS", 2)  # buffers that split documents
    opened = Corpus.open(prepare(documents, "corpus"))
    assert opened.verify() is opened.verify()  # one pass, whoever asks
    assert opened.verified() is None and opened.verify().done()


def test_open_refuses_a_tokens_file_of_another_length(documents):
    corpus = prepare(documents, "corpus")
    with open(corpus / "tokens.bin", "ab") as handle:
        handle.write(b"\x01")
    with pytest.raises(Refusal) as refused:
        Corpus.open(corpus)
    assert refused.value.sentence == (
        f"{corpus / 'tokens.bin'} holds 27 bytes, and {corpus / 'corpus.json'} records 13 tokens "
        "of 2 bytes; the corpus was changed after it was prepared"
    )


def test_open_refuses_a_document_list_whose_bytes_were_altered(documents):
    corpus = prepare(documents, "corpus")
    listing = corpus / "documents.arrow"
    recorded = json.loads((corpus / "corpus.json").read_text())["documents_sha256"]
    actual = flip_a_byte(listing)
    with pytest.raises(Refusal) as refused:
        Corpus.open(corpus)
    assert refused.value.sentence == (
        f"{listing} has sha256 {actual}, and "
        f"{corpus / 'corpus.json'} records {recorded}; the corpus was changed after it was "
        "prepared"
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
        f"{manifest_file} has format version 1, and this build reads versions 3 and 4; "
        "prepare the corpus again"
    )


def test_open_refuses_a_corpus_of_the_arrow_layout_saying_to_prepare_it_again(tmp_path):
    # corpus.json as format 2 wrote it, beside its tokens.arrow (from /tmp/pin, commit b71cd0f).
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    manifest = {
        "format_version": 2,
        "tokenizer_digest": "d1e7df387136b14fafbaf90d6f992a39f551cbb55a7a6e2ba013452ed71b27a3",
        "corpus_digest": "75b3e779114e041d79d2b87e6562d20f1440ac987f1bfce20d606c8c43af3fe8",
        "documents": 3,
        "characters": 34,
        "tokens": 40,
        "targets": 37,
        "unknown_tokens": 0,
        "unknown_rate": 0.0,
        "source": {
            "path": "docs.jsonl",
            "sha256": "0a49c250b8b6aea3eb6c8bf4fd2a4f49c49153d186506fda6196a06ac2e1d77d",
        },
        "tokens_sha256": "358abe3ccbe66cb8b1850059a3b2f37a8cd3c404cbf790d0e833630f8857de7f",
        "manifest_sha256": "a50822ca64c321215e5ae664b39105df3f8dbb515305ac67ce801fcd716da7b1",
    }
    (corpus / "corpus.json").write_text(json.dumps(manifest, indent=2))
    (corpus / "tokens.arrow").write_bytes(b"ARROW1")
    with pytest.raises(Refusal) as refused:
        Corpus.open(corpus)
    assert refused.value.sentence == (
        f"{corpus / 'corpus.json'} has format version 2, and this build reads versions 3 and 4; "
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


def test_an_empty_documents_file_is_a_corpus_no_window_can_be_built_on(tmp_path):
    documents = tmp_path / "documents.jsonl"
    documents.write_bytes(b"")
    corpus = Corpus.open(prepare(documents, "corpus"))
    assert (corpus.manifest["documents"], len(corpus.tokens), corpus.offsets.tolist()) == (
        0,
        0,
        [0],
    )
    with pytest.raises(Refusal) as refused:
        build_windows(corpus.offsets, 2)
    assert (
        refused.value.sentence == "the corpus holds 0 tokens, fewer than one window of --context 2"
    )

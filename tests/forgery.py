"""Forged checkpoints, as another build or an attacker writes them: a file changed and the digests
that cover it recomputed, so that only the checks of content, not of digests, can refuse them."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

from zrodlo.storage.digest import json_sha256


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def rewrite_record(checkpoint: Path, change: Callable[[dict], None]) -> None:
    """Change trainer.json and write it with its own digest recomputed, as if written that way."""
    file = checkpoint / "trainer.json"
    record = json.loads(file.read_text())
    change(record)
    body = {key: value for key, value in record.items() if key != "record_sha256"}
    file.write_text(json.dumps({**body, "record_sha256": json_sha256(body)}, indent=2))


def replace_member(checkpoint: Path, name: str, data: bytes) -> None:
    """Replace one file of a checkpoint, with trainer.json recording its new sha256."""
    (checkpoint / name).write_bytes(data)
    rewrite_record(checkpoint, lambda record: record["files"].__setitem__(name, sha256(data)))


def reseal_corpus(corpus: Path, **changes: object) -> None:
    """Change corpus.json's values and write it with its manifest_sha256 recomputed."""
    manifest_file = corpus / "corpus.json"
    manifest = json.loads(manifest_file.read_text())
    body = {key: value for key, value in manifest.items() if key != "manifest_sha256"}
    body.update(changes)
    manifest_file.write_text(json.dumps({**body, "manifest_sha256": json_sha256(body)}))


def reseal_tokenizer(directory: Path, change: Callable[[dict], None]) -> None:
    """Change the tokenizers library's file an imported tokenizer.json holds, and write it with its
    digest recomputed, as if imported that way."""
    file = directory / "tokenizer.json"
    stored = json.loads(file.read_text(encoding="utf-8"))
    change(stored["tokenizer"])
    body = {key: stored[key] for key in ("kind", "special", "tokenizer")}
    stored["digest"] = json_sha256(body)
    file.write_text(json.dumps(stored, ensure_ascii=False), encoding="utf-8")

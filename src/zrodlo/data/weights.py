"""A corpus's target weights: `weights.bin`, one uint8 a token (1 where the token is a target a run
trains on and is scored on, 0 elsewhere), which a corpus of chat documents holds beside tokens.bin.

Such a corpus is of format version 4; its corpus.json records the sha256 of weights.bin
(`weights_sha256`), how many targets weigh 1 (`weighted_targets`) and the digest of its tokens
alone (`tokens_digest`, the corpus digest of version 3). Its corpus digest covers both:
the sha256 of the canonical JSON {"tokens": tokens_digest, "weights": weights_sha256}, so a corpus
rendered by another template or weighted otherwise has another digest. A corpus without weights is
written as version 3, as before.
"""

from __future__ import annotations

import hashlib
import mmap
from pathlib import Path

import numpy as np

from zrodlo.data.tokenizer.chat_template import thinking_choice
from zrodlo.data.verification import drop_behind_pages
from zrodlo.storage.digest import json_sha256
from zrodlo.storage.inputs import open_input
from zrodlo.storage.refusal import Refusal

WEIGHTS_FILE = "weights.bin"
WEIGHTED_VERSION = 4
WEIGHTED_KEYS = ("tokens_digest", "weights_sha256", "weighted_targets")
_READ = 1 << 24  # bytes a verifying pass reads at a time


def weighted_digest(tokens_digest: str, weights_sha256: str, thinking: bool | None = None) -> str:
    """The corpus digest of a weighted corpus, and of the `enable_thinking` its template was
    rendered with where the preparation chose one."""
    chosen = thinking_choice(thinking)
    return json_sha256({"tokens": tokens_digest, "weights": weights_sha256, **chosen})


def map_weights(path: Path, manifest: dict) -> np.ndarray:
    """The (N,) uint8 weights of a weighted corpus, a read-only view of weights.bin mapped."""
    weights_file = path / WEIGHTS_FILE
    if not weights_file.is_file():
        raise Refusal(f"{path} holds no {WEIGHTS_FILE}; prepare the corpus again")
    size = weights_file.stat().st_size
    if size != manifest["tokens"]:
        raise Refusal(
            f"{weights_file} holds {size:,} weights, and {path / 'corpus.json'} records "
            f"{manifest['tokens']:,} tokens; the corpus was changed after it was prepared"
        )
    if size == 0:
        return np.zeros(0, np.uint8)
    with open_input(weights_file) as handle:
        mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    return np.frombuffer(mapped, np.uint8)


def verify_weights(path: Path, manifest: dict, drop_behind: bool) -> None:
    """One pass over weights.bin: its sha256, its values (0 or 1) and how many are 1, against
    corpus.json, and the corpus digest against the digests of tokens and weights."""
    weights_file, manifest_file = path / WEIGHTS_FILE, path / "corpus.json"
    digest, ones, largest, start = hashlib.sha256(), 0, 0, 0
    with open_input(weights_file) as handle:
        while chunk := handle.read(_READ):
            if drop_behind:
                drop_behind_pages(handle, start)
            start += len(chunk)
            digest.update(chunk)
            values = np.frombuffer(chunk, np.uint8)
            largest = max(largest, int(values.max()))
            ones += int(np.count_nonzero(values))
    if digest.hexdigest() != manifest["weights_sha256"]:
        raise Refusal(
            f"{weights_file} has sha256 {digest.hexdigest()}, and {manifest_file} records "
            f"{manifest['weights_sha256']}; the corpus was changed after it was prepared"
        )
    if largest > 1 or ones != manifest["weighted_targets"]:
        raise Refusal(
            f"{weights_file} holds {ones} weights of 1 and none above {largest}, and "
            f"{manifest_file} records {manifest['weighted_targets']} weights of 0 or 1; the "
            "manifest is not this corpus's, so prepare the corpus again"
        )
    expected = weighted_digest(
        manifest["tokens_digest"], manifest["weights_sha256"], manifest.get("enable_thinking")
    )
    if manifest["corpus_digest"] != expected:
        raise Refusal(
            f"{manifest_file} records corpus {manifest['corpus_digest']}, and its tokens and "
            f"weights make corpus {expected}; the manifest was edited, so prepare the corpus again"
        )

"""The typed records the API returns name exactly the fields the files hold: corpus.json of the
released fixture, and the evaluation.json and metrics.json the default pipeline committed."""

from __future__ import annotations

import json
import typing
from pathlib import Path
from typing import NotRequired

from zrodlo.data.formats import CorpusManifest, FileRecord
from zrodlo.evaluation.evaluate import (
    CorpusScores,
    PoolScores,
    ScoredModel,
    Scores,
    metrics_of,
)

ROOT = Path(__file__).resolve().parent.parent


def fields(record: type) -> list[str]:
    return list(typing.get_type_hints(record))


def test_corpus_json_holds_the_fields_of_corpus_manifest_in_order() -> None:
    """A corpus of texts holds the required fields; a corpus of chat documents all of them
    (tests/stages/test_chat.py)."""
    manifest = json.loads((ROOT / "tests/fixtures/0.1.0/corpus/corpus.json").read_text())
    hints = typing.get_type_hints(CorpusManifest, include_extras=True)
    required = [name for name, hint in hints.items() if typing.get_origin(hint) is not NotRequired]
    assert list(manifest) == required
    assert list(manifest["source"]) == fields(FileRecord)


def test_evaluation_json_holds_the_fields_of_scores() -> None:
    scores = json.loads((ROOT / "reports/evaluation.json").read_text())
    assert list(scores) == fields(Scores)
    assert list(scores["model"]) == fields(ScoredModel)
    # The committed run has a baseline, and its pools are scored whole (no drawn_from).
    whole = [name for name in fields(CorpusScores) if name != "drawn_from"]
    for entry in scores["corpora"].values():
        assert list(entry) == whole


def test_metrics_json_holds_the_scores_of_evaluation_json_alone() -> None:
    """What DVC compares: each pool's scores, as the evaluation record has them, and no other
    field."""
    metrics = json.loads((ROOT / "reports/metrics.json").read_text())
    scores = json.loads((ROOT / "reports/evaluation.json").read_text())
    assert metrics == metrics_of(scores)
    for entry in metrics.values():
        assert list(entry) == fields(PoolScores)

"""The README a newcomer reads: short, and its scores the ones the committed pipeline wrote."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def test_the_readme_reads_in_five_minutes():
    assert len(README.splitlines()) <= 200


def test_the_scores_are_those_of_reports_metrics_json():
    scores = json.loads((ROOT / "reports" / "metrics.json").read_text())
    rows = re.findall(r"^\| (train|validation|test) \| (.+) \|$", README, re.M)
    assert [name for name, _ in rows] == ["train", "validation", "test"]
    for name, cells in rows:
        entry = scores[name]
        expected = [
            f"{entry['loss']:.4f}",
            f"{entry['perplexity']:.3f}",
            f"{entry['bits_per_character']:.4f}",
            f"{entry['bigram_loss']:.4f}",
            f"{entry['loss'] / entry['bigram_loss']:.3f}",
        ]
        assert [cell.strip() for cell in cells.split("|")] == expected, name


def test_every_linked_document_exists():
    for link in re.findall(r"\]\(([^)#]+)\)", README):
        assert (ROOT / link).is_file(), link

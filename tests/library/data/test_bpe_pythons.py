"""The BPE fit gives the same merges on every Python the package supports: opt in by naming other
interpreters, each with the pinned tokenizers installed, in ZRODLO_PYTHONS (comma-separated), for
instance `ZRODLO_PYTHONS=/tmp/py3.12/bin/python,/tmp/py3.13/bin/python make test`. The trainer
module imports nothing of the package but the tokenizers library, so it runs from src/ as it is.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[3] / "src"
PYTHONS = [p for p in os.environ.get("ZRODLO_PYTHONS", "").split(",") if p]
FIT = """
import hashlib, json, sys
from zrodlo.data.tokenizer.bpe_training import count_pieces, fit_merges
texts = json.loads(open(sys.argv[1], encoding="utf-8").read())
merges = fit_merges(count_pieces(texts), 400)
print(sys.version_info[:2], hashlib.sha256(json.dumps(merges).encode()).hexdigest())
"""


@pytest.mark.skipif(not PYTHONS, reason="opt in: ZRODLO_PYTHONS names the other interpreters")
def test_every_python_fits_the_same_merges(tmp_path):
    texts = tmp_path / "texts.json"
    words = Path(__file__).read_text(encoding="utf-8").split()
    texts.write_text(json.dumps([" ".join(words[i::7]) + " Zürich 東京 🙂" for i in range(7)]))
    digests = set()
    for python in [sys.executable, *PYTHONS]:
        done = subprocess.run(
            [python, "-c", FIT, texts], env={**os.environ, "PYTHONPATH": str(SRC)},
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        digests.add(done.stdout.split()[-1])
    assert len(digests) == 1, digests

"""`zrodlo model evaluate`, `zrodlo model sample` and the bigram baseline against numbers worked
out by hand, through the real commands.

Two documents, "ab" and "ba": the tokenizer gives UNK 0, BOS 1, EOS 2, a 3, b 4, and the corpus
is BOS a b EOS BOS b a EOS, one window per document at context 4 (targets a b EOS, b a EOS).

The model is built so that its next-token distribution is the same after every input: its final
LayerNorm has scale 0 and bias e_0, so whatever the blocks compute, the head reads e_0 and the
logits are column 0 of the LM head, set to log(1, 1, 2, 3, 4). Then p(UNK) = p(BOS) = 1/11,
p(EOS) = 2/11, p(a) = 3/11 and p(b) = 4/11, at every position.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import torch

from zrodlo.model.directory import write_model
from zrodlo.training.checkpoint import read_model

# In `make test`, not `make check`: scores recomputed by hand over real trainings.
pytestmark = pytest.mark.slow

DOCUMENTS = {"first": "ab", "second": "ba"}
WEIGHTS = (1, 1, 2, 3, 4)  # UNK, BOS, EOS, a, b: p(token) = weight / 11
TOTAL = sum(WEIGHTS)


@pytest.fixture(scope="module")
def by_hand(tmp_path_factory) -> Path:
    """The two documents fitted, prepared, and the fixed-distribution model written."""
    root = tmp_path_factory.mktemp("by-hand")
    lines = [json.dumps({"id": key, "text": text}) for key, text in DOCUMENTS.items()]
    (root / "documents.jsonl").write_text("\n".join(lines) + "\n")
    zrodlo = Path(sys.executable).parent / "zrodlo"
    for args in (
        ["tokenizer", "fit", "--documents", "documents.jsonl", "--output", "tokenizer"],
        ["corpus", "prepare", "--documents", "documents.jsonl", "--tokenizer", "tokenizer",
         "--output", "corpus"],
        ["model", "init", "--tokenizer", "tokenizer", "--output", "drawn", "--layers", 1,
         "--heads", 1, "--d-model", 4, "--d-ff", 8, "--positions", 64, "--dropout", 0,
         "--seed", 1],
    ):  # fmt: skip
        done = subprocess.run(
            [zrodlo, *map(str, args)], cwd=root, capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, done.stderr
    drawn = read_model(root / "drawn")
    assert drawn.config.vocab_size == len(WEIGHTS)
    weights = dict(drawn.weights)
    weights["final_norm.weight"] = torch.zeros(4)
    weights["final_norm.bias"] = torch.tensor([1.0, 0.0, 0.0, 0.0])
    head = torch.zeros(len(WEIGHTS), 4)
    head[:, 0] = torch.tensor([math.log(w) for w in WEIGHTS])
    weights["lm_head.weight"] = head
    (root / "fixed").mkdir()
    write_model(root / "fixed", drawn.config, drawn.tokenizer, weights)
    return root


def test_the_bigram_baseline_is_the_smoothed_pair_counts(by_hand, run_zrodlo):
    # Pairs within documents: (BOS,a) (a,b) (b,EOS) and (BOS,b) (b,a) (a,EOS). With add-one
    # smoothing over 5 tokens, each row holds 2 pairs and 5 ones: every seen pair has 2/7, and
    # every target of the corpus is a seen pair, so the loss is log(7/2).
    returncode, _, stderr = run_zrodlo(
        "model", "evaluate", "--model", "fixed", "--corpus", "corpus", "--baseline", "corpus",
        "--context", 4, "--output", "scores.json", "--metrics", "metrics.json", cwd=by_hand,
    )  # fmt: skip
    assert (returncode, stderr) == (0, ""), stderr
    scores = json.loads((by_hand / "scores.json").read_text())["corpora"]["corpus"]
    assert scores["bigram_loss"] == pytest.approx(math.log(7 / 2), abs=1e-12)
    # Six targets' loss over the four bytes of "ab" and "ba" (an end of document holds none).
    bigram_bits = 6 * math.log(7 / 2) / math.log(2) / 4
    assert scores["bigram_bits_per_byte"] == pytest.approx(bigram_bits, abs=1e-12)
    # --metrics: the same scores, and nothing else, for DVC to compare.
    metrics = json.loads((by_hand / "metrics.json").read_text())
    names = (
        "loss", "perplexity", "bits_per_character", "bits_per_byte", "bigram_loss",
        "bigram_bits_per_byte",
    )  # fmt: skip
    assert metrics == {"corpus": {name: scores[name] for name in names}}


def test_the_loss_is_the_mean_negative_log_probability_of_the_targets(by_hand, run_zrodlo):
    # Targets a, b, EOS, b, a, EOS: two of each of p = 3/11, 4/11 and 2/11.
    returncode, _, stderr = run_zrodlo(
        "model", "evaluate", "--model", "fixed", "--corpus", "corpus", "--context", 4,
        "--output", "scores.json", cwd=by_hand,
    )  # fmt: skip
    assert (returncode, stderr) == (0, ""), stderr
    scores = json.loads((by_hand / "scores.json").read_text())["corpora"]["corpus"]
    loss = -(math.log(3 / 11) + math.log(4 / 11) + math.log(2 / 11)) / 3
    assert (scores["targets"], scores["windows"], scores["documents"]) == (6, 2, 2)
    assert scores["loss"] == pytest.approx(loss, rel=1e-6)
    assert scores["perplexity"] == pytest.approx(math.exp(loss), rel=1e-6)
    # The six targets' loss in bits over the text they hold: "ab" and "ba", 4 characters, 4 bytes.
    assert (scores["characters"], scores["bytes"]) == (4, 4)
    bits = 6 * loss / math.log(2) / 4
    assert scores["bits_per_character"] == pytest.approx(bits, rel=1e-6)
    assert scores["bits_per_byte"] == pytest.approx(bits, rel=1e-6)


def test_a_greedy_sample_takes_the_most_likely_token_every_time(by_hand, run_zrodlo):
    returncode, stdout, stderr = run_zrodlo(
        "model", "sample", "--model", "fixed", "--prompt", "ba", "--tokens", 7,
        "--temperature", 0, "--seed", 1, cwd=by_hand,
    )  # fmt: skip
    assert (returncode, stderr) == (0, ""), stderr
    assert stdout == "ba" + "b" * 7 + "\n"


def test_a_sample_draws_tokens_at_the_models_frequencies(by_hand, run_zrodlo):
    # Among the top 2 (b 4/11, a 3/11) a draw is b with probability 4/7. 2,000 draws: the count
    # of b lies within 4.5 standard deviations (sqrt(2000 * 4/7 * 3/7) = 22.1) of 1,142.9.
    draws = 2000
    returncode, stdout, stderr = run_zrodlo(
        "model", "sample", "--model", "fixed", "--tokens", draws, "--temperature", 1,
        "--top-k", 2, "--seed", 5, cwd=by_hand,
    )  # fmt: skip
    assert (returncode, stderr) == (0, ""), stderr
    counts = Counter(stdout.rstrip("\n"))
    assert set(counts) <= {"a", "b"} and sum(counts.values()) == draws
    assert abs(counts["b"] - draws * 4 / 7) < 4.5 * math.sqrt(draws * 4 / 7 * 3 / 7)


def test_a_sampled_corpus_is_scored_on_the_windows_drawn(by_hand, run_zrodlo):
    """--sample-corpus with --sample-windows 1: one of the corpus's two windows, each holding the
    targets a, b and EOS, so the loss is the whole corpus's; the record says it was drawn."""
    returncode, _, stderr = run_zrodlo(
        "model", "evaluate", "--model", "fixed", "--sample-corpus", "corpus", "--sample-windows",
        1, "--context", 4, "--output", "sampled.json", cwd=by_hand,
    )  # fmt: skip
    assert (returncode, stderr) == (0, ""), stderr
    scores = json.loads((by_hand / "sampled.json").read_text())["corpora"]["corpus"]
    loss = -(math.log(3 / 11) + math.log(4 / 11) + math.log(2 / 11)) / 3
    assert (scores["targets"], scores["windows"], scores["drawn_from"]) == (3, 1, 2)
    assert scores["loss"] == pytest.approx(loss, rel=1e-6)


@pytest.mark.parametrize(
    ("flags", "sentence"),
    [
        (["--sample-corpus", "{c}"],
         "--sample-corpus needs --sample-windows, the windows each is scored on"),
        (["--corpus", "{c}", "--sample-windows", "2"],
         "--sample-windows needs --sample-corpus, the corpora scored on a sample"),
        (["--sample-corpus", "{c}", "--sample-windows", "0"],
         "--sample-windows is 0; it must be a whole number of 1 or more"),
        (["--sample-corpus", "{c}", "--sample-windows", "1", "--sample-seed", "-1"],
         "--sample-seed is -1; it must be a whole number from 0 to 18446744073709551615"),
    ],
)  # fmt: skip
def test_a_sample_without_its_windows_is_refused(by_hand, assert_refused, flags, sentence):
    corpus = str(by_hand / "corpus")
    args = ["model", "evaluate", "--model", by_hand / "fixed", "--output", "refused.json"]
    assert_refused(*args, *(flag.format(c=corpus) for flag in flags), sentence=sentence)


def test_evaluate_without_a_corpus_is_refused(by_hand, assert_refused):
    args = ["model", "evaluate", "--model", by_hand / "fixed", "--output", "refused.json"]
    assert_refused(*args, sentence="give --corpus or --sample-corpus, the corpora to score")

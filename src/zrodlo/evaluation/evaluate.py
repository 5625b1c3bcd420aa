"""Scoring a saved model on prepared corpora: for each corpus the target-weighted loss (nats per
token), perplexity, and bits per character and per UTF-8 byte of the scored text, which compare
across tokenizers, and the bigram baseline of a training corpus on the same windows. These are the
scores `zrodlo model evaluate` prints and writes as JSON.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import NotRequired, TypedDict

from zrodlo.data.corpus import Corpus
from zrodlo.data.text_size import bits, scored_text
from zrodlo.data.windows import scored_windows
from zrodlo.draws.chacha import check_seed
from zrodlo.evaluation.bigram import Bigram
from zrodlo.model.decoder import build_model
from zrodlo.model.device import resolve_device
from zrodlo.model.parts import parameter_count
from zrodlo.storage.digest import json_text
from zrodlo.storage.outputs import check_replaceable, replace_file
from zrodlo.storage.refusal import Refusal
from zrodlo.training.checkpoint import read_model
from zrodlo.training.score import check_data, score


class ScoredModel(TypedDict):
    path: str
    parameters: int
    vocab_size: int
    context: int  # tokens a window
    baseline: str | None  # the training corpus of the bigram baseline


class CorpusScores(TypedDict):
    loss: float  # nats per target, weighted by targets
    perplexity: float
    bits_per_character: float | None  # the summed loss in bits over the scored text's characters
    bits_per_byte: float | None  # ... over its UTF-8 bytes (None for a text of no known bytes)
    targets: int
    characters: int  # of the targets' text (`zrodlo.data.text_size`)
    bytes: int
    windows: int
    documents: int
    unknown_tokens: int
    unknown_rate: float
    corpus_digest: str
    bigram_loss: NotRequired[float]  # with a baseline
    bigram_bits_per_byte: NotRequired[float | None]
    drawn_from: NotRequired[int]  # the corpus's windows, where `windows` of them were drawn


class Scores(TypedDict):
    """What `model evaluate` returns and writes with --output (docs/formats.md)."""

    model: ScoredModel
    corpora: dict[str, CorpusScores]  # by the corpus directory's name


class PoolScores(TypedDict):
    """A corpus's scores alone, as `model evaluate --metrics` writes them for DVC to compare."""

    loss: float
    perplexity: float
    bits_per_character: float | None
    bits_per_byte: float | None
    bigram_loss: NotRequired[float]
    bigram_bits_per_byte: NotRequired[float | None]


def metrics_of(scores: Scores) -> dict[str, PoolScores]:
    """The scores of each corpus without its counts, digests and the model's provenance: what
    `dvc exp show` and `dvc metrics diff` should compare, and nothing else."""
    return {
        name: {key: entry[key] for key in PoolScores.__annotations__ if key in entry}  # type: ignore[misc]
        for name, entry in scores["corpora"].items()
    }


def evaluate(
    model: Path,
    corpus: Sequence[Path] = (),
    context: int | None = None,
    batch_size: int = 64,
    baseline: Path | None = None,
    output: Path | None = None,
    device: str = "cpu",
    ordinal: int | None = None,
    metrics: Path | None = None,
    sample_corpus: Sequence[Path] = (),
    sample_windows: int | None = None,
    sample_seed: int = 1,
    progress: Callable[[str, int, int], None] | None = None,
) -> Scores:
    """The scores of `model` on each of `corpus` (a list of corpora), at `context` tokens a window
    (the model's positions + 1 where None), `batch_size` windows a forward pass: {"model": {...},
    "corpora": {name: {"loss": ..., ...}}}. With `baseline`, each corpus also gets the bigram
    baseline of that training corpus; with `output`, the scores are written there as JSON too,
    and with `metrics` the scores alone (`metrics_of`). Each of `sample_corpus` is scored, before
    the others, on `sample_windows` of its windows drawn from `sample_seed`
    (`zrodlo.data.windows.scored_windows`), so that a large training pool costs a bounded time.
    `progress(corpus, batches done, batches)` hears of every forward pass. A corpus of no
    documents (an empty test pool) is not scored; the others are."""
    if not corpus and not sample_corpus:
        raise Refusal("give --corpus or --sample-corpus, the corpora to score")
    if sample_corpus and sample_windows is None:
        raise Refusal("--sample-corpus needs --sample-windows, the windows each is scored on")
    if sample_windows is not None:
        if isinstance(sample_windows, bool) or sample_windows < 1:
            raise Refusal(
                f"--sample-windows is {sample_windows}; it must be a whole number of 1 or more"
            )
        if not sample_corpus:
            raise Refusal("--sample-windows needs --sample-corpus, the corpora scored on a sample")
    try:
        check_seed(sample_seed)
    except Refusal as refusal:
        raise Refusal(refusal.sentence.replace("--seed", "--sample-seed", 1)) from None
    for path in (output, metrics):
        if path is not None:
            check_replaceable(path)
    loaded = read_model(model)
    window = context if context is not None else loaded.config.positions + 1
    if batch_size < 1:
        raise Refusal(f"--batch-size is {batch_size}; it must be a whole number of 1 or more")
    given = [
        (path, index < len(sample_corpus)) for index, path in enumerate([*sample_corpus, *corpus])
    ]
    # (path, corpus, scored on a sample); a corpus of no documents (an empty test pool) has
    # nothing to score: the pools that exist are scored.
    opened = [(path, Corpus.open(path), sampled) for path, sampled in given]
    opened = [(path, data, sampled) for path, data, sampled in opened if data.manifest["documents"]]
    if not opened:
        raise Refusal("every corpus given holds no documents; there is nothing to score")
    for _, data, _ in opened:
        data.verify()  # on a second thread, while the model scores
    tables = [check_data(data, loaded, window) for _, data, _ in opened]
    reference = None
    if baseline is not None:
        counted = Corpus.open(baseline)
        check_data(counted, loaded, window)
        counted.verified()
        reference = Bigram.count(counted.tokens, counted.offsets, loaded.config.vocab_size)
    target = resolve_device(device, ordinal, "f32")
    network = build_model(loaded, target)
    results: dict[str, CorpusScores] = {}
    for (path, data, sampled), table in zip(opened, tables, strict=True):
        size = sample_windows if sampled else None
        windows = scored_windows(len(table), size, sample_seed)  # (k,)
        name = path.name if path.name not in results else str(path)
        heard = None if progress is None else partial(progress, name)
        scored = score(
            network, data.tokens, table, batch_size, target, windows=windows, on_batch=heard
        )
        text_bytes, characters = scored_text(data.tokens, table, windows, loaded.tokenizer)
        entry: CorpusScores = {
            "loss": scored.loss,
            "perplexity": scored.perplexity,
            "bits_per_character": bits(scored.summed, characters),
            "bits_per_byte": bits(scored.summed, text_bytes),
            "targets": scored.targets,
            "characters": characters,
            "bytes": text_bytes,
            "windows": scored.windows,
            "documents": data.manifest["documents"],
            "unknown_tokens": data.manifest.get("unknown_tokens"),
            "unknown_rate": data.manifest.get("unknown_rate"),
            "corpus_digest": data.digest,
        }
        if reference is not None:
            counted_score = reference.score(data.tokens, table, windows=windows)
            entry["bigram_loss"] = counted_score.loss
            entry["bigram_bits_per_byte"] = bits(counted_score.summed, text_bytes)
        if len(windows) < len(table):
            entry["drawn_from"] = len(table)
        results[name] = entry
    for _, data, _ in opened:
        data.verified()  # no score of a corpus that fails its digests is reported
    scores: Scores = {
        "model": {
            "path": str(model),
            "parameters": parameter_count(loaded.config),
            "vocab_size": loaded.config.vocab_size,
            "context": window,
            "baseline": None if baseline is None else str(baseline),
        },
        "corpora": results,
    }
    if output is not None:
        replace_file(output, json_text(scores))
    if metrics is not None:
        replace_file(metrics, json_text(metrics_of(scores)))
    return scores

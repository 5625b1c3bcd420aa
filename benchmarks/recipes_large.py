"""Recipes at a larger scale, where the optimizer rather than the data decides: validation bits per
byte after the same minutes of training on the Python standard library's source (about 12 MB,
imported as benchmarks/evaluation.py imports it), with a byte-level BPE of 4,096 tokens, a model
of 6 layers of 256 (about 8 M parameters) without dropout, context 256 and 8,192 tokens a step,
for the AdamW recipe (measure.adamw_params), nanochat's (its rates scaled by this width as its setup_optimizer
scales them) and the pipeline's, each at the best of three learning rates; and how many steps the
pipeline's recipe takes to reach the AdamW recipe's final validation bits, as a share of the AdamW
run's steps.

nanoGPT's CPU recipe is left out here: it is a model of 4 layers of 128 at context 64, the small
scale that benchmarks/recipes.py measures. The recipes, their steps (the least of two probes that
agree, taken in turn until two do, then the budget over a step's seconds, 10% for the scores) and
their runs are recipe_runs.py's; each run scores the same 256 validation windows, drawn once from
the seed, about ten times. A step count to reach a value is read off those scores, linearly between
the two that straddle it. Figures go to reports/bench/<report>.json.

    .venv/bin/python benchmarks/recipes_large.py [--minutes 7] [--report recipes_large]
        [--recipes adamw nanochat "new recipe, SwiGLU"] [--rates-from recipes_large]

The default budget is 7 minutes of each run: the 9 runs take about 70 minutes on 2 cores;
`--minutes 30` takes about 5 hours, or about 100 minutes with `--rates-from recipes_large`, which
runs each recipe at the one rate that was best in that report instead of sweeping three."""

from __future__ import annotations

import argparse
import hashlib
import json
import sysconfig
import tempfile
from dataclasses import replace
from pathlib import Path

import measure
import recipe_runs
import recipes
from evaluation import LEFT_OUT

from zrodlo import api

# No dropout: a run here reads less than one pass over its training tokens.
SCALE = {"layers": 6, "heads": 4, "d_model": 256, "d_ff": 1024, "positions": 256, "dropout": 0.0}
# 32 windows of 256 tokens a step, in 4 micro-batches; 256 held-out windows a score.
TRAIN = {"context": 257, "batch_size": 32, "micro_batch_size": 8, "eval_windows": 256}
VOCABULARY = 4096
PIPELINE = "new recipe, SwiGLU"
# nanochat's AdamW rates scaled by (d_model / 768) ** -0.5 at this width.
WIDTH = (SCALE["d_model"] / 768) ** -0.5
NANOCHAT = replace(
    recipe_runs.NANOCHAT,
    relative=recipe_runs.NANOCHAT.relative
    | {"embedding_rate": 0.3 / 0.02 * WIDTH, "head_rate": 0.008 / 0.02 * WIDTH},
)
RECIPES = {
    "adamw": recipe_runs.RECIPES["adamw"],
    "nanochat": NANOCHAT,
    PIPELINE: recipe_runs.RECIPES[PIPELINE],
}


def large_params() -> dict:
    """The AdamW recipe's params at this scale."""
    params = measure.adamw_params()
    params["init"] = params["init"] | SCALE
    params["train"] = params["train"] | TRAIN
    params["tokenizer"] = {"kind": "bpe", "vocab_size": VOCABULARY}
    return params


def prepared(root: Path, params: dict) -> dict:
    """The standard library as documents, pools, tokenizer and train and validation corpora."""
    documents = root / "documents.jsonl"
    imported = api.import_documents(
        Path(sysconfig.get_paths()["stdlib"]), documents, include=["*.py"], exclude=LEFT_OUT,
        skip_empty=True, skip_undecodable=True,
    )  # fmt: skip
    splits = params["splits"]
    api.assign(
        documents, root / "splits.json", validation=splits["validation"], test=splits["test"]
    )
    api.split(documents, root / "splits.json", root / "pools")
    api.fit_tokenizer(root / "pools/train.jsonl", root / "tokenizer", kind="bpe",
                      vocab_size=VOCABULARY)  # fmt: skip
    corpus = {"documents": imported.documents,
              "sha256": hashlib.sha256(documents.read_bytes()).hexdigest()}  # fmt: skip
    for pool in ("train", "validation"):
        manifest = api.prepare(root / f"pools/{pool}.jsonl", root / "tokenizer", root / pool)
        corpus[f"{pool}_characters"] = manifest["characters"]
        corpus[f"{pool}_tokens"] = manifest["tokens"]
    return corpus


def steps_to_reach(points: list[tuple[int, float]], target: float) -> float | None:
    """The steps at which a run's scores first reach `target`, linearly between the two scores
    that straddle it; None where they never do."""
    previous = None
    for step, bits in points:
        if bits <= target:
            if previous is None:
                return float(step)
            (step0, bits0) = previous
            return step0 + (step - step0) * (bits0 - target) / (bits0 - bits)
        previous = (step, bits)
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=7)
    parser.add_argument("--recipes", nargs="+", default=list(RECIPES), choices=list(RECIPES))
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--report", default="recipes_large")
    parser.add_argument("--rates-from", help="a report whose best rate each recipe runs at alone")
    args = parser.parse_args()
    params = large_params()
    chosen = {name: RECIPES[name] for name in args.recipes}
    if args.rates_from:
        earlier = json.loads((measure.REPORTS / f"{args.rates_from}.json").read_text())["recipes"]
        for name, recipe in chosen.items():
            chosen[name] = replace(recipe, rates=(earlier[name]["best_learning_rate"],))
    budget = {}
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        corpus = prepared(root, params)
        probes = recipe_runs.probed(root, params, chosen)
        update_cost = recipes.newton_schulz_share(root, params, args.repeats)
        for name, recipe in chosen.items():
            budget[name] = recipe_runs.swept(root, params, name, recipe, args.minutes,
                                             probes[name])  # fmt: skip
    report = {
        "benchmark": "validation bits per byte at equal wall time by recipe, at a larger scale",
        "corpus": corpus, "scale": SCALE, "train": TRAIN, "vocab_size": VOCABULARY,
        "minutes": args.minutes, "rates_from": args.rates_from, "recipes": budget, "update_seconds": update_cost,
        "machine": measure.machine(),
    }  # fmt: skip
    if {"adamw", PIPELINE} <= set(budget):
        adamw, pipeline = budget["adamw"], budget[PIPELINE]
        target = adamw["best_bits_per_byte"]
        points = pipeline["runs"][str(pipeline["best_learning_rate"])]["curve"]
        reached = steps_to_reach(points, target)
        report["pipeline_steps_to_adamw_final"] = {
            "adamw_steps": adamw["steps"], "adamw_bits_per_byte": target,
            "pipeline_steps": None if reached is None else round(reached, 1),
            "share_of_adamw_steps": None if reached is None else round(reached / adamw["steps"], 3),
        }  # fmt: skip
    if PIPELINE in probes:
        share = update_cost["newton-schulz"]["median_s"] / recipe_runs.agreed(probes[PIPELINE])
        report["newton_schulz_share_of_pipeline_step"] = round(share, 4)
    measure.write_report(measure.REPORTS / f"{args.report}.json", report)


if __name__ == "__main__":
    main()

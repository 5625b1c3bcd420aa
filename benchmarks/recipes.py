"""Recipes at equal wall time: validation bits per byte after the same minutes of training on the
default documents, for the AdamW recipe (AdamW on every weight, cosine decay: the pipeline's default
before today's, measure.adamw_params), nanoGPT's CPU recipe and nanochat's at this size, each change
of today's recipe alone over the AdamW recipe (Muon, ReLU squared, QK-norm, unscaled norms, zero
output projections with a small head, a logit cap, warmup-stable-decay) and all of them at once
(with SwiGLU, the pipeline's params.yaml; that with nanochat's x0 mix; and that with SwiGLU 344
wide and a key and value head for each query head), each at the best of three learning rates; and
Muon's update cost beside AdamW's, with the Newton-Schulz iterations' share of a step.

Every recipe runs in Zrodlo's trainer on the same tokens with one evaluator, so that what differs
is the recipe: nanoGPT's is its README's CPU command (GPT-2's decoder, 4 layers of 128, context
64, batch 12, AdamW at 1e-3 with beta2 0.99, 100 of 2,000 updates of warmup, cosine decay to a
tenth, no dropout); nanochat's is its model (QK-norm, ReLU squared, unscaled norms, zero output
projections, a head drawn at 0.001, logits capped at 15, no dropout) and its optimizer groups
(Muon at its matrix rate, AdamW on the embedding and the head at their rates scaled by width as
nanochat's setup_optimizer scales them, betas 0.8 and 0.96, epsilon 1e-10, 40 updates of warmup,
linear warmdown over the last 65% to 5%, Muon's momentum from 0.85 to 0.97 over 400 updates),
swept by 0.25, 0.5 and 1 of those rates. What Zrodlo's decoders do not have is left out: nanoGPT's
unbiased layers; nanochat's value embeddings, smear and backout, its embedding drawn at 0.8, its
cautious weight decay and schedule of it, and its momentum warmdown. Its residual and x0 scalars
are measured apart, over the pipeline's recipe (the x0 mix).

The documents are split and the tokenizer fitted as the pipeline does (params.yaml). A recipe is the
AdamW recipe's init and train sections with its changes (recipe_runs.RECIPES), trained on shuffled
windows as the train stage is; its steps are chosen so that its schedule ends at the budget: the
least of its probes (10 steps, or as many as take 3 s after the first two) that another lies within
5% of gives the seconds a step takes, and the run is the budget over that (10% left for the
held-out scores). The probes are taken in turn with the other recipes' until two agree: a first one
runs cold, and one that another process slows reads more; probes that never agree stop the
benchmark. With `--seeds`, each rate runs once a seed (the weights drawn and the windows' order
differ) and its figures are the runs' mean, its bits by seed beside them. Every run scores the
whole validation pool about ten times; bits per byte are over the text the windows hold. Figures
go to reports/bench/<report>.json.

    .venv/bin/python benchmarks/recipes.py [--minutes 2 4] [--recipes adamw muon] [--report recipes]
        [--muon-rates 0.01 0.02 0.04] [--nanogpt-rates 0.0005 0.001 0.002]
        [--nanochat-rates 0.005 0.01 0.02] [--documents python-topics] [--seeds 1 2 3]

`--documents python-topics` trains on the Python language reference that pydoc keeps (its 79
topics, 465,000 characters in Python 3.11.7), a second text that every machine with Python has."""

from __future__ import annotations

import argparse
import hashlib
import json
import tempfile
from dataclasses import replace
from pathlib import Path

import measure
import torch
from recipe_runs import MUON_RATES, RECIPES, agreed, model_of, plan_of, probed, swept

from zrodlo import api
from zrodlo.model.decoder import build_model
from zrodlo.model.directory import read_model_directory
from zrodlo.training.muon import is_hidden_matrix, logical_rows, orthogonalized
from zrodlo.training.optimizer import build_optimizer
from zrodlo.training.plan import RunPlan


def python_topics(path: Path) -> None:
    """The Python language reference as pydoc keeps it (pydoc_data.topics, in every Python 3.11):
    a document a topic."""
    from pydoc_data.topics import topics

    with path.open("w", encoding="utf-8") as out:
        for name in sorted(topics):
            out.write(json.dumps({"id": name, "text": topics[name]}) + "\n")


# The documents to train on: the pipeline's default, or a second text that every machine has.
DOCUMENTS = {"torch-docs": api.torch_docs, "python-topics": python_topics}


def prepared(root: Path, params: dict, documents: str) -> Path:
    DOCUMENTS[documents](root / "documents.jsonl")
    splits = params["splits"]
    api.assign(
        root / "documents.jsonl", root / "splits.json", validation=splits["validation"],
        test=splits["test"],
    )  # fmt: skip
    api.split(root / "documents.jsonl", root / "splits.json", root / "pools")
    tokenizer = params["tokenizer"]
    api.fit_tokenizer(
        root / "pools/train.jsonl", root / "tokenizer", kind=tokenizer["kind"],
        vocab_size=tokenizer["vocab_size"],
    )  # fmt: skip
    for pool in ("train", "validation"):
        api.prepare(root / f"pools/{pool}.jsonl", root / "tokenizer", root / pool)
    return root


def newton_schulz_share(root: Path, params: dict, repeats: int) -> dict:
    """Seconds of AdamW's update and Muon's over the model's weights with random gradients, and of
    the Newton-Schulz iterations alone, interleaved; and a step's seconds from the probes."""
    model = read_model_directory(model_of(root, params, RECIPES["adamw"]))
    network = build_model(model)
    named = list(network.named_parameters())
    for _, parameter in named:
        parameter.grad = torch.randn_like(parameter)
    plan = RunPlan(**plan_of(params, RECIPES["muon"], 100, 0.02))
    optimizers = {
        "adamw": build_optimizer(named, model.config, plan.adamw, 0.004, None),
        "muon": build_optimizer(named, model.config, plan.adamw, 0.02, plan.muon),
    }
    blocks = [  # each logical matrix of the hidden matrices' gradients
        block
        for name, parameter in named
        if is_hidden_matrix(name, parameter)
        for block in parameter.grad.split(logical_rows(name, parameter.shape[0], model.config))
    ]
    torch.set_num_threads(params["train"]["threads"])
    variants = {
        "adamw update": lambda: measure.timed(optimizers["adamw"].step),
        "muon update": lambda: measure.timed(optimizers["muon"].step),
        "newton-schulz": lambda: measure.timed(lambda: [orthogonalized(b) for b in blocks]),
    }
    samples = measure.interleave(variants, repeats)
    return {name: measure.summary(values) for name, values in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, nargs="+", default=[2])
    parser.add_argument("--recipes", nargs="+", default=list(RECIPES), choices=list(RECIPES))
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--report", default="recipes")
    parser.add_argument("--documents", default="torch-docs", choices=list(DOCUMENTS))
    parser.add_argument("--muon-rates", type=float, nargs="+", default=list(MUON_RATES))
    for name in ("nanogpt", "nanochat"):
        parser.add_argument(
            f"--{name}-rates", type=float, nargs="+", default=list(RECIPES[name].rates)
        )
    parser.add_argument("--seeds", type=int, nargs="+", default=[1])
    args = parser.parse_args()
    params = measure.adamw_params()  # the ablation is over the AdamW default
    swept_rates = {  # the Muon recipes, nanoGPT's and nanochat's sweep the rates asked for
        MUON_RATES: tuple(args.muon_rates),
        RECIPES["nanogpt"].rates: tuple(args.nanogpt_rates),
        RECIPES["nanochat"].rates: tuple(args.nanochat_rates),
    }
    recipes = {
        name: replace(
            RECIPES[name], rates=swept_rates.get(RECIPES[name].rates, RECIPES[name].rates)
        )
        for name in args.recipes
    }
    budgets = {}
    with tempfile.TemporaryDirectory() as directory:
        root = prepared(Path(directory), params, args.documents)
        digest = hashlib.sha256((root / "documents.jsonl").read_bytes()).hexdigest()
        probes = probed(root, params, recipes)
        for minutes in args.minutes:
            budgets[f"{minutes:g} minutes"] = {
                name: swept(root, params, name, recipe, minutes, probes[name], tuple(args.seeds))
                for name, recipe in recipes.items()
            }
        update_cost = newton_schulz_share(root, params, args.repeats)
    muon_update = update_cost["muon update"]["median_s"]
    report = {
        "benchmark": "validation bits per byte at equal wall time by recipe; Muon's update cost",
        "documents": {"name": args.documents, "sha256": digest},
        "seeds": args.seeds,
        "budgets": budgets,
        "update_seconds": update_cost,
        "muon_update_over_adamw_update": round(
            muon_update / update_cost["adamw update"]["median_s"], 3
        ),
        "machine": measure.machine(),
    }
    if "muon" in probes:  # the share of a step of Muon alone over the default
        share = update_cost["newton-schulz"]["median_s"] / agreed(probes["muon"])
        report["newton_schulz_share_of_muon_step"] = round(share, 4)
    measure.write_report(measure.REPORTS / f"{args.report}.json", report)


if __name__ == "__main__":
    main()

"""Recipes at equal wall time: validation bits per byte after the same minutes of training on the
default documents, for the AdamW recipe (AdamW on every weight, cosine decay: the pipeline's default
before today's, measure.adamw_params), nanoGPT's CPU recipe and nanochat's at this size, each change
of today's recipe alone over the AdamW recipe (Muon, ReLU squared, QK-norm, unscaled norms, zero
output projections with a small head, a logit cap, warmup-stable-decay) and all of them at once
(with SwiGLU, the pipeline's params.yaml; and that with nanochat's x0 mix), each at the best of
three learning rates; and Muon's update cost beside AdamW's, with the Newton-Schulz iterations'
share of a step.

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

The documents are split and the tokenizer fitted as the pipeline does (params.yaml). A recipe is
the AdamW recipe's init and train sections with its changes (RECIPES), trained on shuffled windows
as the train stage is; its steps are chosen so that its schedule ends at the budget: the least
of two 10-step probes, taken in turn with the other recipes' (a first one runs cold), gives the
seconds a step takes, and the run is the budget over that (10% left for the held-out scores). Every run scores the whole validation pool about ten times; bits per byte are over the
text the windows hold. Figures go to reports/bench/<report>.json.

    .venv/bin/python benchmarks/recipes.py [--minutes 2 4] [--recipes adamw muon] [--report recipes]
        [--muon-rates 0.01 0.02 0.04] [--documents python-topics]

`--documents python-topics` trains on the Python language reference that pydoc keeps (its 79
topics, 465,000 characters in Python 3.11.7), a second text that every machine with Python has."""

from __future__ import annotations

import argparse
import hashlib
import json
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

import measure
import torch

from zrodlo import api
from zrodlo.model.decoder import build_model
from zrodlo.model.directory import read_model_directory
from zrodlo.pipeline.schedule import schedule_steps
from zrodlo.training.muon import is_hidden_matrix, logical_rows, orthogonalized
from zrodlo.training.optimizer import build_optimizer
from zrodlo.training.plan import RunPlan


@dataclass(frozen=True)
class Recipe:
    """Changes to params.yaml's init and train sections (None: a key left out), the peak rates
    swept, and the train keys that are multiples of the rate swept."""

    init: dict
    train: dict
    rates: tuple[float, ...]
    relative: dict = field(default_factory=dict)


ADAMW_RATES = (0.002, 0.004, 0.008)
MUON_RATES = (0.01, 0.02, 0.04)
MUON = {"optimizer": "muon", "embedding_rate": 0.008, "head_rate": 0.004, "vector_rate": 0.008}
WSD = {"decay_shape": "linear", "decay": 0.3, "min_learning_rate": 0.0}
MODEL = {"architecture": "qwen3", "mlp": "relu2", "norm": "unscaled", "projection_init": "zero",
         "head_std": 0.001}  # fmt: skip
NANOGPT = Recipe(
    {"architecture": "gpt", "positions": 64, "dropout": 0.0, "tie_embeddings": True,
     "kv_heads": None},
    {"context": 65, "batch_size": 12, "micro_batch_size": 12, "beta1": 0.9, "beta2": 0.99,
     "warmup": 0.05, "decay": 0.95, "decay_shape": "cosine"},
    (5e-4, 1e-3, 2e-3), {"min_learning_rate": 0.1},
)  # fmt: skip
# nanochat's Muon rate 0.02; its AdamW rates scaled by (d_model / 768) ** -0.5, as multiples of it.
WIDTH = (128 / 768) ** -0.5
NANOCHAT = Recipe(
    MODEL | {"logit_cap": 15.0, "dropout": 0.0, "kv_heads": None},
    {"optimizer": "muon", "beta1": 0.8, "beta2": 0.96, "epsilon": 1e-10, "warmup_updates": 40,
     "decay": 0.65, "decay_shape": "linear", "muon_momentum": 0.97,
     "muon_momentum_warmup": 400},
    (0.005, 0.01, 0.02),
    {"embedding_rate": 0.3 / 0.02 * WIDTH, "head_rate": 0.008 / 0.02 * WIDTH,
     "min_learning_rate": 0.05},
)  # fmt: skip
# Today's default, nanoGPT's and nanochat's, each change alone over the default, and all at once.
RECIPES = {
    "adamw": Recipe({}, {}, ADAMW_RATES),
    "nanogpt": NANOGPT,
    "nanochat": NANOCHAT,
    "muon": Recipe({}, MUON, MUON_RATES),
    "relu2": Recipe({"mlp": "relu2"}, {}, ADAMW_RATES),
    "qk-norm": Recipe({"architecture": "qwen3"}, {}, ADAMW_RATES),
    "unscaled norms": Recipe({"norm": "unscaled"}, {}, ADAMW_RATES),
    "zero projections, small head": Recipe(
        {"projection_init": "zero", "head_std": 0.001}, {}, ADAMW_RATES
    ),
    "wsd": Recipe({}, WSD, ADAMW_RATES),
    "logit cap": Recipe({"logit_cap": 15.0}, {}, ADAMW_RATES),
    "new recipe": Recipe(MODEL, MUON | WSD, MUON_RATES),
    # What LlamaForCausalLM's kin compute: Qwen3ForCausalLM exports it.
    "new recipe, SwiGLU": Recipe(MODEL | {"mlp": None}, MUON | WSD, MUON_RATES),
    # The pipeline's with nanochat's x0 mix, which no transformers class computes.
    "new recipe, SwiGLU, x0 mix": Recipe(
        MODEL | {"mlp": None, "x0_mix": 0.1}, MUON | WSD, MUON_RATES
    ),
}


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


def model_of(root: Path, params: dict, recipe: Recipe) -> Path:
    """The recipe's model, params.yaml's init section with its changes, made once."""
    init = params["init"] | recipe.init
    init = {k: v for k, v in init.items() if k != "from" and v is not None}
    model = root / ("model-" + "-".join(f"{k}={v}" for k, v in sorted(recipe.init.items())))
    if not model.exists():
        api.init(root / "tokenizer", model, **init)
    return model


def plan_of(params: dict, recipe: Recipe, steps: int, rate: float) -> dict:
    """The run's flags: the train stage's (its windows shuffled, as dvc.yaml asks) with the
    recipe's changes, a warmup of whole updates where it gives one."""
    relative = {key: factor * rate for key, factor in recipe.relative.items()}
    train = dict(params["train"], **recipe.train, **relative, steps=steps, learning_rate=rate)
    plan = {key: value for key, value in train.items() if key in RunPlan.__dataclass_fields__}
    plan |= schedule_steps(train) | {"eval_every": max(1, steps // 10), "shuffle": True}
    if "warmup_updates" in train:  # taken from the stable updates
        warmup = min(train["warmup_updates"], plan["warmup_steps"] + plan["stable_steps"])
        plan["stable_steps"] -= warmup - plan["warmup_steps"]
        plan["warmup_steps"] = warmup
    return plan | {"checkpoint_every": steps, "keep_checkpoints": 1}


def trained(root: Path, params: dict, recipe: Recipe, steps: int, rate: float, name: str) -> list:
    """One run of the recipe, `steps` at peak rate `rate`; its step records."""
    records = []

    @contextmanager
    def progress(done: int, total: int):
        yield records.append

    train = params["train"]
    api.train(
        model_of(root, params, recipe), root / "train", root / name,
        eval_corpus=root / "validation", device=train["device"], threads=train["threads"],
        progress=progress, **plan_of(params, recipe, steps, rate),
    )  # fmt: skip
    return records


def final_bits(records) -> tuple[float, float]:
    """(seconds of steps and scores, the last validation bits per byte)."""
    seconds = sum(r.seconds + (r.eval_seconds or 0.0) for r in records)
    return round(seconds, 1), round(records[-1].eval_bits_per_byte, 4)


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


def probed(root: Path, params: dict, names: list[str], rounds: int = 2) -> dict[str, float]:
    """Each recipe's seconds a step: the least, over `rounds` 10-step probes taken in turn with
    the other recipes', of the mean of its warm steps (after the first two)."""
    seconds: dict[str, list[float]] = {name: [] for name in names}
    for round_ in range(rounds):
        for name in names:
            probe = trained(root, params, RECIPES[name], 10, RECIPES[name].rates[0],
                            f"probe-{name}-{round_}")  # fmt: skip
            seconds[name].append(sum(r.seconds for r in probe[2:]) / len(probe[2:]))
    return {name: min(values) for name, values in seconds.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, nargs="+", default=[2])
    parser.add_argument("--recipes", nargs="+", default=list(RECIPES), choices=list(RECIPES))
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--report", default="recipes")
    parser.add_argument("--documents", default="torch-docs", choices=list(DOCUMENTS))
    parser.add_argument("--muon-rates", type=float, nargs="+", default=list(MUON_RATES))
    args = parser.parse_args()
    params = measure.adamw_params()  # the ablation is over the AdamW default
    for name, recipe in RECIPES.items():  # the Muon recipes sweep the rates asked for
        if recipe.rates == MUON_RATES:
            RECIPES[name] = replace(recipe, rates=tuple(args.muon_rates))
    budgets = {}
    with tempfile.TemporaryDirectory() as directory:
        root = prepared(Path(directory), params, args.documents)
        digest = hashlib.sha256((root / "documents.jsonl").read_bytes()).hexdigest()
        per_step = probed(root, params, args.recipes)
        for minutes in args.minutes:
            budgets[f"{minutes:g} minutes"] = {
                name: swept(root, params, name, minutes, per_step[name]) for name in args.recipes
            }
        update_cost = newton_schulz_share(root, params, args.repeats)
    muon_update = update_cost["muon update"]["median_s"]
    report = {
        "benchmark": "validation bits per byte at equal wall time by recipe; Muon's update cost",
        "documents": {"name": args.documents, "sha256": digest},
        "budgets": budgets,
        "update_seconds": update_cost,
        "muon_update_over_adamw_update": round(
            muon_update / update_cost["adamw update"]["median_s"], 3
        ),
        "machine": measure.machine(),
    }
    if "muon" in per_step:  # the share of a step of Muon alone over the default
        share = update_cost["newton-schulz"]["median_s"] / per_step["muon"]
        report["newton_schulz_share_of_muon_step"] = round(share, 4)
    measure.write_report(measure.REPORTS / f"{args.report}.json", report)


def swept(root: Path, params: dict, name: str, minutes: float, per_step: float) -> dict:
    """The recipe's runs at each of its rates, each of the steps that fill `minutes`."""
    recipe = RECIPES[name]
    steps = max(20, int(minutes * 60 / per_step * 0.9))  # 10% for the held-out scores
    started = time.perf_counter()
    runs = {
        str(rate): final_bits(
            trained(root, params, recipe, steps, rate, f"{name}-{minutes}-{rate}")
        )
        for rate in recipe.rates
    }
    best = min(runs, key=lambda rate: runs[rate][1])
    return {
        "init": recipe.init, "train": recipe.train, "relative": recipe.relative,
        "seconds_per_step": round(per_step, 4),
        "steps": steps, "best_learning_rate": float(best), "best_bits_per_byte": runs[best][1],
        "runs": {rate: {"seconds": s, "bits_per_byte": b} for rate, (s, b) in runs.items()},
        "wall_seconds": round(time.perf_counter() - started, 1),
    }  # fmt: skip


if __name__ == "__main__":
    main()

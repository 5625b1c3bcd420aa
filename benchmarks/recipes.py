"""Recipes at equal wall time: validation bits per byte after the same minutes of training on the
default documents, for today's default (AdamW on every weight, cosine decay), each change of
today's recipe alone over it (Muon, ReLU squared, QK-norm, unscaled norms, zero output projections
with a small head, warmup-stable-decay) and all of them at once, each at the best of its learning
rates; and Muon's update cost beside AdamW's, with the Newton-Schulz iterations' share of a step.

The documents are split and the tokenizer fitted as the pipeline does (params.yaml). A recipe is
params.yaml's init and train sections with its changes (RECIPES); its steps are chosen so that its
schedule ends at the budget: a 10-step probe gives the seconds a step takes, and the run is the
budget over that (10% left for the held-out scores). Every run scores the whole validation pool
about ten times; bits per byte are over the text the windows hold. Figures go to
reports/bench/<report>.json.

    .venv/bin/python benchmarks/recipes.py [--minutes 2 4] [--recipes adamw muon] [--report recipes]
        [--muon-rates 0.01 0.02 0.04]"""

from __future__ import annotations

import argparse
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import measure
import torch
import yaml

from zrodlo import api
from zrodlo.model.decoder import build_model
from zrodlo.model.directory import read_model_directory
from zrodlo.pipeline.schedule import schedule_steps
from zrodlo.training.muon import is_hidden_matrix, logical_rows, orthogonalized
from zrodlo.training.optimizer import build_optimizer
from zrodlo.training.plan import RunPlan


@dataclass(frozen=True)
class Recipe:
    """Changes to params.yaml's init and train sections, and the peak rates swept."""

    init: dict
    train: dict
    rates: tuple[float, ...]


ADAMW_RATES = (0.002, 0.004, 0.008)
MUON_RATES = (0.01, 0.02, 0.04)
MUON = {"optimizer": "muon", "embedding_rate": 0.008, "head_rate": 0.004, "vector_rate": 0.008}
WSD = {"decay_shape": "linear", "decay": 0.3, "min_learning_rate": 0.0}
MODEL = {"architecture": "qwen3", "mlp": "relu2", "norm": "unscaled", "projection_init": "zero",
         "head_std": 0.001}  # fmt: skip
# Today's default, each change alone over it, and all of them at once.
RECIPES = {
    "adamw": Recipe({}, {}, ADAMW_RATES),
    "muon": Recipe({}, MUON, MUON_RATES),
    "relu2": Recipe({"mlp": "relu2"}, {}, ADAMW_RATES),
    "qk-norm": Recipe({"architecture": "qwen3"}, {}, ADAMW_RATES),
    "unscaled norms": Recipe({"norm": "unscaled"}, {}, ADAMW_RATES),
    "zero projections, small head": Recipe(
        {"projection_init": "zero", "head_std": 0.001}, {}, ADAMW_RATES
    ),
    "wsd": Recipe({}, WSD, ADAMW_RATES),
    "new recipe": Recipe(MODEL, MUON | WSD, MUON_RATES),
}


def prepared(root: Path, params: dict) -> Path:
    api.torch_docs(root / "documents.jsonl")
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
    init = {k: v for k, v in params["init"].items() if k != "from" and v is not None}
    init |= recipe.init
    model = root / ("model-" + "-".join(f"{k}={v}" for k, v in sorted(recipe.init.items())))
    if not model.exists():
        api.init(root / "tokenizer", model, **init)
    return model


def plan_of(params: dict, changes: dict, steps: int, rate: float) -> dict:
    train = dict(params["train"], **changes, steps=steps, learning_rate=rate)
    plan = {key: value for key, value in train.items() if key in RunPlan.__dataclass_fields__}
    plan |= schedule_steps(train) | {"eval_every": max(1, steps // 10)}
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
        progress=progress, **plan_of(params, recipe.train, steps, rate),
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
    train = params["train"]
    plan = RunPlan(**plan_of(params, RECIPES["muon"].train, 100, 0.02))
    optimizers = {
        "adamw": build_optimizer(named, model.config, plan.adamw, 0.004, None),
        "muon": build_optimizer(named, model.config, plan.adamw, 0.02, plan.muon),
    }
    blocks = [
        update[first : first + rows]
        for name, update in ((n, p.grad) for n, p in named if is_hidden_matrix(n, p))
        for first, rows in _starts(logical_rows(name, update.shape[0], model.config))
    ]
    torch.set_num_threads(train["threads"])
    variants = {
        "adamw update": lambda: measure.timed(optimizers["adamw"].step),
        "muon update": lambda: measure.timed(optimizers["muon"].step),
        "newton-schulz": lambda: measure.timed(lambda: [orthogonalized(b) for b in blocks]),
    }
    samples = measure.interleave(variants, repeats)
    return {name: measure.summary(values) for name, values in samples.items()}


def _starts(rows: tuple[int, ...]):
    first = 0
    for count in rows:
        yield first, count
        first += count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, nargs="+", default=[2])
    parser.add_argument("--recipes", nargs="+", default=list(RECIPES), choices=list(RECIPES))
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--report", default="recipes")
    parser.add_argument("--muon-rates", type=float, nargs="+", default=list(MUON_RATES))
    args = parser.parse_args()
    params = yaml.safe_load((measure.ROOT / "params.yaml").read_text())
    for name, recipe in RECIPES.items():  # the Muon recipes sweep the rates asked for
        if recipe.rates == MUON_RATES:
            RECIPES[name] = Recipe(recipe.init, recipe.train, tuple(args.muon_rates))
    budgets, per_step = {}, {}
    with tempfile.TemporaryDirectory() as directory:
        root = prepared(Path(directory), params)
        for name in args.recipes:
            recipe = RECIPES[name]
            probe = trained(root, params, recipe, 10, recipe.rates[0], f"probe-{name}")
            per_step[name] = sum(r.seconds for r in probe[2:]) / len(probe[2:])  # warm steps
        for minutes in args.minutes:
            budgets[f"{minutes:g} minutes"] = {
                name: swept(root, params, name, minutes, per_step[name]) for name in args.recipes
            }
        update_cost = newton_schulz_share(root, params, args.repeats)
    muon_update = update_cost["muon update"]["median_s"]
    report = {
        "benchmark": "validation bits per byte at equal wall time by recipe; Muon's update cost",
        "budgets": budgets,
        "update_seconds": update_cost,
        "newton_schulz_share_of_muon_step": round(
            update_cost["newton-schulz"]["median_s"] / per_step.get("muon", float("nan")), 4
        ),
        "muon_update_over_adamw_update": round(
            muon_update / update_cost["adamw update"]["median_s"], 3
        ),
        "machine": measure.machine(),
    }
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
        "init": recipe.init, "train": recipe.train, "seconds_per_step": round(per_step, 4),
        "steps": steps, "best_learning_rate": float(best), "best_bits_per_byte": runs[best][1],
        "runs": {rate: {"seconds": s, "bits_per_byte": b} for rate, (s, b) in runs.items()},
        "wall_seconds": round(time.perf_counter() - started, 1),
    }  # fmt: skip


if __name__ == "__main__":
    main()

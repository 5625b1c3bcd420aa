"""The recipes that benchmarks/recipes.py and recipes_large.py measure, and how one runs: a
recipe is the AdamW recipe's init and train sections (measure.adamw_params) with its changes,
trained by Zrodlo's trainer on shuffled windows as the train stage is, for the steps that fill a
budget at the seconds a step took in probes."""

from __future__ import annotations

import itertools
import math
import statistics
import time
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

from zrodlo import api
from zrodlo.pipeline.schedule import schedule_steps
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
    # The pipeline's with SwiGLU's three matrices 344 wide (8/3 of the width: the numbers of two 4
    # times as wide) and a key and value head for each query head: a step 13% shorter.
    "new recipe, SwiGLU 344, MHA": Recipe(
        MODEL | {"mlp": None, "d_ff": 344, "kv_heads": None}, MUON | WSD, MUON_RATES
    ),
    # The pipeline's with nanochat's x0 mix, which no transformers class computes.
    "new recipe, SwiGLU, x0 mix": Recipe(
        MODEL | {"mlp": None, "x0_mix": 0.1}, MUON | WSD, MUON_RATES
    ),
    # nanochat's with its residual and x0 scalars and its value embeddings, as Zrodlo has them.
    "nanochat, x0 mix, value embeddings": replace(
        NANOCHAT, init=NANOCHAT.init | {"x0_mix": 0.1, "value_embeddings": 2}
    ),
    # The pipeline's with nanochat's value embeddings, which no transformers class computes.
    "new recipe, SwiGLU, value embeddings": Recipe(
        MODEL | {"mlp": None, "value_embeddings": 2}, MUON | WSD, MUON_RATES
    ),
    # That with a key and value head for each query head, as nanochat's attention has.
    "new recipe, SwiGLU, MHA, value embeddings": Recipe(
        MODEL | {"mlp": None, "kv_heads": None, "value_embeddings": 2}, MUON | WSD, MUON_RATES
    ),
}


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


# Two probes of a recipe within this share of each other read the CPU alone; a probe another
# process slowed reads more, so probing goes on, in turn with the other recipes, until two do.
AGREE = 0.05
MOST_ROUNDS = 6
# A probe's steps: two cold, then timed steps lasting PROBE_SECONDS at the least; a first probe of
# PROBE_STEPS that is over sooner (nanoGPT's steps take 0.05 s) reads the scheduler's jitter
# rather than the step, so it only sets how many steps the recipe's probes take.
PROBE_STEPS = 10
PROBE_SECONDS = 3.0


def probed(root: Path, params: dict, recipes: dict[str, Recipe]) -> dict[str, list[float]]:
    """Each recipe's probes, the mean seconds of their warm steps (after the first two): rounds in
    turn with the other recipes' until two of a recipe's agree within AGREE, at least two rounds;
    a recipe whose probes never agree stops the benchmark."""
    seconds: dict[str, list[float]] = {name: [] for name in recipes}
    steps = dict.fromkeys(recipes, PROBE_STEPS)
    for round_ in range(MOST_ROUNDS):
        for name, recipe in recipes.items():
            if round_ >= 2 and agreed(seconds[name]) is not None:
                continue
            probe = trained(
                root, params, recipe, steps[name], recipe.rates[0], f"probe-{name}-{round_}"
            )
            warm = [r.seconds for r in probe[2:]]
            if sum(warm) < PROBE_SECONDS:  # too short to read: the next ones last long enough
                steps[name] = 2 + math.ceil(PROBE_SECONDS * len(warm) / sum(warm))
                continue
            seconds[name].append(sum(warm) / len(warm))
    for name, values in seconds.items():
        if agreed(values) is None:
            raise SystemExit(
                f"{name}'s probes read {', '.join(f'{v:.3f}' for v in values)} s a step and "
                f"no two lie within {AGREE:.0%} of each other: the CPU's speed varies while they "
                "run (another process may share it); run the benchmark alone"
            )
    return seconds


def agreed(values: list[float]) -> float | None:
    """The least of a recipe's probes that another lies within AGREE above, the step's seconds;
    None where no two agree. A probe read alone low (a burst of a faster clock) is passed over."""
    for least, above in itertools.pairwise(sorted(values)):
        if above <= least * (1 + AGREE):
            return least
    return None


def curve(records) -> list[tuple[int, float]]:
    """(steps done, validation bits per byte) at each held-out score of a run."""
    return [(r.step, r.eval_bits_per_byte) for r in records if r.eval_bits_per_byte is not None]


def swept(root: Path, params: dict, name: str, recipe: Recipe, minutes: float,
          probes: list[float], seeds: tuple[int, ...] = (1,)) -> dict:  # fmt: skip
    """The recipe's runs at each of its rates, each of the steps that fill `minutes` at the
    seconds a step its `probes` agree on; with more than one of `seeds` (the init and train
    sections' seed: the weights drawn and the windows' order), a rate's figures are the runs'
    means, its curve the first seed's, and its bits by seed beside them."""
    per_step = agreed(probes)
    steps = max(20, int(minutes * 60 / per_step * 0.9))  # 10% for the held-out scores
    started = time.perf_counter()
    runs = {}
    for rate in recipe.rates:
        seconds, bits, curves = {}, {}, {}
        for seed in seeds:
            seeded = replace(
                recipe, init=recipe.init | {"seed": seed}, train=recipe.train | {"seed": seed}
            )
            records = trained(root, params, seeded, steps, rate, f"{name}-{minutes}-{rate}-{seed}")
            seconds[seed], bits[seed] = final_bits(records)
            curves[seed] = curve(records)
        runs[str(rate)] = {
            "seconds": round(statistics.mean(seconds.values()), 1),
            "bits_per_byte": round(statistics.mean(bits.values()), 4),
            "curve": curves[seeds[0]],
        }
        if len(seeds) > 1:
            runs[str(rate)]["bits_by_seed"] = {str(seed): b for seed, b in bits.items()}
    best = min(runs, key=lambda rate: runs[rate]["bits_per_byte"])
    entry = {
        "init": recipe.init, "train": recipe.train, "relative": recipe.relative,
        "seconds_per_step": round(per_step, 4), "probe_seconds": [round(p, 4) for p in probes],
        "steps": steps,
        "best_learning_rate": float(best), "best_bits_per_byte": runs[best]["bits_per_byte"],
        "runs": runs, "wall_seconds": round(time.perf_counter() - started, 1),
    }  # fmt: skip
    if len(seeds) > 1:  # how far apart the best rate's seeds end
        bits = runs[best]["bits_by_seed"].values()
        entry["best_seed_spread"] = round(max(bits) - min(bits), 4)
    return entry

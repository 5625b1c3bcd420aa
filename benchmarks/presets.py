"""What each model preset costs and reaches on the default data: docs/models.md's table of sizes.

The default documents (the torch docstrings) are split, tokenized and prepared as the pipeline
does, in a temporary folder. Each preset is initialised as the init stage does (positions 128,
params.yaml's dropout and seed, GPT-2's decoder on characters) and trained for --steps with
params.yaml's train section in the AdamW recipe (measure.adamw_params; its schedule's shares of
--steps, threads, batch) at --learning-rate, scoring the validation corpus every --eval-every
steps. Recorded per preset: its parameters, the median seconds of a training step, the corpus size
it suits (20 training tokens a parameter, here characters), and the training seconds (held-out
scoring left out) until validation loss first reaches the character-bigram baseline's and each of
--losses, with the validation loss at the last step. Presets run one after the other, alone.
Figures go to reports/bench/presets.json; docs/models.md's table of sizes is written from them
(tests/test_readme.py holds the two equal).

    .venv/bin/python benchmarks/presets.py [--steps 500] [--eval-every 25] [--losses 2.0 1.8 1.6]
        [--learning-rate 0.002]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from contextlib import contextmanager
from pathlib import Path

import measure

from zrodlo import api
from zrodlo.model.parts import parameter_count
from zrodlo.model.presets import PRESETS
from zrodlo.pipeline.schedule import schedule_steps
from zrodlo.training.plan import RunPlan

TOKENS_PER_PARAMETER = 20  # the compute-optimal ratio of training tokens to parameters


def prepared(root: Path) -> dict:
    """The default data as the pipeline's stages make it: tokenizer and train, validation corpora."""
    documents = root / "documents.jsonl"
    api.torch_docs(documents)
    api.assign(documents, root / "splits.json", validation=0.1, test=0.1)
    api.split(documents, root / "splits.json", root / "pools")
    api.fit_tokenizer(root / "pools/train.jsonl", root / "tokenizer")
    paths = {"tokenizer": root / "tokenizer"}
    (root / "corpus").mkdir()
    for pool in ("train", "validation"):
        paths[pool] = root / "corpus" / pool
        manifest = api.prepare(root / f"pools/{pool}.jsonl", paths["tokenizer"], paths[pool])
        paths[f"{pool}_tokens"] = manifest["tokens"]
    return paths


def run_preset(name: str, data: dict[str, Path], root: Path, args, params: dict) -> dict:
    """Train one preset; its figures."""
    init = params["init"]
    train = dict(params["train"], steps=args.steps, learning_rate=args.learning_rate)
    model = root / f"model-{name}"
    written = api.init(
        data["tokenizer"], model, preset=name, positions=init["positions"],
        dropout=init["dropout"], attention_dropout=init["attention_dropout"], seed=init["seed"],
    )  # fmt: skip
    plan = {key: value for key, value in train.items() if key in RunPlan.__dataclass_fields__}
    plan |= schedule_steps(train) | {"eval_every": args.eval_every, "shuffle": True}
    plan |= {"checkpoint_every": args.steps, "keep_checkpoints": 1}
    records = []

    @contextmanager
    def progress(done: int, total: int):
        yield records.append

    api.train(
        model, data["train"], root / f"run-{name}", eval_corpus=data["validation"],
        device=train["device"], threads=train["threads"], progress=progress, **plan,
    )  # fmt: skip
    scored = api.evaluate(model, [data["validation"]], baseline=data["train"])
    bigram = scored["corpora"]["validation"]["bigram_loss"]
    trained, reached = 0.0, {}
    targets = {"bigram": bigram, **{f"{loss}": loss for loss in args.losses}}
    for record in records:
        trained += record.seconds
        for label, target in targets.items():
            if record.eval_loss is not None and record.eval_loss <= target and label not in reached:
                reached[label] = round(trained, 1)
    config = written.config
    return {
        "shape": {
            field: getattr(config, field) for field in ("layers", "heads", "d_model", "d_ff")
        },
        "parameters": parameter_count(config),
        "seconds_per_step": round(statistics.median(r.seconds for r in records[1:]), 4),
        "suits_million_characters": round(parameter_count(config) * TOKENS_PER_PARAMETER / 1e6, 1),
        "bigram_loss": round(bigram, 4),
        "training_seconds_to": {label: reached.get(label) for label in targets},
        "validation_loss_at_end": round(records[-1].eval_loss, 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--eval-every", type=int, default=25)
    parser.add_argument("--losses", type=float, nargs="+", default=[2.0, 1.8, 1.6])
    # The rate docs/models.md's table was measured at, the pipeline's before it trained llama.
    parser.add_argument("--learning-rate", type=float, default=0.002)
    args = parser.parse_args()
    params = measure.adamw_params()
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        data = prepared(root)
        presets = {}
        for name in PRESETS:
            presets[name] = run_preset(name, data, root, args, params)
            print(name, json.dumps(presets[name]), flush=True)
    report = {
        "benchmark": "model presets on the default data: cost per step and time to a loss",
        "steps": args.steps,
        "eval_every": args.eval_every,
        "training_tokens": data["train_tokens"],
        "presets": presets,
        "machine": measure.machine(),
    }
    measure.write_report(measure.REPORTS / "presets.json", report)


if __name__ == "__main__":
    main()

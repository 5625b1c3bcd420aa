"""The share of a run's wall time that held-out scores take, on a corpus nobody here wrote: the
Python standard library's source files (about 12 MB), imported as a user's folder would be.

The folder is imported (`--include '*.py'`, its tests and site-packages excluded, skipping empty
and undecodable files), split, tokenized and prepared as the pipeline does, in a temporary folder;
params.yaml's init preset is trained for --steps with its train section (the schedule's shares of
--steps) in the AdamW recipe (measure.adamw_params), scoring the validation pool every
--eval-every steps: once on --eval-windows windows drawn from the seed (the pipeline's default),
once on every window. Recorded for each: the seconds of training steps, of held-out scores, of the
whole run, and the scores' share of it, as the run's summary line states it. Figures go to
reports/bench/evaluation.json.

    .venv/bin/python benchmarks/evaluation.py [--steps 200] [--eval-every 100] [--eval-windows 512]
"""

from __future__ import annotations

import argparse
import sysconfig
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import measure

from zrodlo import api
from zrodlo.pipeline.schedule import schedule_steps
from zrodlo.training.plan import RunPlan

# The library's own code, not the packages installed beside it nor its tests.
LEFT_OUT = ["site-packages/*", "test/*", "*/test/*", "*/tests/*", "*/idle_test/*"]


def prepared(root: Path) -> dict:
    """The standard library as documents, pools, tokenizer and train and validation corpora."""
    documents = root / "documents.jsonl"
    imported = api.import_documents(
        Path(sysconfig.get_paths()["stdlib"]), documents, include=["*.py"], exclude=LEFT_OUT,
        skip_empty=True, skip_undecodable=True,
    )  # fmt: skip
    api.assign(documents, root / "splits.json", validation=0.1, test=0.1)
    api.split(documents, root / "splits.json", root / "pools")
    api.fit_tokenizer(root / "pools/train.jsonl", root / "tokenizer")
    (root / "corpus").mkdir()
    data = {"tokenizer": root / "tokenizer", "documents": imported.documents}
    for pool in ("train", "validation"):
        data[pool] = root / "corpus" / pool
        manifest = api.prepare(root / f"pools/{pool}.jsonl", data["tokenizer"], data[pool])
        data[f"{pool}_characters"] = manifest["characters"]
    return data


def timed_run(data: dict, root: Path, name: str, plan: dict, train: dict) -> dict:
    """One run; the seconds of its steps, its held-out scores and the whole."""
    records = []

    @contextmanager
    def progress(done: int, total: int):
        yield records.append

    started = time.perf_counter()
    api.train(
        root / "model", data["train"], root / name, eval_corpus=data["validation"],
        device=train["device"], threads=train["threads"], progress=progress, **plan,
    )  # fmt: skip
    wall = time.perf_counter() - started
    scoring = sum(record.eval_seconds or 0.0 for record in records)
    return {
        "steps_seconds": round(sum(record.seconds for record in records), 2),
        "scoring_seconds": round(scoring, 2),
        "wall_seconds": round(wall, 2),
        "scoring_share": round(scoring / wall, 4),
        "scores": sum(record.eval_loss is not None for record in records),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--eval-every", type=int, default=100)
    parser.add_argument("--eval-windows", type=int, default=512)
    args = parser.parse_args()
    params = measure.adamw_params()
    init, train = params["init"], dict(params["train"], steps=args.steps)
    plan = {key: value for key, value in train.items() if key in RunPlan.__dataclass_fields__}
    plan |= schedule_steps(train) | {"eval_every": args.eval_every, "shuffle": True}
    plan |= {"checkpoint_every": args.steps, "keep_checkpoints": 1}
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        data = prepared(root)
        api.init(
            data["tokenizer"], root / "model", preset=init["preset"], positions=init["positions"],
            dropout=init["dropout"], attention_dropout=init["attention_dropout"],
            seed=init["seed"],
        )  # fmt: skip
        runs = {
            "sampled": timed_run(
                data, root, "sampled", plan | {"eval_windows": args.eval_windows}, train
            ),
            "whole": timed_run(data, root, "whole", plan | {"eval_windows": None}, train),
        }
    report = {
        "benchmark": "held-out scores' share of a run's wall time, sampled windows against whole",
        "corpus": {
            key: data[key] for key in ("documents", "train_characters", "validation_characters")
        },
        "steps": args.steps,
        "eval_every": args.eval_every,
        "eval_windows": args.eval_windows,
        "runs": runs,
        "machine": measure.machine(),
    }
    measure.write_report(measure.REPORTS / "evaluation.json", report)


if __name__ == "__main__":
    main()

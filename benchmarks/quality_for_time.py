"""Quality for time on the default documents: validation bits per byte against seconds of
training, for GPT-2's decoder and llama's, on characters and on a byte-level BPE, each at the best
learning rate of a small sweep, within equal wall-time budgets on this machine.

The default documents are split as the pipeline splits them; each tokenizer is fitted on the
training pool and both pools prepared. A run takes params.yaml's init and train sections in the
AdamW recipe (measure.adamw_params: the `small` preset; llama with half as many key and value heads
as query heads), its steps chosen so that its schedule ends at the budget: a 10-step probe gives
the seconds a step takes, and the run is the budget over that. Every run scores params.yaml's
train.eval_windows validation windows, drawn once from its seed, about ten times; bits per byte are
over the text those windows hold, the same text measure for every tokenizer. Recorded per budget
and configuration: every learning rate's final bits per byte and curve, and the best. Figures go to
reports/bench/quality_for_time.json, the chart of the longest budget's best runs to
reports/bench/quality_for_time.png.

    .venv/bin/python benchmarks/quality_for_time.py [--minutes 2 4]
        [--learning-rates 0.002 0.004 0.008] [--vocab-size 1024]

Four minutes is about what the pipeline's train stage spent before this run chose its default
(GPT-2 on characters, 214 s of steps): the README's table and chart, and that choice, come from it.
"""

from __future__ import annotations

import argparse
import tempfile
from contextlib import contextmanager
from pathlib import Path

import measure

from zrodlo import api
from zrodlo.pipeline.schedule import schedule_steps
from zrodlo.training.plan import RunPlan

CONFIGURATIONS = {
    "char gpt": ({}, "gpt"),
    "char llama": ({}, "llama"),
    "bpe gpt": ({"kind": "bpe"}, "gpt"),
    "bpe llama": ({"kind": "bpe"}, "llama"),
}


def prepared(root: Path, name: str, fit: dict) -> Path:
    folder = root / name
    folder.mkdir()
    api.fit_tokenizer(root / "pools/train.jsonl", folder / "tokenizer", **fit)
    for pool in ("train", "validation"):
        api.prepare(root / f"pools/{pool}.jsonl", folder / "tokenizer", folder / pool)
    return folder


def trained(folder: Path, architecture: str, params: dict, steps: int, rate: float, name: str):
    """One run of `steps` at learning rate `rate`; its step records."""
    init, train = params["init"], dict(params["train"], steps=steps, learning_rate=rate)
    model = folder / f"model-{architecture}"
    if not model.exists():
        llama = {"architecture": "llama", "kv_heads": 2} if architecture == "llama" else {}
        api.init(
            folder / "tokenizer", model, preset=init["preset"], positions=init["positions"],
            dropout=init["dropout"], attention_dropout=init["attention_dropout"],
            seed=init["seed"], **llama,
        )  # fmt: skip
    plan = {key: value for key, value in train.items() if key in RunPlan.__dataclass_fields__}
    plan |= schedule_steps(train) | {"eval_every": max(1, steps // 10), "shuffle": True}
    plan |= {"checkpoint_every": steps, "keep_checkpoints": 1}
    records = []

    @contextmanager
    def progress(done: int, total: int):
        yield records.append

    api.train(
        model, folder / "train", folder / name, eval_corpus=folder / "validation",
        device=train["device"], threads=train["threads"], progress=progress, **plan,
    )  # fmt: skip
    return records


def curve(records) -> list[tuple[float, float]]:
    """(seconds of training steps, validation bits per byte) at each score."""
    seconds, points = 0.0, []
    for record in records:
        seconds += record.seconds + (record.eval_seconds or 0.0)
        if record.eval_bits_per_byte is not None:
            points.append((round(seconds, 1), round(record.eval_bits_per_byte, 4)))
    return points


def chart(results: dict, minutes: float) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    figure, axes = pyplot.subplots(figsize=(8, 5), dpi=100)
    for name, entry in results.items():
        points = entry["runs"][str(entry["best_learning_rate"])]["curve"]
        axes.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=name)
    axes.set_xlabel("seconds of training (steps and held-out scores)")
    axes.set_ylabel("validation bits per byte")
    axes.set_title(f"Quality for time: {minutes:g} minutes, best learning rate of each")
    axes.legend()
    figure.tight_layout()
    figure.savefig(measure.REPORTS / "quality_for_time.png", metadata={"Software": None})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, nargs="+", default=[2, 4])
    parser.add_argument("--learning-rates", type=float, nargs="+", default=[2e-3, 4e-3, 8e-3])
    parser.add_argument("--vocab-size", type=int, default=1024)
    args = parser.parse_args()
    params = measure.adamw_params()
    budgets = {}
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        api.torch_docs(root / "documents.jsonl")
        api.assign(root / "documents.jsonl", root / "splits.json", validation=0.1, test=0.1)
        api.split(root / "documents.jsonl", root / "splits.json", root / "pools")
        folders = {}
        for fit, _ in CONFIGURATIONS.values():
            kind = fit.get("kind", "char")
            if kind not in folders:
                extra = {"vocab_size": args.vocab_size} if fit else {}
                folders[kind] = prepared(root, kind, fit | extra)
        per_step = {}
        for name, (fit, architecture) in CONFIGURATIONS.items():
            folder = folders[fit.get("kind", "char")]
            probe = trained(folder, architecture, params, 10, 2e-3, f"probe-{architecture}")
            per_step[name] = sum(r.seconds for r in probe[2:]) / len(probe[2:])  # warm steps
        for minutes in args.minutes:
            results = {}
            for name, (fit, architecture) in CONFIGURATIONS.items():
                folder = folders[fit.get("kind", "char")]
                steps = max(20, int(minutes * 60 / per_step[name] * 0.9))  # 10% for the scores
                runs = {}
                for rate in args.learning_rates:
                    run_name = f"run-{architecture}-{minutes}-{rate}"
                    points = curve(trained(folder, architecture, params, steps, rate, run_name))
                    runs[str(rate)] = {"final_bits_per_byte": points[-1][1], "curve": points}
                best = min(runs, key=lambda rate: runs[rate]["final_bits_per_byte"])
                results[name] = {
                    "seconds_per_step": round(per_step[name], 4),
                    "steps": steps,
                    "best_learning_rate": float(best),
                    "best_bits_per_byte": runs[best]["final_bits_per_byte"],
                    "runs": runs,
                }
            budgets[f"{minutes:g} minutes"] = results
    chart(budgets[f"{max(args.minutes):g} minutes"], max(args.minutes))
    report = {
        "benchmark": "validation bits per byte for the minutes spent: gpt and llama, characters and BPE",
        "learning_rates": args.learning_rates,
        "vocab_size": args.vocab_size,
        "budgets": budgets,
        "machine": measure.machine(),
    }
    measure.write_report(measure.REPORTS / "quality_for_time.json", report)


if __name__ == "__main__":
    main()

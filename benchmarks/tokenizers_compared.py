"""Characters against byte-level BPE on the default data: docs/tokenizers.md's table.

The default documents are split as the pipeline splits them; for each tokenizer (characters, and
BPE at each of --vocab-sizes) the training pool is fitted and both pools prepared, and GPT-2's
decoder (params.yaml's init section) is trained for --steps with its train section in the AdamW
recipe (measure.adamw_params; the schedule's shares of --steps) at --learning-rate, scoring the
whole validation pool every --eval-every steps. Each score's bits per byte are its loss times the
validation targets over the bytes of their text (`zrodlo.data.text_size`), the same text for every
tokenizer. Recorded per tokenizer: the validation bits per byte at the last step (equal steps) and
at the last score within the wall time of the fastest run (equal time), tokens trained a second,
and the UTF-8 bytes of training text they hold (tokens a second times the training pool's bytes per
token). Figures go to reports/bench/tokenizers.json; docs/tokenizers.md's table is written from
them (tests/test_readme.py).

    .venv/bin/python benchmarks/tokenizers_compared.py [--steps 300] [--vocab-sizes 512 1024 4096]
        [--learning-rate 0.002]
"""

from __future__ import annotations

import argparse
import math
import tempfile
from contextlib import contextmanager
from pathlib import Path

import measure
import numpy as np

from zrodlo import api
from zrodlo.data.corpus import Corpus
from zrodlo.data.documents import read_documents
from zrodlo.data.text_size import scored_text
from zrodlo.data.tokenizer import load_tokenizer
from zrodlo.data.windows import build_windows
from zrodlo.pipeline.schedule import schedule_steps
from zrodlo.training.plan import RunPlan


def run(name: str, fit: dict, root: Path, args, params: dict) -> dict:
    """Fit, prepare, initialise and train one tokenizer's run; its figures."""
    init = params["init"]
    train = dict(params["train"], steps=args.steps, learning_rate=args.learning_rate)
    folder = root / name
    folder.mkdir()
    api.fit_tokenizer(root / "pools/train.jsonl", folder / "tokenizer", **fit)
    manifests = {}
    for pool in ("train", "validation"):
        manifests[pool] = api.prepare(
            root / f"pools/{pool}.jsonl", folder / "tokenizer", folder / pool
        )
    api.init(
        folder / "tokenizer", folder / "model", preset=init["preset"],
        positions=init["positions"], dropout=init["dropout"],
        attention_dropout=init["attention_dropout"], seed=init["seed"],
    )  # fmt: skip
    plan = {key: value for key, value in train.items() if key in RunPlan.__dataclass_fields__}
    plan |= schedule_steps(train) | {"eval_every": args.eval_every, "eval_windows": None}
    plan |= {"checkpoint_every": args.steps, "keep_checkpoints": 1, "shuffle": True}
    records = []

    @contextmanager
    def progress(done: int, total: int):
        yield records.append

    api.train(
        folder / "model", folder / "train", folder / "run", eval_corpus=folder / "validation",
        device=train["device"], threads=train["threads"], progress=progress, **plan,
    )  # fmt: skip
    validation = Corpus.open(folder / "validation")
    table = build_windows(validation.offsets, train["context"])
    windows = np.arange(len(table), dtype=np.int64)
    tokenizer = load_tokenizer(folder / "tokenizer")
    text_bytes, _ = scored_text(validation.tokens, table, windows, tokenizer)
    to_bits = manifests["validation"]["targets"] / text_bytes / math.log(2)
    trained, scores = 0.0, []
    for record in records:
        trained += record.seconds
        if record.eval_loss is not None:
            scores.append((round(trained, 2), record.eval_loss * to_bits))
    steps_seconds = sum(record.seconds for record in records)
    train_bytes = sum(len(d.text.encode()) for d in read_documents(root / "pools/train.jsonl"))
    bytes_per_token = train_bytes / manifests["train"]["tokens"]
    return {
        "vocab_size": load_tokenizer(folder / "tokenizer").vocab_size,
        "training_tokens": manifests["train"]["tokens"],
        "bytes_per_token": round(bytes_per_token, 3),
        "steps_seconds": round(steps_seconds, 1),
        "tokens_per_second": round(sum(r.targets for r in records) / steps_seconds),
        "scores": scores,  # (training seconds, validation bits per byte) at each score
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--eval-every", type=int, default=50)
    parser.add_argument("--vocab-sizes", type=int, nargs="+", default=[512, 1024, 4096])
    # The rate docs/tokenizers.md's table was measured at, the pipeline's before it trained llama.
    parser.add_argument("--learning-rate", type=float, default=0.002)
    args = parser.parse_args()
    params = measure.adamw_params()
    kinds = {"char": {}} | {f"bpe {n}": {"kind": "bpe", "vocab_size": n} for n in args.vocab_sizes}
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        api.torch_docs(root / "documents.jsonl")
        api.assign(root / "documents.jsonl", root / "splits.json", validation=0.1, test=0.1)
        api.split(root / "documents.jsonl", root / "splits.json", root / "pools")
        runs = {name: run(name, fit, root, args, params) for name, fit in kinds.items()}
    equal_time = min(entry["steps_seconds"] for entry in runs.values())
    for entry in runs.values():
        entry["bits_per_byte_at_equal_steps"] = round(entry["scores"][-1][1], 4)
        within = [bits for seconds, bits in entry["scores"] if seconds <= equal_time + 1e-9]
        entry["bits_per_byte_at_equal_time"] = round(within[-1], 4) if within else None
        entry["bytes_per_second"] = round(entry["tokens_per_second"] * entry["bytes_per_token"])
    report = {
        "benchmark": "characters against byte-level BPE on the default data, validation bits per byte",
        "steps": args.steps,
        "eval_every": args.eval_every,
        "equal_time_seconds": equal_time,
        "runs": runs,
        "machine": measure.machine(),
    }
    measure.write_report(measure.REPORTS / "tokenizers.json", report)


if __name__ == "__main__":
    main()

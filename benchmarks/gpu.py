"""Every check and measurement of the CUDA path, in one script for a machine with a GPU (about five
minutes on one data-centre GPU). Figures go to reports/bench/gpu.json.

1. Masks: every keep-mask of a medium step drawn on the GPU (one compiled kernel a mask) equals
   the CPU's bits; the time of a step's masks, compiled against op by op.
2. Init: the default model's weights on the GPU equal the CPU's, bit for bit.
3. Determinism, with dropout and attention dropout on, in f32 and in bf16: `zrodlo model train`
   twice gives byte-identical checkpoints, and `zrodlo checkpoint resume` from the middle gives
   the uninterrupted run's last checkpoint byte for byte.
4. bf16 trains: the default pipeline's model and data, trained as long in f32 and in bf16; the
   validation losses agree within 2%.
5. Throughput: tokens/s of zrodlo's Trainer against a plain PyTorch loop of the same model on the
   same GPU (torch's dropout, cross-entropy, AdamW; bf16 by autocast), small and medium, f32 and
   bf16, dropout on and off; model FLOPs utilisation (6 x parameters x tokens/s over the GPU's
   peak). Targets: 0.95 of the plain loop with dropout on; MFU 30% at the medium size in bf16.

    .venv/bin/python benchmarks/gpu.py [--ordinal 0] [--peak-tflops-bf16 N] [--peak-tflops-f32 N]

It runs the CPU stages of the pipeline first (`dvc repro init`) where their outputs are missing.
Without CUDA it says so and exits with status 2.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

import measure
import numpy as np
import torch
from dropout import mask_shapes, rate
from reference import TorchGPT
from train import PlainLoop

from zrodlo.data.corpus import Corpus
from zrodlo.model.config import ModelConfig
from zrodlo.model.decoder import build_decoder
from zrodlo.model.device import make_deterministic
from zrodlo.model.directory import Model
from zrodlo.model.dropout import StepMasks
from zrodlo.model.parts import parameter_count
from zrodlo.model.weights import initial_weights
from zrodlo.training.checkpoint import read_model
from zrodlo.training.plan import RunPlan
from zrodlo.training.score import check_data
from zrodlo.training.step import Trainer

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
SIZES = {
    "small": {"d_model": 128, "layers": 4, "heads": 4, "d_ff": 512, "context": 129, "batch": 32},
    "medium": {"d_model": 256, "layers": 6, "heads": 8, "d_ff": 1024, "context": 257, "batch": 64},
}
# Dense peaks of the GPU's datasheet, TFLOP/s, bf16 tensor cores and plain f32 (Zrodlo computes
# f32 products in f32, not TF32). A GPU not listed needs --peak-tflops-*.
PEAKS = {"H200": (989.0, 67.0), "H100": (989.0, 67.0), "A100": (312.0, 19.5)}
SEED = 20240229
STEPS = 40  # of each determinism run; resumed from the middle


# The AdamW recipe's optimizer and schedule (measure.ADAMW_TRAIN), for a run of `steps` steps.
def schedule(steps: int) -> list[object]:
    warmup = steps // 10
    return ["--learning-rate", 0.002, "--beta1", 0.9, "--beta2", 0.99, "--epsilon", 1e-8,
            "--weight-decay", 0.1, "--decay-scope", "matrices", "--warmup-steps", warmup,
            "--stable-steps", steps // 2 - warmup, "--decay-steps", steps - steps // 2,
            "--decay-shape", "cosine", "--min-learning-rate", 0.0002,
            "--clip-norm", 1.0]  # fmt: skip


TRAIN_STEPS = 300  # of each run of the bf16 check


def zrodlo(*args: object, cwd: Path = ROOT) -> str:
    done = subprocess.run(
        [BIN / "zrodlo", *map(str, args)], cwd=cwd, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise SystemExit(f"zrodlo {' '.join(map(str, args))} failed:\n{done.stderr}")
    return done.stdout


def pipeline_inputs() -> None:
    """The default pipeline's tokenizer, corpora and initial model, built on the CPU if missing."""
    needed = [ROOT / "model", ROOT / "corpus/train", ROOT / "corpus/validation"]
    if not all(path.exists() for path in needed):
        env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}"}
        subprocess.run([BIN / "dvc", "repro", "init"], cwd=ROOT, env=env, check=True)
        for split in ("train", "validation"):
            subprocess.run(
                [BIN / "dvc", "repro", f"prepare@{split}"], cwd=ROOT, env=env, check=True
            )


def check_masks(device: torch.device) -> dict:
    config = ModelConfig(vocab_size=100, positions=256, d_model=256, layers=6, heads=8, d_ff=1024,
                         dropout=0.1, attention_dropout=0.1)  # fmt: skip
    masks, cpu = StepMasks(seed=SEED, step=5), torch.device("cpu")
    shapes = mask_shapes(config, 16, 256)
    equal = True

    def draw(fused: bool) -> list[torch.Tensor]:
        drawn = []
        for layer, site, shape in shapes:
            count = int(np.prod(shape))
            stream, p = masks.stream(layer, site), rate(config, site)
            drawn.append(masks._keep_mask_on_device(stream, 0, count, p, device, fused))
        torch.cuda.synchronize(device)
        return drawn

    started = time.perf_counter()
    fused = draw(True)
    compile_s = time.perf_counter() - started
    for (layer, site, shape), mask in zip(shapes, fused, strict=True):
        count = int(np.prod(shape))
        expected = masks.keep_mask_tensor(
            masks.stream(layer, site), 0, count, rate(config, site), cpu
        )
        equal &= torch.equal(mask.cpu(), expected)
    variants = {
        "fused_kernel": lambda: measure.timed(lambda: draw(True)),
        "op_by_op": lambda: measure.timed(lambda: draw(False)),
    }
    measure.interleave(variants, 1)
    samples = measure.interleave(variants, 9)
    return {
        "masks": len(shapes),
        "elements": sum(int(np.prod(s)) for _, _, s in shapes),
        "equal_to_cpu": bool(equal),
        "first_call_with_compile_s": round(compile_s, 2),
        "step_masks_s": {k: measure.summary(v) for k, v in samples.items()},
        "op_by_op_over_fused": measure.ratios(samples["op_by_op"], samples["fused_kernel"]),
    }


def check_init(device: torch.device) -> dict:
    model = read_model(ROOT / "model")
    on_gpu = build_decoder(model.config, model.weights, device)
    same = all(
        torch.equal(p.detach().cpu(), model.weights[name]) for name, p in on_gpu.named_parameters()
    )
    return {"weights_equal_to_cpu": same}


def same_files(a: Path, b: Path) -> bool:
    names = ("model.safetensors", "optimizer.safetensors")
    return all((a / n).read_bytes() == (b / n).read_bytes() for n in names)


def check_determinism(work: Path, ordinal: int) -> dict:
    """Two runs and a resume from the middle, f32 and bf16, dropout and attention dropout on."""
    model = work / "dropping"
    zrodlo("model", "init", "--tokenizer", ROOT / "tokenizer", "--output", model, "--layers", 2,
           "--heads", 4, "--d-model", 128, "--d-ff", 512, "--positions", 128, "--dropout", 0.1,
           "--attention-dropout", 0.1, "--seed", 3)  # fmt: skip
    result = {}
    for precision in ("f32", "bf16"):
        common = ["--corpus", ROOT / "corpus/train", "--device", "cuda", "--ordinal", ordinal]
        runs = []
        for index in range(2):
            run = work / f"{precision}-{index}"
            zrodlo("model", "train", "--model", model, *common, "--output", run, "--shuffle",
                   "--steps", STEPS, *schedule(STEPS), "--context", 129, "--batch-size", 32, "--seed", 1,
                   "--precision", precision, "--checkpoint-every", STEPS // 2,
                   "--keep-checkpoints", 2)  # fmt: skip
            runs.append(run)
        resumed = work / f"{precision}-resumed"
        zrodlo("checkpoint", "resume", "--checkpoint", runs[0] / f"step-{STEPS // 2}", *common,
               "--output", resumed, "--steps", STEPS)  # fmt: skip
        last = f"step-{STEPS}"
        result[precision] = {
            "two_runs_byte_identical": same_files(runs[0] / last, runs[1] / last),
            "resume_equals_uninterrupted": same_files(runs[0] / last, resumed / last),
        }
    return result


def check_bf16_trains(work: Path, ordinal: int) -> dict:
    losses = {}
    for precision in ("f32", "bf16"):
        run = work / f"train-{precision}"
        zrodlo("model", "train", "--model", ROOT / "model", "--corpus", ROOT / "corpus/train",
               "--output", run, "--shuffle", "--steps", TRAIN_STEPS, *schedule(TRAIN_STEPS),
               "--context", 129, "--batch-size", 32, "--seed", 1,
               "--precision", precision, "--device", "cuda", "--ordinal", ordinal,
               "--checkpoint-every", TRAIN_STEPS)  # fmt: skip
        report = work / f"metrics-{precision}.json"
        zrodlo("model", "evaluate", "--model", run / f"step-{TRAIN_STEPS}", "--corpus",
               ROOT / "corpus/validation", "--output", report, "--context", 129,
               "--device", "cuda", "--ordinal", ordinal)  # fmt: skip
        losses[precision] = json.loads(report.read_text())["corpora"]["validation"]["loss"]
    relative = abs(losses["bf16"] - losses["f32"]) / losses["f32"]
    return {"steps": TRAIN_STEPS, "validation_loss": losses, "relative_difference": relative,
            "within_2_percent": relative <= 0.02}  # fmt: skip


def throughput(size_name: str, precision: str, dropout: float, device: torch.device,
               peak_tflops: float) -> dict:  # fmt: skip
    size = SIZES[size_name]
    corpus = Corpus.open(ROOT / "corpus/train")
    tokenizer = read_model(ROOT / "model").tokenizer
    config = ModelConfig(vocab_size=tokenizer.vocab_size, positions=size["context"] - 1,
                         d_model=size["d_model"], layers=size["layers"], heads=size["heads"],
                         d_ff=size["d_ff"], dropout=dropout, attention_dropout=0.0)  # fmt: skip
    model = Model(Path(size_name), config, tokenizer, initial_weights(config, SEED))
    plan = RunPlan(steps=10**6, context=size["context"], batch_size=size["batch"],
                   decay_scope="all", seed=SEED, precision=precision, shuffle=True,
                   learning_rate=1e-3, beta1=0.9, beta2=0.999, epsilon=1e-8,
                   weight_decay=0.01)  # fmt: skip
    trainer = Trainer.start(plan, model, corpus.tokens, check_data(corpus, model, size["context"]),
                            device)  # fmt: skip
    reference = TorchGPT.from_gpt(build_decoder(config, model.weights)).to(device)
    plain = PlainLoop(reference, corpus.tokens, {**size, "context": size["context"]})
    plain.tokens, plain.offsets = plain.tokens.to(device), plain.offsets.to(device)
    autocast = torch.autocast(device.type, torch.bfloat16, enabled=precision == "bf16")
    steps = iter(range(10**6))

    def zrodlo_step() -> float:
        return measure.timed(lambda: trainer.step(next(steps)))

    def plain_step() -> float:
        def one() -> None:
            with autocast:
                plain.step()
            if device.type == "cuda":
                torch.cuda.synchronize(device)

        return measure.timed(one)

    variants = {"zrodlo": zrodlo_step, "plain_pytorch": plain_step}
    measure.interleave(variants, 3)  # warm-up, compiles
    samples = measure.interleave(variants, 15)
    tokens = size["batch"] * (size["context"] - 1)
    parameters = parameter_count(config)
    rates = {k: tokens / statistics.median(v) for k, v in samples.items()}
    return {
        "tokens_per_second": {k: round(v) for k, v in rates.items()},
        "zrodlo_over_plain": measure.ratios(samples["plain_pytorch"], samples["zrodlo"]),
        "mfu": {k: round(6 * parameters * v / (peak_tflops * 1e12), 4) for k, v in rates.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ordinal", type=int, default=0)
    parser.add_argument("--peak-tflops-bf16", type=float)
    parser.add_argument("--peak-tflops-f32", type=float)
    parser.add_argument("--output", type=Path, default=measure.REPORTS / "gpu.json")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("benchmarks/gpu.py needs a CUDA GPU, and torch sees none", file=sys.stderr)
        raise SystemExit(2)
    make_deterministic()
    device = torch.device("cuda", args.ordinal)
    name = torch.cuda.get_device_name(device)
    listed = next((peaks for key, peaks in PEAKS.items() if key in name), (None, None))
    peaks = {"bf16": args.peak_tflops_bf16 or listed[0], "f32": args.peak_tflops_f32 or listed[1]}
    if None in peaks.values():
        raise SystemExit(f"{name} has no listed peak; give --peak-tflops-bf16 and -f32")
    started = time.perf_counter()
    pipeline_inputs()
    work = Path(tempfile.mkdtemp(prefix="zrodlo-gpu-"))
    result = {"gpu": name, "cuda": torch.version.cuda, "peak_tflops": peaks}
    sections = {
        "masks": lambda: check_masks(device),
        "init": lambda: check_init(device),
        "determinism": lambda: check_determinism(work, args.ordinal),
        "bf16_trains": lambda: check_bf16_trains(work, args.ordinal),
        **{
            f"throughput/{size}-{precision}-dropout-{dropout}": (
                lambda size=size, precision=precision, dropout=dropout: throughput(
                    size, precision, dropout, device, peaks[precision]
                )
            )
            for size in SIZES
            for precision in ("f32", "bf16")
            for dropout in (0.1, 0.0)
        },
    }
    try:
        for section, run in sections.items():
            # Each section on its own: one that fails is recorded and the rest still run, and
            # the report is rewritten after each, so a run cut short keeps what it measured.
            try:
                result[section] = run()
            except Exception:
                result[section] = {"error": traceback.format_exc()}
            result["seconds"] = round(time.perf_counter() - started, 1)
            measure.write_report(args.output, {**result, "machine": measure.machine()})
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

"""How the benchmarks time and record: interleaved repetitions, medians, and the machine's facts.

Compared variants are timed side by side in one process, one repetition of each in turn (A B A B
...), so that load from other processes on a shared machine falls on all of them alike; figures are
medians, and ratios are taken both of the medians and, pair by pair, of each repetition.
Not a script: the benchmarks next to it import it.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
import yaml

ROOT = Path(__file__).resolve().parent.parent
REPORTS = ROOT / "reports/bench"
# The default recipe until recipes.py measured Muon's ahead of it: llama's decoder with SwiGLU and
# scaled norms, AdamW on every weight at one rate, cosine decay. The benchmarks that compare other
# things (sizes, tokenizers, precision, evaluation) and the recipes' ablation keep it, so that
# their figures stay the ones this code produces.
ADAMW_INIT = {"architecture": "llama", "norm": None, "projection_init": None, "head_std": None}
ADAMW_TRAIN = {"optimizer": "adamw", "learning_rate": 0.004, "embedding_rate": None,
               "head_rate": None, "vector_rate": None, "decay": 0.5, "decay_shape": "cosine",
               "min_learning_rate": 0.0002}  # fmt: skip


def adamw_params() -> dict:
    """params.yaml with the AdamW recipe in its init and train sections."""
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["init"] |= ADAMW_INIT
    params["train"] |= ADAMW_TRAIN
    return params


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine() -> dict:
    """What the figures depend on besides the code: interpreter, libraries, processor, load."""
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": np.__version__,
        "platform": platform.platform(),
        "processor": platform.machine(),
        "cpu_model": _cpu_model(),
        "cpus": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "load_average_1_5_15": [round(x, 2) for x in os.getloadavg()],
    }


def timed(action: Callable[[], object]) -> float:
    """Seconds one call of `action` takes."""
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def interleave(variants: dict[str, Callable[[], float]], repeats: int) -> dict[str, list[float]]:
    """Run each variant once per repetition, in turn; each returns the seconds it measured itself,
    so that its own setup and clean-up stay outside the figure."""
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(repeats):
        for name, run in variants.items():
            samples[name].append(run())
    return samples


def summary(samples: list[float]) -> dict:
    return {
        "median_s": round(statistics.median(samples), 6),
        "min_s": round(min(samples), 6),
        "max_s": round(max(samples), 6),
        "samples_s": [round(s, 6) for s in samples],
    }


def ratios(numerator: list[float], denominator: list[float]) -> dict:
    """numerator / denominator: of the medians, and the median of the per-repetition ratios."""
    return {
        "of_medians": round(statistics.median(numerator) / statistics.median(denominator), 4),
        "median_paired": round(
            statistics.median(a / b for a, b in zip(numerator, denominator, strict=True)), 4
        ),
    }


def write_report(path: Path, result: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


def peak_of(command: list[str]) -> tuple[int, str]:
    """Peak resident bytes of a process running `command`, and what it printed."""
    child = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    printed = child.stdout.read()
    _, status, usage = os.wait4(child.pid, 0)
    if status != 0:
        raise SystemExit(f"{command[:3]} failed with status {status}")
    return usage.ru_maxrss * 1024, printed  # kilobytes on Linux

"""What a run's bits depend on besides its plan and data: the software, the processor and the
vector kernels torch picked for it, the thread count, the GPU and its libraries. trainer.json records
them; a resume takes on the recorded thread count and says plainly what else differs.
"""

from __future__ import annotations

import platform
from pathlib import Path

import torch

from zrodlo.model.device import describe
from zrodlo.training.record import recorded_threads


class EnvironmentWarning(UserWarning):
    """A resume on another torch version or machine: it runs, without the promise of
    bit-equality."""


def environment(device: torch.device, processes: int = 1) -> dict:
    """What bit-equality of a continued run depends on besides the plan and the data (the
    software, the processor and the vector kernels torch picked for it, the thread count, the
    GPU and its libraries), and how many processes computed it, which it does not depend on."""
    recorded = {
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "processes": processes,
        "device": describe(device),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "processor": processor(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
    }
    if device.type == "cuda":
        recorded["gpu"] = torch.cuda.get_device_name(device)
        recorded["cuda"] = torch.version.cuda
        recorded["cudnn"] = torch.backends.cudnn.version()
    return recorded


def processor() -> str:
    """The processor's model as the operating system names it: two models may round the same
    matrix product differently, as their math libraries pick other kernels for them."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return platform.processor() or platform.machine()
    fields = dict(line.split(":", 1) for line in lines if ":" in line)
    fields = {key.strip(): value.strip() for key, value in fields.items()}
    name = fields.get("model name") or fields.get("Model") or platform.machine()
    if "cpu family" in fields and "model" in fields:
        return f"{name} (family {fields['cpu family']}, model {fields['model']})"
    return name


# What else a continued run's bits depend on, with the words a warning names it by. A record
# without one of them (written before it was recorded) is not warned about.
WATCHED = {
    "processor": "processor",
    "cpu_capability": "CPU kernels",
    "gpu": "GPU",
    "cuda": "CUDA",
    "cudnn": "cuDNN",
}


def match_environment(checkpoint: Path, recorded: dict, device: torch.device) -> list[str]:
    """Take on the checkpoint's thread count; return warnings for what else breaks bit-equality.

    Matrix products split their sums by thread, so the thread count is set back to the recorded
    one; another torch version, processor, set of CPU kernels, GPU or GPU library cannot be set
    back and is said plainly instead, in one warning.
    """
    threads = recorded_threads(checkpoint, recorded)
    if threads != torch.get_num_threads():
        torch.set_num_threads(threads)
    current = environment(device)
    differences = [
        f"{words} {recorded[key]} and this is {current.get(key)}"
        for key, words in WATCHED.items()
        if key in recorded and recorded[key] != current.get(key)
    ]
    if recorded.get("torch") != torch.__version__:
        differences.insert(
            0, f"torch {recorded.get('torch')} and this is torch {torch.__version__}"
        )
    if not differences:
        return []
    return [
        f"{checkpoint} was written with {'; with '.join(differences)}; the run continues, but "
        "equality with the uninterrupted run is promised only with the same torch version, "
        "processor, thread count and device"
    ]

"""The device a run computes on: the --device and --ordinal rules, whether this machine has it, how
much memory it holds, and the settings that make CUDA compute the same bits every time.

`metal` is PyTorch's MPS backend. bf16 needs a GPU: the CPU backend is refused before anything runs.
"""

from __future__ import annotations

import os

import torch

from zrodlo.model.config import machine_memory
from zrodlo.storage.refusal import Refusal

DEVICES = ("cpu", "metal", "cuda")


def check_device(device: str, ordinal: int | None, precision: str) -> None:
    """Refuse an unknown device, a missing or misplaced --ordinal, and bf16 on the CPU."""
    if device not in DEVICES:
        raise Refusal(
            f"invalid value '{device}' for '--device <DEVICE>' [possible values: cpu, metal, cuda]"
        )
    if device != "cpu" and ordinal is None:
        raise Refusal(f"--device {device} needs --ordinal, the card to train on")
    if device == "cpu" and ordinal is not None:
        raise Refusal("--ordinal names a GPU; the cpu device takes none")
    if ordinal is not None and ordinal < 0:
        raise Refusal(f"--ordinal is {ordinal}; it counts GPUs from 0")
    if device == "cpu" and precision == "bf16":
        raise Refusal(
            "--precision bf16 needs a GPU: the CPU backend has no bfloat16 matrix product; run "
            "with --device metal or --device cuda and --ordinal, or with --precision f32"
        )


def resolve_device(
    device: str, ordinal: int | None, precision: str, local_rank: int = 0
) -> torch.device:
    """The torch device for checked flags, or a refusal naming what this machine lacks.

    The processes of a data-parallel run on one machine take one GPU each: the one `local_rank`
    places after --ordinal."""
    check_device(device, ordinal, precision)
    if device == "cpu":
        return torch.device("cpu")
    if device == "cuda":
        if not torch.backends.cuda.is_built():
            raise Refusal(
                f"--device cuda needs PyTorch built with CUDA, and this PyTorch "
                f"{torch.__version__} is not; install a CUDA build or run with --device cpu"
            )
        count = torch.cuda.device_count()
        if ordinal >= count:
            raise Refusal(
                f"--ordinal {ordinal} names a CUDA device this machine does not have; "
                f"PyTorch sees {count}"
            )
        if ordinal + local_rank >= count:
            raise Refusal(
                f"process {local_rank} of this machine takes CUDA device {ordinal + local_rank} "
                f"(--ordinal {ordinal} and one GPU a process), and PyTorch sees {count}"
            )
        make_deterministic()
        return torch.device("cuda", ordinal + local_rank)
    if not torch.backends.mps.is_built() or not torch.backends.mps.is_available():
        raise Refusal(
            "--device metal needs an Apple GPU and PyTorch built with MPS, and this machine "
            "has none; run with --device cpu"
        )
    if ordinal != 0:
        raise Refusal(f"--ordinal {ordinal} names a Metal device; PyTorch reaches only 0")
    return torch.device("mps")


# cuBLAS reduces in a fixed order only with a workspace of one of these shapes (CUDA's own notes
# on reproducibility); the variable must be set before the first cuBLAS call of the process.
DETERMINISTIC_WORKSPACES = (":4096:8", ":16:8")


def make_deterministic() -> None:
    """Set what a CUDA run needs to give the same bits every time, before its first kernel:
    deterministic algorithms, strictly (an operation with none refuses rather than warns; in this
    mode torch's flash and memory-efficient attention take their deterministic backward and its
    cuDNN attention is not chosen), cuDNN without autotuning, a fixed cuBLAS workspace, and float32
    matrix products in float32 rather than TF32."""
    if os.environ.get("CUBLAS_WORKSPACE_CONFIG") not in DETERMINISTIC_WORKSPACES:
        os.environ["CUBLAS_WORKSPACE_CONFIG"] = DETERMINISTIC_WORKSPACES[0]
    torch.use_deterministic_algorithms(True, warn_only=False)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    torch.set_float32_matmul_precision("highest")


def describe(device: torch.device) -> str:
    """The device as trainer.json records it, with the GPU's name where there is one."""
    if device.type == "cuda":
        return f"cuda:{device.index} ({torch.cuda.get_device_name(device)})"
    return "metal" if device.type == "mps" else "cpu"


def memory_of(device: torch.device) -> int:
    """Bytes of memory a run on `device` can hold: the GPU's own on CUDA, else the machine's
    physical memory (which an Apple GPU shares)."""
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).total_memory
    return machine_memory()

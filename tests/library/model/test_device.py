"""The settings that make a CUDA run deterministic, applied in a fresh process (they are
process-wide) and read back from torch and the environment; they need no GPU to be set."""

from __future__ import annotations

import json
import subprocess
import sys

READ_BACK = """
import json, os, sys, torch
from zrodlo.model.device import make_deterministic
found = {"before": torch.are_deterministic_algorithms_enabled(), "workspaces": []}
for preset in json.loads(sys.argv[1]):
    os.environ.pop("CUBLAS_WORKSPACE_CONFIG", None)
    if preset is not None:
        os.environ["CUBLAS_WORKSPACE_CONFIG"] = preset
    make_deterministic()
    found["workspaces"].append(os.environ["CUBLAS_WORKSPACE_CONFIG"])
found.update(
    deterministic=torch.are_deterministic_algorithms_enabled(),
    warn_only=torch.is_deterministic_algorithms_warn_only_enabled(),
    cudnn_deterministic=torch.backends.cudnn.deterministic,
    cudnn_benchmark=torch.backends.cudnn.benchmark,
    matmul_precision=torch.get_float32_matmul_precision(),
)
print(json.dumps(found))
"""


def test_a_cuda_run_is_set_to_deterministic_algorithms_strictly_and_a_fixed_workspace():
    # Unset, the two workspaces of a fixed reduction order, and one of no fixed order.
    presets = [None, ":16:8", ":4096:8", ":0:0"]
    done = subprocess.run(
        [sys.executable, "-c", READ_BACK, json.dumps(presets)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(done.stdout) == {
        "before": False,
        "workspaces": [":4096:8", ":16:8", ":4096:8", ":4096:8"],
        "deterministic": True,
        "warn_only": False,
        "cudnn_deterministic": True,
        "cudnn_benchmark": False,
        "matmul_precision": "highest",
    }

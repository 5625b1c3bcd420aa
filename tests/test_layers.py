"""The package as its layers: every import of the library and the command line runs one way, from
the command line down to storage, and every module lies in a layer (what installs:
tests/test_wheel.py).

    zrodlo.stages       the command line (installed from stages/)
    zrodlo.api          one function per command
    zrodlo.pipeline     the DVC pipeline's params, checked together
    zrodlo.evaluation   scores, baseline, samples, report, charts
    zrodlo.exchange     models in transformers' files: export and import
    zrodlo.training     plan, schedule, AdamW, the step and the loop, checkpoints, run directory
    zrodlo.model        configuration, families, the network, initial weights, dropout, devices
    zrodlo.data         documents, pools, tokenizers, corpora, windows
    zrodlo.draws        ChaCha20 and every seeded draw
    zrodlo.storage      refusals, JSON with limits, digests, safetensors, outputs
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LAYERS = (
    "storage", "draws", "data", "model", "training", "exchange", "evaluation", "pipeline", "api",
    "stages",
)  # fmt: skip
FOLDERS = {"zrodlo.stages": ROOT / "stages", "zrodlo": ROOT / "src" / "zrodlo"}


def modules() -> dict[str, Path]:
    """Every module of the package by its dotted name."""
    found = {}
    for package, folder in FOLDERS.items():
        for path in sorted(folder.rglob("*.py")):
            parts = path.relative_to(folder).with_suffix("").parts
            parts = parts[:-1] if parts[-1] == "__init__" else parts
            found.setdefault(".".join((package, *parts)), path)
    return found


def layer(module: str) -> str | None:
    """The layer a module of the package belongs to; None for `zrodlo` itself."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def imports(path: Path) -> list[tuple[int, str]]:
    """The modules of the package a file imports, anywhere in it, with their lines."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
    return [(line, name) for line, name in found if name.split(".")[0] == "zrodlo"]


def test_every_module_belongs_to_a_layer():
    strays = [m for m in modules() if m != "zrodlo" and layer(m) not in LAYERS]
    assert strays == [], "each module lies in one of the layers' packages"


@pytest.mark.parametrize("module", sorted(modules()))
def test_a_module_imports_only_its_own_layer_and_those_below(module):
    own = layer(module)
    if own is None:
        return
    upward = [
        f"line {line}: {name}"
        for line, name in imports(modules()[module])
        if layer(name) is not None and LAYERS.index(layer(name)) > LAYERS.index(own)
    ]
    assert upward == [], f"{module} ({own}) imports from a layer above it"


def test_every_package_says_what_it_owns():
    for name in LAYERS:
        init = ROOT / "src" / "zrodlo" / name / "__init__.py"
        if name == "api":
            init = ROOT / "src" / "zrodlo" / f"{name}.py"
        elif name == "stages":
            init = ROOT / "stages" / "__init__.py"
        docstring = ast.get_docstring(ast.parse(init.read_text()))
        assert docstring and len(docstring.split()) >= 8, init


def test_no_module_passes_three_hundred_lines():
    long = {
        str(path.relative_to(ROOT)): count
        for path in modules().values()
        if (count := len(path.read_text().splitlines())) > 300
    }
    assert long == {}

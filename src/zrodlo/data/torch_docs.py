"""The default documents: every docstring of the modules under torch/nn/modules of the torch the
project pins, one document each, the same bytes on every Python (checked against their recorded
sha256), so that `make repro` needs no data from anywhere.
"""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import warnings
from collections.abc import Iterator
from pathlib import Path

from zrodlo.data.sources import write_documents
from zrodlo.storage.digest import file_sha256
from zrodlo.storage.inputs import read_input
from zrodlo.storage.outputs import new_file
from zrodlo.storage.refusal import Refusal

# The default documents: every docstring of the modules under torch/nn/modules of the pinned torch.
# The files are read as source, never imported, so the text is what the files hold whatever Python
# runs them (Python 3.13 strips a docstring's indentation on import; the source keeps it).
DEFAULT_TORCH = "2.13.0"
DEFAULT_PACKAGE_FOLDER = "nn/modules"
# The sha256 of the documents file they make: what `zrodlo documents torch-docs` writes with the
# pinned torch, measured when the pin was chosen, and the same with Python 3.10.13, 3.11.7, 3.12.1
# and 3.13.0 reading its files. A torch whose docstrings differ is refused.
DEFAULT_DOCUMENTS_SHA256 = "c50abfe6b52a32628e90f446815b8b26844bfccb7949cc34a7ea527d64670890"


def torch_folder() -> Path:
    """The folder of the installed torch package, found without importing it."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        raise Refusal("torch is not installed; install the package with its pinned dependencies")
    return Path(spec.submodule_search_locations[0])


def check_default_torch() -> None:
    """Refuse a torch other than the pinned one, whose docstrings would be other documents."""
    installed = importlib.metadata.version("torch")
    if installed.split("+")[0] != DEFAULT_TORCH:
        raise Refusal(
            f"torch {installed} is installed, and the default documents are the docstrings of "
            f"torch {DEFAULT_TORCH}; install torch=={DEFAULT_TORCH}, as pyproject.toml pins it"
        )


def write_default_documents(output: Path) -> int:
    """Write the default documents into `output` and check them against their recorded sha256;
    return how many there are."""
    check_default_torch()
    package = torch_folder()
    source = f"torch {DEFAULT_TORCH}'s {DEFAULT_PACKAGE_FOLDER}"
    count = write_documents(docstring_documents(package, DEFAULT_PACKAGE_FOLDER), output, source)
    written = file_sha256(output)
    if written != DEFAULT_DOCUMENTS_SHA256:
        raise Refusal(
            f"the docstrings of {package / DEFAULT_PACKAGE_FOLDER} make documents with sha256 "
            f"{written}, and the default documents have sha256 {DEFAULT_DOCUMENTS_SHA256}; that "
            f"torch is not the torch {DEFAULT_TORCH} the project pins, so install it again with "
            "make repro"
        )
    return count


def docstring_documents(package: Path, folder: str) -> Iterator[tuple[str, str]]:
    """The docstrings of every module, class and function in package/folder, one document each,
    in file order then source order; the id is the qualified name (`torch.nn.modules.linear.Linear`),
    the text the docstring with its common indentation removed."""
    seen: set[str] = set()
    for file in sorted((package / folder).rglob("*.py")):
        parts = file.relative_to(package.parent).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        with warnings.catch_warnings():  # invalid escapes in old docstrings are not our concern
            warnings.simplefilter("ignore")
            tree = ast.parse(read_input(file), filename=str(file))
        for name, text in _docstrings(tree, module):
            if name not in seen and text:
                seen.add(name)
                yield name, text


def _docstrings(node: ast.AST, name: str) -> Iterator[tuple[str, str]]:
    body = getattr(node, "body", [])
    first = body[0] if body else None
    if (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    ):
        yield name, _dedented(first.value.value)
    for child in body:
        if isinstance(child, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            yield from _docstrings(child, f"{name}.{child.name}")


def _dedented(text: str) -> str:
    """A docstring as it reads: the first line stripped, the others' common leading spaces removed,
    trailing spaces and the blank lines around it dropped."""
    lines = [line.rstrip() for line in text.expandtabs(8).split("\n")]
    rest = [line for line in lines[1:] if line]
    margin = min((len(line) - len(line.lstrip(" ")) for line in rest), default=0)
    lines = [lines[0].strip(), *(line[margin:] for line in lines[1:])]
    return "\n".join(lines).strip("\n")


def torch_docs(output: Path) -> int:
    """Write the default documents into the new file `output`, checked against their sha256;
    return how many there are."""
    with new_file(output) as partial:
        return write_default_documents(partial)

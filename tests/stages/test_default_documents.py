"""`zrodlo documents torch-docs`: the default documents, the same bytes on every Python, or refused.

They are the docstrings of torch.nn's modules in the pinned torch, read from its source files. The
pipeline's dvc.lock records what the `documents` stage wrote, so a drift in the source or in how it
is read fails here before it reaches a reproduction.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from zrodlo.data.documents import read_documents
from zrodlo.data.torch_docs import DEFAULT_DOCUMENTS_SHA256, DEFAULT_PACKAGE_FOLDER, DEFAULT_TORCH

ROOT = Path(__file__).resolve().parents[2]
ZRODLO = Path(sys.executable).parent / "zrodlo"


def installed_torch() -> Path:
    return Path(importlib.util.find_spec("torch").submodule_search_locations[0])


def test_the_default_documents_are_the_bytes_the_pipeline_recorded(tmp_path, run_zrodlo):
    output = tmp_path / "documents.jsonl"
    returncode, stdout, stderr = run_zrodlo(
        "documents", "torch-docs", "--output", output, cwd=tmp_path
    )
    assert (returncode, stderr) == (0, "")
    documents = list(read_documents(output))
    assert stdout == (
        f"wrote {output}: {len(documents)} documents, the docstrings of torch {DEFAULT_TORCH}'s "
        f"{DEFAULT_PACKAGE_FOLDER}\n"
    )
    data = output.read_bytes()
    assert hashlib.sha256(data).hexdigest() == DEFAULT_DOCUMENTS_SHA256
    lock = yaml.safe_load((ROOT / "dvc.lock").read_text())
    (recorded,) = lock["stages"]["torch-docs"]["outs"]
    assert recorded["path"] == "data/torch-docs.jsonl"
    assert hashlib.md5(data).hexdigest() == recorded["md5"]
    # The documents stage imports them unchanged: the pipeline trains on these very bytes.
    imported = lock["stages"]["documents"]["outs"][0]
    assert (imported["path"], imported["md5"]) == ("data/documents.jsonl", recorded["md5"])
    # One document a docstring, named by where it is defined, its indentation removed.
    linear = {document.id: document.text for document in documents}[
        "torch.nn.modules.linear.Linear"
    ]
    assert linear.startswith("Applies an affine linear transformation to the incoming data")
    body = [line for line in linear.split("\n")[1:] if line]
    assert min(len(line) - len(line.lstrip(" ")) for line in body) == 0


def test_a_torch_whose_docstrings_differ_is_refused(tmp_path, snapshot):
    # A torch package of the pinned version whose one docstring reads otherwise, found first on
    # PYTHONPATH: the command reads its files, never imports it.
    overlay = tmp_path / "overlay" / "torch"
    shutil.copytree(installed_torch() / DEFAULT_PACKAGE_FOLDER, overlay / DEFAULT_PACKAGE_FOLDER)
    (overlay / "__init__.py").write_text("")
    linear = overlay / DEFAULT_PACKAGE_FOLDER / "linear.py"
    text = linear.read_text(encoding="utf-8")
    edited = text.replace("Applies an affine linear transformation", "Applies a linear map", 1)
    assert edited != text
    linear.write_text(edited, encoding="utf-8")
    output = tmp_path / "documents.jsonl"
    before = snapshot(tmp_path)
    completed = subprocess.run(
        [str(ZRODLO), "documents", "torch-docs", "--output", str(output)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(overlay.parent)},
        timeout=120,
        check=False,
    )
    match = re.fullmatch(
        rf"Error: the docstrings of {re.escape(str(overlay / DEFAULT_PACKAGE_FOLDER))} make "
        r"documents with sha256 ([0-9a-f]{64}), and the default documents have sha256 "
        rf"{DEFAULT_DOCUMENTS_SHA256}; that torch is not the torch {re.escape(DEFAULT_TORCH)} the "
        r"project pins, so install it again with make repro\n",
        completed.stderr,
    )
    assert match and match.group(1) != DEFAULT_DOCUMENTS_SHA256, completed.stderr
    assert (completed.returncode, completed.stdout) == (1, "")
    assert snapshot(tmp_path) == before

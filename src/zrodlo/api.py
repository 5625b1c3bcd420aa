"""The Python API: one function per command of the `zrodlo` command line, for scripts and notebooks.

Each takes the command's options as keywords (`--micro-batch-size` is `micro_batch_size`), with
the command's defaults, writes what the command writes, byte for byte, and returns what it wrote
or computed: `prepare`, `split` and `evaluate` the records they write, as typed dicts
(`CorpusManifest`, `PoolsManifest`, `Scores`; docs/formats.md), `import_documents` what it wrote
and skipped (`Imported`), `init` the model, `train` and `resume` the checkpoints written. A
refusal is raised as `Refusal`, whose `sentence` is what the command prints after `Error: `. `train` and `resume` with `processes=N` start N worker processes that run the library's
own entry point, never the caller's script, so they work from a notebook as from the command line
(a script keeps its work under `if __name__ == "__main__":`, as any multiprocessing does). They
show their steps as the command does (a live line on a terminal, a line a step otherwise);
`progress=api.quiet` shows none.

    from pathlib import Path
    from zrodlo import api

    api.prepare(Path("pools/train.jsonl"), Path("tokenizer"), Path("corpus/train"))
    api.train(Path("model"), Path("corpus/train"), Path("my-run"), steps=200, context=129,
              batch_size=32, learning_rate=2e-3, beta1=0.9, beta2=0.99, epsilon=1e-8,
              weight_decay=0.1, decay_scope="matrices", seed=1, precision="f32", shuffle=True,
              checkpoint_every=100, device="cpu", processes=2)
    api.resume(Path("my-run/step-100"), Path("corpus/train"), Path("resumed"), steps=200,
               device="cpu")
    api.evaluate(Path("my-run/step-200"), [Path("corpus/validation")])["corpora"]
    api.sample(Path("my-run/step-200"), "The ", tokens=100, seed=1)

The commands are: torch_docs and import_documents (`documents torch-docs`, `documents import`),
assign, split, fit_tokenizer (`tokenizer fit`), import_tokenizer (`tokenizer import`), prepare,
init, train, resume, evaluate, sample, export, import_model (`model import`), diff (`checkpoint
diff`), report and check_params (`pipeline check`). Beside them, `load` reads a model directory or
checkpoint as the commands read it, for use in Python: a torch module in eval mode whose call on
token ids gives the logits, and its tokenizer (`Loaded`).
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from typing import Any

from zrodlo.data.pools import assign, split
from zrodlo.data.preparation import prepare
from zrodlo.data.sources import import_documents
from zrodlo.data.tokenizer.fitting import fit_tokenizer
from zrodlo.data.tokenizer.imported import import_tokenizer
from zrodlo.data.torch_docs import torch_docs
from zrodlo.evaluation.compare import diff
from zrodlo.evaluation.evaluate import evaluate
from zrodlo.evaluation.loaded import Loaded, load
from zrodlo.evaluation.report import report
from zrodlo.evaluation.sample import sample
from zrodlo.exchange.from_transformers import import_model
from zrodlo.exchange.to_transformers import export
from zrodlo.model.config import DECLARATIONS
from zrodlo.model.declared import options_of
from zrodlo.model.directory import init
from zrodlo.model.presets import SHAPE
from zrodlo.pipeline.check import check_params
from zrodlo.storage.refusal import Refusal
from zrodlo.training.plan import RunPlan
from zrodlo.training.runs import quiet, resume, train

__all__ = [
    "Loaded", "Refusal", "assign", "check_params", "diff", "evaluate", "export", "fit_tokenizer",
    "import_documents", "import_model", "import_tokenizer", "init", "load", "prepare", "quiet",
    "report", "resume", "sample", "split", "torch_docs", "train",
]  # fmt: skip


def _declare(function: Callable[..., Any], *declarations: type, optional: tuple = ()) -> None:
    """Show the fields of the declarations that are options as the keywords `function` takes as
    **values, in the signature `help()` and `inspect.signature` give, a name declared twice once;
    those `optional` default to None (a preset's shape)."""

    def default(field: dataclasses.Field) -> Any:
        if field.name in optional:
            return None
        return inspect.Parameter.empty if field.default is dataclasses.MISSING else field.default

    fields: dict[str, dataclasses.Field] = {}
    for declaration in declarations:
        for field in options_of(declaration):
            fields.setdefault(field.name, field)
    declared = [
        inspect.Parameter(
            name, inspect.Parameter.KEYWORD_ONLY, default=default(field), annotation=field.type
        )
        for name, field in fields.items()
    ]
    signature = inspect.signature(function)
    own = [p for p in signature.parameters.values() if p.kind is not p.VAR_KEYWORD]
    function.__signature__ = signature.replace(parameters=[*own, *declared])


# train's hyperparameters and init's shape are the declared fields: help() and the command line
# show each of them, and a field added to the declaration is a keyword here at once.
_declare(train, RunPlan)
_declare(init, *DECLARATIONS, optional=SHAPE)

"""The `zrodlo` command: its groups, the commands of each stage, and how a refusal is printed."""

from __future__ import annotations

import os
import sys
import time
import warnings
from pathlib import Path

import typer

from zrodlo.stages import (
    assign,
    diff,
    documents,
    evaluate,
    export,
    init,
    params,
    pipeline,
    pipeline_model,
    pipeline_resume,
    pipeline_tokenizer,
    prepare,
    report,
    resume,
    sample,
    split,
    tokenizer,
    train,
)
from zrodlo.storage.refusal import (
    LOST_CONTACT_STATUS,
    QUIET_ON_LOST_CONTACT,
    LostContact,
    Refusal,
    cause,
)
from zrodlo.training.place import speaks as this_process_speaks

_QUIET_PROCESS_WAIT_S = 2.0

app = typer.Typer(
    help="Reproducible, resumable training of small language models.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
    add_completion=False,
)


@app.callback()
def zrodlo(
    params_file: Path | None = typer.Option(
        None, "--params", is_eager=True, callback=params.take_params, help=params.HELP
    ),
) -> None:
    """Reproducible, resumable training of small language models."""


documents_group = typer.Typer(
    help="Documents: bring them in, assign pools, split.", no_args_is_help=True
)
tokenizer_group = typer.Typer(
    help="Tokenizers: characters, a byte-level BPE, or one you already have.", no_args_is_help=True
)
corpus_group = typer.Typer(help="Token corpora prepared from documents.", no_args_is_help=True)
app.add_typer(documents_group, name="documents")
app.add_typer(tokenizer_group, name="tokenizer")
model_group = typer.Typer(
    help="Models: initialise, train, evaluate, sample and export.", no_args_is_help=True
)
checkpoint_group = typer.Typer(help="Checkpoints: resume and compare runs.", no_args_is_help=True)
app.add_typer(corpus_group, name="corpus")
app.add_typer(model_group, name="model")
app.add_typer(checkpoint_group, name="checkpoint")
pipeline_group = typer.Typer(
    help="The DVC pipeline: its params checked, and the stages its params choose for.",
    no_args_is_help=True,
)
app.add_typer(pipeline_group, name="pipeline")

documents_group.command("torch-docs", epilog=documents.TORCH_DOCS_EXAMPLE)(documents.torch_docs)
documents_group.command("import", epilog=documents.IMPORT_EXAMPLE)(documents.import_documents)
documents_group.command("assign", epilog=assign.EXAMPLE)(assign.assign)
documents_group.command("split", epilog=split.EXAMPLE)(split.split)
tokenizer_group.command("fit", epilog=tokenizer.EXAMPLE)(tokenizer.fit)
tokenizer_group.command("import", epilog=tokenizer.IMPORT_EXAMPLE)(tokenizer.import_tokenizer)
corpus_group.command("prepare", epilog=prepare.EXAMPLE)(prepare.prepare)
model_group.command("init", epilog=init.EXAMPLE)(init.init)
model_group.command("train", epilog=train.EXAMPLE)(train.train)
model_group.command("evaluate", epilog=evaluate.EXAMPLE)(evaluate.evaluate)
model_group.command("sample", epilog=sample.EXAMPLE)(sample.sample)
model_group.command("export", epilog=export.EXAMPLE)(export.export)
model_group.command("import", epilog=export.IMPORT_EXAMPLE)(export.import_model)
checkpoint_group.command("resume", epilog=resume.EXAMPLE)(resume.resume)
checkpoint_group.command("diff", epilog=diff.EXAMPLE)(diff.diff)
app.command("report", epilog=report.EXAMPLE)(report.report)
pipeline_group.command("check", epilog=pipeline.EXAMPLE)(pipeline.check)
pipeline_group.command("tokenizer", epilog=pipeline_tokenizer.EXAMPLE)(
    pipeline_tokenizer.pipeline_tokenizer
)
pipeline_group.command("model", epilog=pipeline_model.EXAMPLE)(pipeline_model.pipeline_model)
pipeline_group.command("resume", epilog=pipeline_resume.EXAMPLE)(pipeline_resume.pipeline_resume)


def main() -> None:
    """Run the command line; a refusal prints `Error: <sentence>` on stderr and exits 1.

    The library turns a write the operating system refuses into a sentence naming the output; any
    other error of the operating system (a file that cannot be read, say) is said plainly here too,
    never as a traceback. In a data-parallel run every process meets the same refusal, and only
    process 0 prints it; the others end with the same status and say nothing.
    """
    speaks = this_process_speaks()
    warnings.showwarning = _show_warning
    try:
        app()
    except LostContact as lost:
        # Under `--processes` the launcher says which process failed; under torchrun, each
        # process that finds out, on whichever machine it runs.
        if QUIET_ON_LOST_CONTACT not in os.environ:
            print(f"Error: {lost.sentence}", file=sys.stderr)
        sys.exit(LOST_CONTACT_STATUS)
    except Refusal as refusal:
        if speaks:
            print(f"Error: {refusal.sentence}", file=sys.stderr)
        else:
            # Process 0 meets the same refusal and says it; ending after it keeps a launcher
            # from stopping it, as the first of its processes to end, before it has.
            time.sleep(_QUIET_PROCESS_WAIT_S)
        sys.exit(1)
    except OSError as error:
        if speaks:
            named = "" if error.filename is None else f" {error.filename}"
            print(f"Error: the operating system refused{named}: {cause(error)}", file=sys.stderr)
        sys.exit(1)
    except Exception:
        if speaks:
            raise
        sys.exit(1)  # process 0 meets the same error, or lost this one, and says so


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """A warning of the library as one line, `warning: <sentence>`, without the source line."""
    print(f"warning: {message}", file=sys.stderr)

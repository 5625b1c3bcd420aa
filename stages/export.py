"""`zrodlo model export`: a model directory or checkpoint as a transformers directory (GPT-2 or
Llama); `zrodlo model import`: such a directory as a Zrodlo model directory."""

from __future__ import annotations

from pathlib import Path

import typer

EXAMPLE = "Example: zrodlo model export --model run/step-350 --output exported"
IMPORT_EXAMPLE = "Example: zrodlo model import --from smollm --output model"


def export(
    model: Path = typer.Option(..., help="The model directory or checkpoint to export."),
    output: Path = typer.Option(
        ..., help="The new directory transformers loads with from_pretrained."
    ),
) -> None:
    """Write a model as a GPT-2 or Llama directory that Hugging Face transformers loads.

    config.json, model.safetensors and a tokenizer whose ids are Zrodlo's, loaded offline by
    AutoModelForCausalLM and AutoTokenizer.from_pretrained."""
    # Imported here, not at the top: `zrodlo --help` then starts without torch.
    from zrodlo.evaluation.export import export as export_model

    written = export_model(model, output)
    typer.echo(
        f"wrote {written}; load it with AutoModelForCausalLM.from_pretrained({str(written)!r})"
    )


def import_model(
    source: Path = typer.Option(
        ...,
        "--from",
        help="A transformers directory of a GPT-2 or Llama causal LM: config.json, "
        "model.safetensors and tokenizer.json (a byte-level BPE).",
    ),
    output: Path = typer.Option(..., help="The model directory to write; must not exist."),
) -> None:
    """Import a transformers GPT-2 or Llama model, so that model train continues from it.

    A setting Zrodlo cannot compute exactly is refused naming its field (docs/export.md)."""
    from zrodlo.evaluation.hf_import import import_model as run
    from zrodlo.model.config import parameter_count

    config = run(source, output)
    typer.echo(
        f"wrote {output}: a {config.architecture} model of {parameter_count(config):,} parameters"
    )

"""`zrodlo model export`: a model directory or checkpoint as a transformers GPT-2 directory."""

from __future__ import annotations

from pathlib import Path

import typer

EXAMPLE = "Example: zrodlo model export --model run/step-1000 --output exported"


def export(
    model: Path = typer.Option(..., help="The model directory or checkpoint to export."),
    output: Path = typer.Option(
        ..., help="The new directory transformers loads with from_pretrained."
    ),
) -> None:
    """Write a model as a GPT-2 directory that Hugging Face transformers loads.

    config.json, model.safetensors and a tokenizer whose ids are Zrodlo's, loaded offline by
    AutoModelForCausalLM and AutoTokenizer.from_pretrained."""
    # Imported here, not at the top: `zrodlo --help` then starts without torch.
    from zrodlo.evaluation.export import export as export_model

    written = export_model(model, output)
    typer.echo(
        f"wrote {written}; load it with AutoModelForCausalLM.from_pretrained({str(written)!r})"
    )

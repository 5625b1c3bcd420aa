"""`zrodlo model export`: a model directory or checkpoint as the transformers directory of its
family's causal LM; `zrodlo model import`: such a directory as a Zrodlo model directory."""

from __future__ import annotations

from pathlib import Path

import typer

from zrodlo.model.families import FAMILIES

# transformers' classes of the families Zrodlo has, for --help: GPT2LMHeadModel, ...
CLASSES = ", ".join(family.transformers_class for family in FAMILIES.values())
EXAMPLE = "Example: zrodlo model export --model run/step-350 --output exported"
IMPORT_EXAMPLE = "Example: zrodlo model import --from smollm --output model"


def export(
    model: Path = typer.Option(..., help="The model directory or checkpoint to export."),
    output: Path = typer.Option(
        ..., help="The new directory transformers loads with from_pretrained."
    ),
    adapter: bool = typer.Option(
        False,
        "--adapter",
        help="Write a run of adapters' checkpoint as a PEFT adapter directory for its base's "
        "export, instead of the model with the adapters merged.",
    ),
) -> None:
    """Write a model as the directory of its family's causal LM that transformers loads.

    config.json, model.safetensors and a tokenizer whose ids are Zrodlo's, loaded offline by
    AutoModelForCausalLM and AutoTokenizer.from_pretrained (docs/export.md); with --adapter,
    adapter_config.json and adapter_model.safetensors, which PeftModel.from_pretrained loads."""
    # Imported here, not at the top: `zrodlo --help` then starts without torch.
    from zrodlo.exchange.to_transformers import export as export_model

    written = export_model(model, output, adapter)
    if adapter:
        typer.echo(
            f"wrote {written}; load it with PeftModel.from_pretrained(base, {str(written)!r}), "
            "base the export of the model it adapts"
        )
    else:
        typer.echo(
            f"wrote {written}; load it with AutoModelForCausalLM.from_pretrained({str(written)!r})"
        )


def import_model(
    source: Path = typer.Option(
        ...,
        "--from",
        help=f"A transformers directory of a causal LM of a family Zrodlo has ({CLASSES}): "
        "config.json, model.safetensors (or its shards) and tokenizer.json (a byte-level BPE).",
    ),
    output: Path = typer.Option(..., help="The model directory to write; must not exist."),
) -> None:
    """Import a transformers causal LM of a family Zrodlo has, so that model train continues it.

    A setting Zrodlo cannot compute exactly is refused naming its field (docs/export.md)."""
    from zrodlo.exchange.from_transformers import import_model as run
    from zrodlo.model.parts import parameter_count

    config = run(source, output)
    typer.echo(
        f"wrote {output}: a {config.architecture} model of {parameter_count(config):,} parameters"
    )

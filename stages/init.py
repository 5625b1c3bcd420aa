"""`zrodlo model init`: a model directory with seeded initial weights (the `init` stage)."""

from __future__ import annotations

from pathlib import Path

import typer

EXAMPLE = (
    "Example: zrodlo model init --tokenizer tokenizer --output model --layers 4 --heads 4 "
    "--d-model 128 --d-ff 512 --positions 128 --dropout 0.1 --seed 1"
)


def init(
    tokenizer: Path = typer.Option(
        ..., help="The tokenizer directory whose vocabulary the model reads."
    ),
    output: Path = typer.Option(..., help="The model directory to write; its parent must exist."),
    layers: int = typer.Option(..., help="Transformer blocks."),
    heads: int = typer.Option(..., help="Attention heads per block; must divide --d-model."),
    d_model: int = typer.Option(..., help="Width of the residual stream."),
    d_ff: int = typer.Option(..., help="Width of each block's MLP."),
    positions: int = typer.Option(..., help="The most tokens the model reads in one window."),
    dropout: float = typer.Option(
        ..., help="Dropout on embeddings and residual branches, in [0, 1)."
    ),
    attention_dropout: float = typer.Option(
        0.0,
        help="Dropout on attention probabilities, in [0, 1); above 0 it leaves the fused kernel.",
    ),
    seed: int = typer.Option(
        ..., help="Keys the ChaCha20 draws of the initial weights (0 to 2^64-1)."
    ),
) -> None:
    """Write config.json, tokenizer.json and model.safetensors with weights drawn from --seed."""
    # Imported here, not at the top: `zrodlo --help` and the data stages then start without torch.
    from zrodlo.data.tokenizer import CharTokenizer
    from zrodlo.draws.chacha import check_seed
    from zrodlo.model.config import ModelConfig, parameter_count
    from zrodlo.model.directory import write_model
    from zrodlo.model.weights import initial_weights
    from zrodlo.storage.outputs import check_new_directory, new_directory

    check_new_directory(output)
    fitted = CharTokenizer.load(tokenizer)
    config = ModelConfig(
        vocab_size=fitted.vocab_size,
        positions=positions,
        d_model=d_model,
        layers=layers,
        heads=heads,
        d_ff=d_ff,
        dropout=dropout,
        attention_dropout=attention_dropout,
    )
    config.validate()
    check_seed(seed)
    weights = initial_weights(config, seed)
    with new_directory(output) as partial:
        digests = write_model(partial, config, fitted, weights)
    typer.echo(
        f"wrote {output}: {parameter_count(config):,} parameters, "
        f"model.safetensors sha256 {digests['model.safetensors']}"
    )

"""`zrodlo model sample`: text from a model or checkpoint, reproducible by seed."""

from __future__ import annotations

from pathlib import Path

import typer

from zrodlo.stages import options

EXAMPLE = (
    "Example: zrodlo model sample --model run/step-350 --prompt 'The ' --tokens 300 "
    "--temperature 0.8 --seed 1"
)


def sample(
    model: Path = typer.Option(..., help="The model directory or checkpoint to sample from."),
    prompt: str = typer.Option("", help="The text the sample continues (after BOS)."),
    tokens: int = typer.Option(200, help="The most tokens to draw; a sample also ends at EOS."),
    temperature: float = typer.Option(
        0.8, help="Divides the logits; 0 takes the most likely token."
    ),
    top_k: int | None = typer.Option(None, help="Draw only among the k most likely tokens."),
    seed: int | None = typer.Option(
        None,
        help="Keys the ChaCha20 draws: the same seed gives the same text; a default seed, said "
        "on stderr, if left out.",
    ),
    device: str = options.DEVICE_OR_CPU,
    ordinal: int | None = options.ORDINAL,
    chat: bool = typer.Option(
        False,
        help="Take the prompt as a user's message and print the answer, rendered by the "
        "tokenizer's chat template (or the plain form) and ended at the end of the turn.",
    ),
) -> None:
    """Continue a prompt with text drawn from the model, or answer it (--chat)."""
    # Imported here, not at the top: `zrodlo --help` and the data stages then start without torch.
    from zrodlo.evaluation.sample import DEFAULT_SEED
    from zrodlo.evaluation.sample import sample as sample_model

    text = sample_model(
        model, prompt, tokens, temperature, top_k, seed=seed, device=device, ordinal=ordinal,
        chat=chat,
    )  # fmt: skip
    if chat and not text:
        typer.echo("(the model ended its turn at once: the answer is empty)", err=True)
    else:
        typer.echo(text if chat else prompt + text)
    if seed is None and temperature != 0:  # recorded, so that the text can be drawn again
        typer.echo(f"drawn with --seed {DEFAULT_SEED}, the default", err=True)

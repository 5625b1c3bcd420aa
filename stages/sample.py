"""`zrodlo model sample`: text from a model or checkpoint, reproducible by seed."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from stages import options


def sample(
    model: Path = typer.Option(..., help="The model directory or checkpoint to sample from."),
    prompt: str = typer.Option("", help="The text the sample continues (after BOS)."),
    tokens: int = typer.Option(200, help="The most tokens to draw; a sample also ends at EOS."),
    temperature: float = typer.Option(
        0.8, help="Divides the logits; 0 takes the most likely token."
    ),
    top_k: int | None = typer.Option(None, help="Draw only among the k most likely tokens."),
    seed: int = typer.Option(
        ..., help="Keys the ChaCha20 draws: the same seed gives the same text."
    ),
    device: str = options.DEVICE_OR_CPU,
    ordinal: int | None = options.ORDINAL,
) -> None:
    """Continue a prompt with text drawn from the model."""
    # Imported here, not at the top: `zrodlo --help` and the data stages then start without torch.
    from zrodlo.chacha import check_seed
    from zrodlo.checkpoint import check_tokenizer_fits, read_model
    from zrodlo.device import resolve_device
    from zrodlo.model import GPT
    from zrodlo.sample import check_sampling, unknown_warning
    from zrodlo.sample import sample as draw_sample

    check_sampling(tokens, temperature, top_k)
    check_seed(seed)
    loaded = read_model(model)
    check_tokenizer_fits(loaded)
    target = resolve_device(device, ordinal, "f32")
    warning = unknown_warning(loaded.tokenizer, prompt)
    if warning:
        print(f"warning: {warning}", file=sys.stderr)
    network = GPT.from_weights(loaded.config, loaded.weights, target, str(model))
    text = draw_sample(network, loaded.tokenizer, prompt, tokens, temperature, top_k, seed, target)
    typer.echo(prompt + text)

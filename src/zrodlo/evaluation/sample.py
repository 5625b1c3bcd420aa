"""Text from a model: each next token drawn from the model's distribution with ChaCha20 uniforms.

Token i of a sample uses uniform i of the stream (seed, SAMPLING), so the same model, prompt and
seed give the same text on every machine whose model computes the same logits. The distribution is
the softmax of logits / temperature over the top-k tokens; temperature 0 takes the most likely one.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import torch

from zrodlo.data.chat_encoding import ChatProblem, chat_prompt
from zrodlo.data.tokenizer import Tokenizer
from zrodlo.draws.chacha import Purpose, Stream, check_seed
from zrodlo.draws.floats import uniform
from zrodlo.model.attention import KVCache
from zrodlo.model.decoder import Decoder, build_model
from zrodlo.model.device import resolve_device
from zrodlo.model.directory import check_tokenizer_fits
from zrodlo.storage.refusal import Refusal
from zrodlo.training.checkpoint import read_model

# The most tokens one sample draws: its uniforms are drawn at once, 4 bytes a token.
MAX_SAMPLE_TOKENS = 2**20


def check_sampling(tokens: int, temperature: float, top_k: int | None) -> None:
    if tokens < 1:
        raise Refusal(f"--tokens is {tokens}; a sample needs one token or more")
    if tokens > MAX_SAMPLE_TOKENS:
        raise Refusal(f"--tokens is {tokens}; a sample draws 1 to {MAX_SAMPLE_TOKENS:,} tokens")
    if not (np.isfinite(temperature) and temperature >= 0):
        raise Refusal(
            f"--temperature is {temperature!r}; it must be a finite number, zero or more "
            "(zero takes the most likely token)"
        )
    if top_k is not None and top_k < 1:
        raise Refusal(f"--top-k is {top_k}; it must be one or more, or left out for all tokens")


def check_prompt(tokenizer: Tokenizer, prompt: str) -> None:
    """Refuse a prompt the tokenizer would not read as written (one not in the normal form it puts
    each text in): the sample would continue another text than the one printed before it."""
    problem = tokenizer.text_problem(prompt)
    if problem is not None:
        raise Refusal(f"the prompt is {problem}")


def unknown_characters(tokenizer: Tokenizer, prompt: str) -> list[str]:
    """The prompt's characters the tokenizer does not know, in order of first appearance (none
    for a byte-level tokenizer, which knows every text)."""
    if tokenizer.unk is None:
        return []
    ids = tokenizer.encode(prompt)  # a tokenizer with an unknown token gives one id a character
    return list(
        dict.fromkeys(c for c, i in zip(prompt, ids.tolist(), strict=True) if i == tokenizer.unk)
    )


def unknown_warning(tokenizer: Tokenizer, prompt: str) -> str | None:
    """The warning a prompt with characters the tokenizer does not know deserves, if any."""
    unknown = unknown_characters(tokenizer, prompt)
    if not unknown:
        return None
    shown = ", ".join(repr(c) for c in unknown)
    return (
        f"the prompt holds {len(unknown)} characters the tokenizer does not know ({shown}); "
        "the model reads each as UNK"
    )


def choose(logits: np.ndarray, temperature: float, top_k: int | None, draw: float) -> int:
    """The token a uniform draw in [0, 1) picks from logits (V,) float32."""
    if temperature == 0:
        return int(np.argmax(logits))
    order = np.argsort(-logits, kind="stable")[: top_k or len(logits)]  # most likely first
    scaled = logits[order].astype(np.float64) / temperature
    weights = np.exp(scaled - scaled.max())
    cumulative = np.cumsum(weights)
    return int(
        order[min(np.searchsorted(cumulative, draw * cumulative[-1], side="right"), len(order) - 1)]
    )


def draw(
    model: Decoder,
    tokenizer: Tokenizer,
    prompt: str,
    tokens: int,
    temperature: float,
    top_k: int | None,
    seed: int,
    device: torch.device,
) -> str:
    """Continue BOS + prompt by up to `tokens` tokens (stopping at EOS); return the new text."""
    start = [tokenizer.bos, *tokenizer.encode(prompt).tolist()]
    return continued(
        model, tokenizer, start, {tokenizer.eos}, tokens, temperature, top_k, seed, device
    )


def continued(
    model: Decoder,
    tokenizer: Tokenizer,
    start: list[int],
    stops: set[int],
    tokens: int,
    temperature: float,
    top_k: int | None,
    seed: int,
    device: torch.device,
) -> str:
    """Continue the ids `start` by up to `tokens` tokens, stopping at one of `stops`; return the
    new text."""
    stream = Stream(seed, Purpose.SAMPLING)
    draws = uniform(stream, 0, tokens)  # (tokens,) one uniform per token drawn
    sequence = list(start)
    produced: list[int] = []
    positions = model.config.positions
    cache, unread = KVCache(), sequence
    model.eval()
    with torch.no_grad():
        for i in range(tokens):
            if cache.length + len(unread) > positions:
                # The model reads its last `positions` tokens; the window has moved, so every
                # position it holds is another one now: read the window anew.
                cache, unread = KVCache(), sequence[-positions:]
            inputs = torch.tensor([unread], dtype=torch.long, device=device)  # (1, T)
            logits = model(inputs, cache=cache)[0, -1].float().cpu().numpy()  # (V,)
            token = choose(logits, temperature, top_k, float(draws[i]))
            if token in stops:
                break
            sequence.append(token)
            produced.append(token)
            unread = [token]
    return continuation(tokenizer, start, produced)


def continuation(tokenizer: Tokenizer, start: list[int], produced: list[int]) -> str:
    """The text the ids `produced` add after `start`: what the whole sequence decodes to past what
    `start` decodes to, since a decoder may read a token by what precedes it (Llama 2's drops the
    space of a text's first token, which continuing the prompt has)."""
    return tokenizer.decode([*start, *produced])[len(tokenizer.decode(start)) :]


# The seed of a sample that names none: the same text every time, as a seed given would.
DEFAULT_SEED = 1


class UnknownCharactersWarning(UserWarning):
    """A prompt holds characters the tokenizer does not know: the model reads each as UNK."""


def sample(
    model: Path,
    prompt: str = "",
    tokens: int = 200,
    temperature: float = 0.8,  # the command's default: the same call gives the same text
    top_k: int | None = None,
    *,
    seed: int | None = None,
    device: str = "cpu",
    ordinal: int | None = None,
    chat: bool = False,
) -> str:
    """The text of up to `tokens` tokens drawn from the model directory or checkpoint `model`
    after BOS and `prompt` (without the prompt); the same seed (`DEFAULT_SEED` where None) gives
    the same text. With `chat` the prompt is a user's message and the text the answer, rendered
    and ended as the tokenizer's chat template (or the plain form) says
    (`zrodlo.data.chat_encoding`)."""
    check_sampling(tokens, temperature, top_k)
    seed = DEFAULT_SEED if seed is None else seed
    check_seed(seed)
    loaded = read_model(model)
    check_tokenizer_fits(loaded)
    check_prompt(loaded.tokenizer, prompt)
    target = resolve_device(device, ordinal, "f32")
    warning = unknown_warning(loaded.tokenizer, prompt)
    if warning:
        warnings.warn(warning, UnknownCharactersWarning, stacklevel=2)
    tokenizer = loaded.tokenizer
    if not chat:
        network = build_model(loaded, target)
        return draw(network, tokenizer, prompt, tokens, temperature, top_k, seed, target)
    try:
        start, stops = chat_prompt(tokenizer, prompt)
    except ChatProblem as problem:
        raise Refusal(f"the prompt, as a user's message, {problem}") from None
    network = build_model(loaded, target)
    return continued(network, tokenizer, start, stops, tokens, temperature, top_k, seed, target)

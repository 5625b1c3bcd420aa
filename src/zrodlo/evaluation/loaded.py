"""A model in Python as the commands read it: `load` a model directory or a checkpoint (one of
adapters with its base, held as its run held it) to a torch module in eval mode, whose call on
token ids gives the logits `model evaluate` and `model sample` compute, beside its tokenizer."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np

from zrodlo.data.chat_encoding import ChatProblem, chat_prompt, encode_conversation
from zrodlo.data.conversation import Conversation, conversation, conversation_problem
from zrodlo.data.tokenizer import Tokenizer
from zrodlo.model.decoder import Decoder, build_model
from zrodlo.model.device import resolve_device
from zrodlo.model.directory import check_tokenizer_fits
from zrodlo.storage.refusal import Refusal
from zrodlo.training.checkpoint import read_model


class Loaded(NamedTuple):
    """A model read for use in Python: `model(ids)` takes (B, T) int64 token ids and gives (B, T,
    vocab_size) float32 logits, the next token's after each position; `tokenizer` encodes text to
    ids (`encode`, framed by no BOS) and decodes them (`decode`)."""

    model: Decoder
    tokenizer: Tokenizer

    def conversation(self, messages: Sequence[Mapping[str, str]]) -> tuple[np.ndarray, np.ndarray]:
        """A conversation's (n,) int64 ids and (n,) uint8 weights as a chat corpus holds it: the
        rendering of the tokenizer's chat template (or the plain form), 1 on what the assistant
        writes (docs/chat.md)."""
        try:
            return encode_conversation(self.tokenizer, _messages(messages))
        except ChatProblem as problem:
            raise Refusal(f"the conversation {problem}") from None

    def prompt(self, text: str) -> list[int]:
        """The ids that ask for an answer to the user's message `text`, as `model sample --chat`
        renders it: the ids a generation continues."""
        try:
            return chat_prompt(self.tokenizer, text)[0]
        except ChatProblem as problem:
            raise Refusal(f"the prompt, as a user's message, {problem}") from None


def _messages(messages: Sequence[Mapping[str, str]]) -> Conversation:
    """The messages as a conversation, checked as a chat document's are."""
    given = [dict(message) if isinstance(message, Mapping) else message for message in messages]
    problem = conversation_problem(given)
    if problem is not None:
        raise Refusal(f"the conversation {problem}")
    return conversation(given)


def load(model: Path, device: str = "cpu", ordinal: int | None = None) -> Loaded:
    """The model directory or checkpoint `model` on `device` (cpu, or metal or cuda with
    `ordinal`), every file checked as the commands check it, in eval mode, and its tokenizer."""
    read = read_model(Path(model))
    check_tokenizer_fits(read)
    target = resolve_device(device, ordinal, "f32")
    return Loaded(build_model(read, target).eval(), read.tokenizer)

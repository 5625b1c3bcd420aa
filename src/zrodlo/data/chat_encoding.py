"""A conversation as token ids and target weights: 1 for the tokens of each assistant turn and the
token that ends it, 0 elsewhere, so that a run trains on the answers only.

With a tokenizer that carries a chat template (an imported one whose files have one), the ids are
the template's rendering encoded whole, as transformers' `apply_chat_template` gives them, and a
token weighs 1 where its text overlaps an assistant message's content as the rendering holds it
(the content, or the content stripped, as templates such as Llama 3's write it), as does the first
token after that content, the template's end of turn (`<|eot_id|>`, `<|im_end|>`). A content that
holds the text of a special token is refused: the template would read it as that token.

Without a template (Zrodlo's own tokenizers, or an imported one that has none) the plain form is
used: BOS, then each message as "role: " (weight 0) and its content, ended by "\\n" (weight 0),
or, for an assistant's turn, by EOS (weight 1, the end of an answer a sampler stops at); a
conversation that ends on another turn ends with EOS (weight 0). Each piece is encoded on its own.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np

from zrodlo.data.conversation import ANSWER, Conversation, Message
from zrodlo.data.tokenizer import Tokenizer
from zrodlo.data.tokenizer.chat_template import ChatTemplate, TemplateFailure


class ChatProblem(Exception):
    """Why a conversation cannot be encoded, the end of a sentence naming the document."""


def encode_conversation(
    tokenizer: Tokenizer, messages: Conversation
) -> tuple[np.ndarray, np.ndarray]:
    """The conversation's ids (n,) int64 and target weights (n,) uint8; the first weight is 0, as
    the first token is never a target. Raises ChatProblem."""
    for message in messages:
        problem = tokenizer.text_problem(message.content)
        if problem is not None:
            raise ChatProblem(f"has a message {problem}")
    if tokenizer.template is None:
        return _plain(tokenizer, messages)
    return _templated(tokenizer, tokenizer.template, messages)


def chat_prompt(tokenizer: Tokenizer, text: str) -> tuple[list[int], set[int]]:
    """The ids that open an answer to the user's message `text`, and the ids that end an answer:
    EOS, and with a template the token that ends the assistant's turn. Raises ChatProblem."""
    asked = (Message("user", text),)
    # Checked as a conversation is; its last weighted token is the one that ends an answer.
    ids, weights = encode_conversation(tokenizer, (*asked, Message(ANSWER, "x")))
    ended = int(ids[np.flatnonzero(weights)[-1]])
    if tokenizer.template is None:
        opened, _ = _plain(tokenizer, asked)  # BOS, the message, its newline, EOS
        return [*opened[:-1].tolist(), *tokenizer.encode(f"{ANSWER}: ").tolist()], {ended}
    library, _ = _template_library(tokenizer)
    rendered = _rendered(tokenizer.template, asked, generation_prompt=True)
    return library.encode(rendered, add_special_tokens=False).ids, {tokenizer.eos, ended}


def _plain(tokenizer: Tokenizer, messages: Conversation) -> tuple[np.ndarray, np.ndarray]:
    pieces: list[np.ndarray] = [np.array([tokenizer.bos])]
    weights: list[np.ndarray] = [np.zeros(1, np.uint8)]

    def add(ids: np.ndarray, weight: int) -> None:
        pieces.append(np.asarray(ids, np.int64))
        weights.append(np.full(len(ids), weight, np.uint8))

    for message in messages:
        answer = message.role == ANSWER
        add(tokenizer.encode(f"{message.role}: "), 0)
        add(tokenizer.encode(message.content), int(answer))
        add(np.array([tokenizer.eos]) if answer else tokenizer.encode("\n"), int(answer))
    if messages[-1].role != ANSWER:
        add(np.array([tokenizer.eos]), 0)
    return np.concatenate(pieces), np.concatenate(weights)


def _templated(
    tokenizer: Tokenizer, template: ChatTemplate, messages: Conversation
) -> tuple[np.ndarray, np.ndarray]:
    library, special = _template_library(tokenizer)
    for number, message in enumerate(messages, start=1):
        held = [text for text in special if text in message.content]
        if held:
            raise ChatProblem(
                f"has message {number} holding {held[0]!r}, the text of a special token, which "
                "its chat template would read as that token"
            )
    rendered = _rendered(template, messages)
    spans = _answer_spans(rendered, messages)
    encoding = library.encode(rendered, add_special_tokens=False)
    ids = np.asarray(encoding.ids, np.int64)  # (n,)
    starts, ends = np.asarray(encoding.offsets, np.int64).reshape(-1, 2).T  # (n,) each
    weights = np.zeros(len(ids), np.uint8)  # (n,)
    for first, last in spans:
        weights[(starts < last) & (ends > first)] = 1
        after = np.flatnonzero(starts >= last)
        if len(after):  # the end of the turn
            weights[after[0]] = 1
    if len(ids) < 2:
        raise ChatProblem("renders to fewer than two tokens, which hold no target")
    weights[0] = 0
    return ids, weights


def _rendered(
    template: ChatTemplate, messages: Conversation, generation_prompt: bool = False
) -> str:
    try:
        return template.render(messages, generation_prompt)
    except TemplateFailure as failure:
        raise ChatProblem(
            f"cannot be rendered by its tokenizer's chat template: {failure}"
        ) from None


def _answer_spans(rendered: str, messages: Conversation) -> list[tuple[int, int]]:
    """Where each assistant content lies in the rendering, (start, end) in characters, found in
    order after the messages before it."""
    spans, at = [], 0
    for number, message in enumerate(messages, start=1):
        for written in (message.content, message.content.strip()):
            found = rendered.find(written, at)
            if found >= 0:
                break
        else:
            raise ChatProblem(
                f"has message {number}, which its chat template does not write as given, so the "
                "tokens of the answers cannot be told"
            )
        if message.role == ANSWER:
            spans.append((found, found + len(written)))
        at = found + len(written)
    return spans


@lru_cache(maxsize=4)
def _template_library(tokenizer: Tokenizer) -> tuple[Any, tuple[str, ...]]:
    """The library tokenizer that reads the names of special tokens in a rendering as those
    tokens, as transformers does (the one documents are encoded with reads them as text), and
    the texts of those special tokens. Made once a tokenizer: building one costs a large
    vocabulary's parse."""
    from tokenizers import Tokenizer as Library

    library = Library.from_str(tokenizer.library.to_str())
    library.encode_special_tokens = False
    added = library.get_added_tokens_decoder().values()
    return library, tuple(token.content for token in added if token.special)

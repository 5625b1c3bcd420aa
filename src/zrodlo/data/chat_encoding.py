"""A conversation as token ids and target weights: 1 for the tokens of each assistant turn and the
token that ends it, 0 elsewhere, so that a run trains on the answers only.

With a tokenizer that carries a chat template (an imported one whose files have one), the ids are
the template's rendering encoded whole, as transformers' `apply_chat_template` gives them. Where
the template marks what the assistant writes (`{% generation %}` blocks), a token weighs 1 where its
text overlaps a block, as `return_assistant_tokens_mask` reads them. Elsewhere each assistant
message is found in the rendering as the template writes it (its content; the content stripped,
as Llama 3's templates write it; or the answer after its last `</think>`, as Qwen3's template
writes a turn before the last question, dropping the reasoning), and a token weighs 1 where its
text overlaps the turn from the end of the template's opening of an assistant turn (its generation
prompt, `<|im_start|>assistant\n`) to the end of that content, as does the first token after it,
the template's end of turn (`<|eot_id|>`, `<|im_end|>`, `<end_of_turn>`): what the template writes
between the opening and the content (Qwen3's `<think>` block) is the assistant's to write too. A
content that holds the text of a special token is refused: the template would read it as that
token.

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
from zrodlo.data.tokenizer.chat_template import (
    CLOSED,
    OPENED,
    ChatTemplate,
    Spans,
    TemplateFailure,
    unmarked,
)


class ChatProblem(Exception):
    """Why a conversation cannot be encoded, the end of a sentence naming the document."""


def encode_conversation(
    tokenizer: Tokenizer, messages: Conversation, thinking: bool | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The conversation's ids (n,) int64 and target weights (n,) uint8; the first weight is 0, as
    the first token is never a target; `thinking` is the template's `enable_thinking` (None:
    its default). Raises ChatProblem."""
    for message in messages:
        problem = tokenizer.text_problem(message.content)
        if problem is not None:
            raise ChatProblem(f"has a message {problem}")
    if tokenizer.template is None:
        return _plain(tokenizer, messages)
    return _templated(tokenizer, tokenizer.template, messages, thinking)


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
    rendered, _ = _rendered(tokenizer.template, asked, generation_prompt=True)
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
    tokenizer: Tokenizer, template: ChatTemplate, messages: Conversation, thinking: bool | None
) -> tuple[np.ndarray, np.ndarray]:
    library, special = _template_library(tokenizer)
    for number, message in enumerate(messages, start=1):
        held = [text for text in special if text in message.content]
        if held:
            raise ChatProblem(
                f"has message {number} holding {held[0]!r}, the text of a special token, which "
                "its chat template would read as that token"
            )
        if OPENED in message.content or CLOSED in message.content:
            raise ChatProblem(
                f"has message {number} holding U+E000 or U+E001, the private-use characters that "
                "mark what the assistant writes in a rendering"
            )
    rendered, marked = _rendered(template, messages, thinking=thinking)
    spans = marked
    if spans is None:
        spans = _answer_spans(rendered, messages, _opening(template, thinking))
    encoding = library.encode(rendered, add_special_tokens=False)
    ids = np.asarray(encoding.ids, np.int64)  # (n,)
    starts, ends = np.asarray(encoding.offsets, np.int64).reshape(-1, 2).T  # (n,) each
    weights = np.zeros(len(ids), np.uint8)  # (n,)
    for first, last in spans:
        weights[(starts < last) & (ends > first)] = 1
        after = np.flatnonzero(starts >= last)
        if marked is None and len(after):  # the end of the turn, which a block holds itself
            weights[after[0]] = 1
    if len(ids) < 2:
        raise ChatProblem("renders to fewer than two tokens, which hold no target")
    weights[0] = 0
    return ids, weights


def _rendered(
    template: ChatTemplate,
    messages: Conversation,
    generation_prompt: bool = False,
    thinking: bool | None = None,
) -> tuple[str, Spans | None]:
    """The rendering, and the spans of its generation blocks where the template has them."""
    try:
        return unmarked(template.render(messages, generation_prompt, thinking))
    except TemplateFailure as failure:
        raise ChatProblem(
            f"cannot be rendered by its tokenizer's chat template: {failure}"
        ) from None


@lru_cache(maxsize=4)
def _opening(template: ChatTemplate, thinking: bool | None) -> str | None:
    """What the template writes to open an assistant's turn (its generation prompt, with Qwen3's
    empty think block where thinking is off: the prompt's, not the answer's), or None where a
    rendering with it does not continue the one without."""
    try:
        asked = (Message("user", "x"),)
        bare, _ = unmarked(template.render(asked, thinking=thinking))
        opened, _ = unmarked(template.render(asked, generation_prompt=True, thinking=thinking))
    except TemplateFailure:
        return None
    return opened[len(bare) :] if opened.startswith(bare) and len(opened) > len(bare) else None


def _written(content: str) -> tuple[str, ...]:
    """The forms a template may write a message's content in: as it is, stripped, and the answer
    after its last </think> (Qwen3's turns before the last question drop the reasoning)."""
    answer = content.rsplit("</think>", 1)[-1].lstrip("\n") if "</think>" in content else None
    return (content, content.strip(), *([answer] if answer else []))


def _answer_spans(rendered: str, messages: Conversation, opening: str | None) -> Spans:
    """Where each assistant turn lies in the rendering, (start, end) in characters: from the end
    of the opening before its content (or the content's start) to the content's end, each message
    found in order after the ones before it."""
    spans, at = [], 0
    for number, message in enumerate(messages, start=1):
        for written in _written(message.content):
            found = rendered.find(written, at)
            if found >= 0:
                break
        else:
            raise ChatProblem(
                f"has message {number}, which its chat template does not write as given, so the "
                "tokens of the answers cannot be told"
            )
        if message.role == ANSWER:
            opened = rendered.rfind(opening, at, found) if opening else -1
            spans.append((found if opened < 0 else opened + len(opening), found + len(written)))
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

"""Chat documents: a conversation as a documents file holds it, in the `messages` form of chat
datasets, a list of {"role", "content"} objects, in place of a text.

A conversation is a list of one or more messages whose role is system, user or assistant and whose
content is a string, with at least one assistant turn: the turns a chat corpus trains on
(`zrodlo.data.chat_encoding`). Other fields of a message are dropped, as other fields of a line are.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

MESSAGES = "messages"  # the field (or table column) a chat document's conversation is in
ROLES = ("system", "user", "assistant")
ANSWER = "assistant"
NEEDS = (
    "messages is a list of objects with a role (system, user or assistant) and a string "
    "content, at least one of them the assistant's"
)


@dataclass(frozen=True)
class Message:
    role: str
    content: str

    def as_json(self) -> dict[str, str]:
        return {"role": self.role, "content": self.content}


Conversation = tuple[Message, ...]


def conversation_problem(messages: Any) -> str | None:
    """Why `messages` (parsed JSON) is not a conversation, the end of a sentence; None if it is."""
    if not isinstance(messages, list) or not messages:
        shown = json.dumps(messages, ensure_ascii=False)[:40]
        return f"has messages {shown}, not a non-empty list; {NEEDS}"
    for number, message in enumerate(messages, start=1):
        if not isinstance(message, dict) or not {"role", "content"} <= message.keys():
            return f"has message {number} without a role and a content; {NEEDS}"
        role, content = message["role"], message["content"]
        if role not in ROLES:
            shown = json.dumps(role, ensure_ascii=False)[:40]
            return f"has message {number} of role {shown}; {NEEDS}"
        if not isinstance(content, str):
            shown = json.dumps(content, ensure_ascii=False)[:40]
            return f"has message {number} of content {shown}, which is not a string; {NEEDS}"
    if not any(message["role"] == ANSWER for message in messages):
        return f"has no assistant turn, so nothing of it would be trained on; {NEEDS}"
    return None


def conversation(messages: list[dict[str, Any]]) -> Conversation:
    """The conversation of messages `conversation_problem` took."""
    return tuple(Message(message["role"], message["content"]) for message in messages)


def plain_text(messages: Conversation) -> str:
    """The conversation as one text, each message a line "role: content": what a tokenizer is
    fitted on and what the characters of a chat document count."""
    return "".join(f"{message.role}: {message.content}\n" for message in messages)


def chat_line(doc_id: str, messages: Conversation) -> bytes:
    """The JSONL line Zrodlo writes for a chat document (UTF-8, no trailing newline)."""
    value = {"id": doc_id, "messages": [message.as_json() for message in messages]}
    return json.dumps(value, ensure_ascii=False).encode("utf-8")

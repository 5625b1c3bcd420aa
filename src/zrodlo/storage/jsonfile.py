"""JSON as every reader of Zrodlo parses it: a value anyone may have written, held to limits.

`loads` is `json.loads` except that four things Python accepts, or dies on, are errors of the
document, raised as `json.JSONDecodeError` naming the line, so each reader's refusal says which
file and where: an object that repeats a key (Python keeps the last silently), an integer of more
than 4300 digits (Python raises a bare ValueError), nesting so deep that the parser runs out of
stack (a RecursionError), and a string escaping a lone surrogate, which is no text (Python keeps
it, and the first write of it as UTF-8 fails). Valid JSON parses at the speed of the standard parser; the position of
a problem is found by a second pass that runs only when there is one.
"""

from __future__ import annotations

import json
import re
from typing import Any

MAX_DIGITS = 4300  # Python's own limit on converting a decimal string to an int
MAX_DEPTH = 500  # well past anything Zrodlo writes, and within the parser's stack
# A \u escape of a surrogate not in a pair: where one appears, the parsed value is checked.
_LONE_SURROGATE = re.compile(
    r"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})"
    r"|(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2}"
)
_TOKEN = re.compile(
    r'"(?:[^"\\]|\\.)*"|-?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|[{}\[\]:,]|[^\s{}\[\]:,"]+'
)


class JSONLimit(json.JSONDecodeError):
    """A document that breaks one of the limits above; its message names the line."""

    def __init__(self, problem: str, document: str, position: int) -> None:
        super().__init__(problem, document, position)
        self.problem = problem  # without the line, for a reader that names the line itself
        self.msg = f"{problem} on line {self.lineno}"
        self.args = (self.msg,)


class _Found(Exception):
    def __init__(self, kind: str, detail: str = "") -> None:
        super().__init__(kind)
        self.kind, self.detail = kind, detail


def loads(data: str | bytes | memoryview, *, only_text: bool = True) -> Any:
    """Parse a JSON document; see the module docstring for what is refused beyond json.loads.
    `only_text=False` keeps lone surrogates, for a reader that refuses them naming the field."""
    text = data if isinstance(data, str) else str(data, "utf-8")
    try:
        value = json.loads(text, object_pairs_hook=_unique_keys, parse_int=_bounded_int)
        lone = _LONE_SURROGATE.search(text) if only_text else None
        if lone is None or _is_text(value):
            return value
        kind, position, detail = "surrogate", lone.start(), ""
    except _Found as found:
        kind = found.kind
        position, detail = _locate(text, kind)
    except RecursionError:
        kind = "deep"
        position, detail = _locate(text, kind)
    problem = {
        "duplicate": f"an object repeats the key {detail}",
        "digits": f"an integer has more than {MAX_DIGITS} digits",
        "deep": f"values nest more than {MAX_DEPTH} levels deep",
        "surrogate": "a string holds a lone surrogate, which is no text",
    }[kind]
    raise JSONLimit(problem, text, position) from None


def _is_text(value: Any) -> bool:
    """Whether every string of a parsed value (keys too) can be written as UTF-8."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    value = dict(pairs)
    if len(value) != len(pairs):
        raise _Found("duplicate")
    return value


def _bounded_int(digits: str) -> int:
    if len(digits.lstrip("-")) > MAX_DIGITS:
        raise _Found("digits")
    return int(digits)


def _locate(text: str, kind: str) -> tuple[int, str]:
    """Where the first problem of `kind` starts in `text`, and the key it concerns (duplicates).

    A pass over the tokens with a stack of open containers; an object's entry holds the keys seen
    and whether the next string is a key.
    """
    stack: list[list] = []  # [is_object, keys, expecting_key]
    for match in _TOKEN.finditer(text):
        token, at = match.group(), match.start()
        if token in "{[":
            stack.append([token == "{", set(), token == "{"])
            if kind == "deep" and len(stack) > MAX_DEPTH:
                return at, ""
        elif token in "}]":
            if stack:
                stack.pop()
        elif token == ",":
            if stack and stack[-1][0]:
                stack[-1][2] = True
        elif token == ":":
            continue
        elif stack and stack[-1][0] and stack[-1][2]:
            key = json.loads(token)
            if kind == "duplicate" and key in stack[-1][1]:
                return at, json.dumps(key)
            stack[-1][1].add(key)
            stack[-1][2] = False
        elif (
            kind == "digits" and token.lstrip("-").isdigit() and len(token.lstrip("-")) > MAX_DIGITS
        ):
            return at, ""
    return 0, ""

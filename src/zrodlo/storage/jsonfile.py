"""JSON as every reader of Zrodlo parses it: a value anyone may have written, held to limits.

`loads` is `json.loads` except that four things Python accepts, or dies on, are errors of the
document, raised as `json.JSONDecodeError` naming the line, so each reader's refusal says which
file and where: an object that repeats a key (Python keeps the last silently), an integer of more
than 4300 digits (Python raises a bare ValueError), nesting so deep that the parser runs out of
stack (a RecursionError), and a string escaping a lone surrogate, which is no text (Python keeps
it, and the first write of it as UTF-8 fails). Valid JSON parses at the speed of the standard parser; the position of
a problem is found by a second pass that runs only when there is one.

A fifth limit bounds memory: Python holds a parsed value in objects of tens of bytes each, so that
a file of empty lists takes 30 times its size. Before parsing, the document's containers, members,
strings and numbers are counted (one cheap pass over the bytes first; where its bound is too high,
a pass that tells strings from structure) and their cost is bounded from above by what CPython
allocates for each; a document whose values would take more than `MEMORY_MULTIPLE` times its size
(plus `MEMORY_SLACK`) is refused, as a `JSONLimit` that names no line. The bound runs up to twice
what the parse takes, so the multiple leaves room: tokenizer.json files shaped as released ones
(vocabularies and merges of 50,000 to 150,000 entries, written compact or indented) take 6 to 13
times their size, and the second pass bounds them at 9 to 21 times, the densest one (a million
merges of one-letter symbols) at 25; a file of empty lists takes 23 times and is bounded at 37. The cheap pass adds about a third to the parse of a documents line.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

import numpy as np

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


MEMORY_MULTIPLE = 28  # the most a document's parsed values may take, times its size in bytes
MEMORY_SLACK = 1 << 20  # and this much more, so that no small document is held to the multiple

# The bytes CPython 3.11 allocates for each part of a parsed value, at most (pymalloc rounds to
# 16): a list with its first four slots; an object's dict with its smallest table; a member's
# key-value tuple, its slot in the pairs list and its share of the dict's table and of the parser's
# memo of keys, while the dict is built from the pairs; an item's slot in its container; a number
# (an int of up to 19 digits, a float); a string's header, ASCII or not.
_LIST, _OBJECT, _MEMBER, _ITEM, _NUMBER, _ASCII_STRING, _STRING = 88, 200, 160, 10, 32, 56, 80
_STRING_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89abAB]")
_DIGITS_TO_ZERO = bytes.maketrans(b"123456789-", b"0000000000")
_NUMBER_STARTS = [bytes([before]) + b"0" for before in b"[,: \n\t\r"]  # a number follows these
_STEP = np.zeros(256, dtype=np.int8)  # a bracket's step in depth
_STEP[[ord("["), ord("{")]], _STEP[[ord("]"), ord("}")]] = 1, -1
_BELOW_C4, _BELOW_F0 = bytes(range(0xC4)), bytes(range(0xF0))  # lead bytes of U+0100, U+10000
_NOT_MARKS = bytes(byte for byte in range(256) if byte not in b'[{:,"')
# Past the most the first bound below counts for one byte: an object's brace with its item and a
# number (242), 4 for a string's width, 4 for the text's, 1 for a digit. A document shorter than
# the slack over this passes, whatever it holds.
_WORST = 256


class JSONLimit(json.JSONDecodeError):
    """A document that breaks one of the limits above; its message names the line, where the
    problem has one."""

    def __init__(self, problem: str, document: str, position: int | None) -> None:
        super().__init__(problem, document, position or 0)
        self.problem = problem  # without the line, for a reader that names the line itself
        self.msg = problem if position is None else f"{problem} on line {self.lineno}"
        self.args = (self.msg,)


class _Found(Exception):
    def __init__(self, kind: str, detail: str = "") -> None:
        super().__init__(kind)
        self.kind, self.detail = kind, detail


def loads(data: str | bytes | memoryview, *, only_text: bool = True) -> Any:
    """Parse a JSON document; see the module docstring for what is refused beyond json.loads.
    `only_text=False` keeps lone surrogates, for a reader that refuses them naming the field."""
    text = data if isinstance(data, str) else str(data, "utf-8")
    raw = text.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)
    held, nesting = _values_size(raw, text)
    if held > MEMORY_MULTIPLE * len(raw) + MEMORY_SLACK:
        if nesting <= MAX_DEPTH:
            problem = (
                f"its values would take up to {held / 1e6:,.0f} MB in memory, more than "
                f"{MEMORY_MULTIPLE} times its {len(raw) / 1e6:,.1f} MB"
            )
            raise JSONLimit(problem, text, None)
        kind = "deep"  # the more telling problem, which the parser would meet
        position, detail = _locate(text, kind)
    else:
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


def values_size(raw: bytes, text: str) -> int:
    """At most the bytes that parsing `text` (whose UTF-8 is `raw`) allocates, the text itself
    included: counts over the bytes where they suffice, strings told from structure where not."""
    return _values_size(raw, text)[0]


def _values_size(raw: bytes, text: str) -> tuple[int, int]:
    """`values_size`, and how deep the brackets outside strings nest (0 where not looked at)."""
    limit = MEMORY_MULTIPLE * len(raw) + MEMORY_SLACK
    if _WORST * len(raw) <= limit:  # too short to pass the limit whatever it holds
        return _WORST * len(raw), 0
    # One pass keeps the quotes, brackets, colons and commas, all taken for structure; every
    # string is taken as wide as any character can be, every item as a number.
    marks = raw.translate(None, _NOT_MARKS)
    lists, objects, quotes = marks.count(b"["), marks.count(b"{"), marks.count(b'"')
    items = marks.count(b",") + lists + objects + 1
    bound = (
        _LIST * lists + _OBJECT * objects + _MEMBER * marks.count(b":") + (_ITEM + _NUMBER) * items
        + len(raw) // 2 + _STRING * (quotes // 2) + (1 if raw.isascii() else 4) * len(raw)
        + sys.getsizeof(text)
    )  # fmt: skip
    del marks
    if bound <= limit:
        return bound, 0
    kind = 4 if raw.translate(None, _BELOW_F0) else 2 if raw.translate(None, _BELOW_C4) else 1
    if b"\\u" in raw:  # an escape may widen an ASCII string
        kind = 4 if _SURROGATE_ESCAPE.search(raw) else max(kind, 2)
    # The bytes between strings are gathered a few thousand strings at a time, and counted.
    strings, outside, between, last = 0, _Structure(), [], 0
    for match in _STRING_TOKEN.finditer(raw):
        token = match.group()
        if token.isascii() and b"\\u" not in token:
            strings += _ASCII_STRING + len(token) - 2
        else:
            strings += _STRING + kind * (len(token) - 2)
        between.append(raw[last : match.start()])
        last = match.end()
        if len(between) == 4096:
            outside.add(b"".join(between))
            between.clear()
    outside.add(b"".join([*between, raw[last:]]))
    return outside.size() + strings + sys.getsizeof(text), outside.deepest


class _Structure:
    """Counts of the bytes outside strings, and how deep their brackets nest, a part at a time."""

    def __init__(self) -> None:
        self.lists = self.objects = self.members = self.commas = self.numbers = self.digits = 0
        self.level = self.deepest = 0

    def add(self, part: bytes) -> None:
        self.lists += part.count(b"[")
        self.objects += part.count(b"{")
        self.members += part.count(b":")
        self.commas += part.count(b",")
        numeric = part.translate(_DIGITS_TO_ZERO)
        # A part starting with a digit is counted a number: more, never fewer, than there are.
        self.numbers += sum(map(numeric.count, _NUMBER_STARTS)) + numeric.startswith(b"0")
        self.digits += numeric.count(b"0")
        for start in range(0, len(part), 1 << 16):
            piece = np.frombuffer(part, np.uint8, min(1 << 16, len(part) - start), start)
            levels = np.cumsum(_STEP[piece], dtype=np.int32) + self.level  # (piece,)
            self.deepest = max(self.deepest, int(levels.max()))
            self.level = int(levels[-1])

    def size(self) -> int:
        """The most the containers, members, items and numbers counted allocate."""
        items = self.commas + self.lists + self.objects + 1
        return (
            _LIST * self.lists + _OBJECT * self.objects + _MEMBER * self.members + _ITEM * items
            + _NUMBER * self.numbers + self.digits // 2
        )  # fmt: skip


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

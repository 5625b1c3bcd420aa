"""The added tokens of a `tokenizers` file that Zrodlo imports: their ids are the ones the
library gives, a text that holds one decodes back, and no text encodes to a special token.

The library reads an added token's id from the file only where the vocabulary holds its text, and
otherwise gives it the next id after the vocabulary's, whatever the file says; Zrodlo reads the
frames' ids from the file, so the two must agree, or a corpus would hold ids that are not the
library's (past the vocabulary, or another token's). A non-special added token is found in a text
before the text is split, and decodes as it is written, so it must decode to its own text and must
not take in the whitespace beside it (lstrip, rstrip). Special tokens only frame documents: a text
that holds one's name is text (`encode_special_tokens`), and no text may encode to one's id.
"""

from __future__ import annotations

import json
from typing import Any

from tokenizers import Tokenizer

from zrodlo.data.tokenizer.base import LARGEST_VOCABULARY
from zrodlo.data.tokenizer.bpe_training import byte_symbols

AGREED = (
    "an added token's id is its text's in the vocabulary, or the next one after the vocabulary's"
)


def shown(text: str) -> str:
    """A token's text as a sentence quotes it: at most 40 characters, escaped."""
    return repr(text) if len(text) <= 40 else repr(text[:40]) + "..."


def _strip_problem(added: list[dict]) -> str | None:
    for token in added:
        for flag, side in (("lstrip", "before"), ("rstrip", "after")):
            if not token["special"] and token.get(flag):
                return (
                    f"its added token {shown(token['content'])} takes in the whitespace {side} it "
                    f"({flag}), so a text holding it would decode without that whitespace"
                )
    return None


def _id_problem(added: list[dict], vocabulary: dict[str, int], library: Tokenizer) -> str | None:
    token_of = {index: token for token, index in vocabulary.items()}
    for token in added:
        content, index = token["content"], token["id"]
        held = token_of.get(index)
        if held is not None and held != content:
            kind, harm = (
                ("special", "a text would encode to a frame")
                if token["special"]
                else ("added", "one id would stand for two texts")
            )
            return (
                f"its {kind} token {shown(content)} has id {index}, which its vocabulary gives "
                f"{shown(held)}, so {harm}"
            )
        given = library.token_to_id(content)
        if given != index:
            gives = "none" if given is None else f"id {given}"
            return (
                f"its added token {shown(content)} has id {index} in added_tokens, where the "
                f"tokenizers library gives it {gives}: {AGREED}"
            )
    return None


def _merged(merges: list) -> set[str]:
    """The tokens the merges make; a merge is a pair, or (older files) its two symbols and a space
    between them, which no byte symbol is."""
    return {"".join(merge.split(" ") if isinstance(merge, str) else merge) for merge in merges}


def _texts_reach(model: dict, library: Tokenizer, token: str, merged: set[str]) -> bool:
    """Whether the BPE `model` gives the vocabulary's `token` for some text: a byte's symbol, a
    token its merges make (`merged`), or, where the model takes a piece found whole in the
    vocabulary as it is (ignore_merges), a token the pre-tokenizer leaves as one piece of the text
    it spells."""
    symbols = byte_symbols()
    if token in symbols or token in merged:
        return True
    if not model.get("ignore_merges"):
        return False
    byte_of = {symbol: byte for byte, symbol in enumerate(symbols)}
    try:
        text = bytes(byte_of[symbol] for symbol in token).decode("utf-8")
    except UnicodeDecodeError:  # no text is those bytes
        return False
    pieces = library.pre_tokenizer.pre_tokenize_str(text)
    return [piece for piece, _ in pieces] == [token]


def added_tokens_problem(file: dict, library: Tokenizer, reach: Any = None) -> str | None:
    """Why the added tokens of the file `file`, which `library` loads, would give ids other than
    the library's, a text that does not decode back, or a frame for a text; or None. `reach` says
    whether a text encodes to a vocabulary's token (`_texts_reach`'s arguments), the byte-level
    BPE's rule where None."""
    reach = _texts_reach if reach is None else reach
    added = file.get("added_tokens") or []
    vocabulary = file["model"]["vocab"]
    problem = _strip_problem(added) or _id_problem(added, vocabulary, library)
    if problem is not None:
        return problem
    merged: set[str] | None = None  # made once, where a special token is in the vocabulary
    for token in added:
        content, index = token["content"], token["id"]
        if not token["special"]:
            decoded = library.decode([index], skip_special_tokens=False)
            if decoded != content:
                return (
                    f"its added token {shown(content)} decodes to {shown(decoded)}, so a text "
                    "holding it would not decode back"
                )
        elif content in vocabulary:
            merged = _merged(file["model"]["merges"]) if merged is None else merged
            if reach(file["model"], library, content, merged):
                return (
                    f"its special token {shown(content)} (id {index}) is a token texts encode "
                    "to, so a text would encode to a frame"
                )
    return None


def added_tokens_shape_problem(file: dict) -> str | None:
    """Why a parsed file's added tokens are not a list of ids, contents and special flags, or
    None."""
    added = file.get("added_tokens") or []
    if not isinstance(added, list) or not all(
        isinstance(token, dict)
        and type(token.get("id")) is int
        and 0 <= token["id"] < LARGEST_VOCABULARY
        and isinstance(token.get("content"), str)
        and isinstance(token.get("special"), bool)
        for token in added
    ):
        return "its added tokens are not a list of ids, contents and whether each is special"
    return None


def loaded_problem(file: dict, reach: Any = None) -> str | None:
    """Why the tokenizers library does not load a checked file, or its added tokens are not
    what Zrodlo can hold (`added_tokens_problem`, `reach` as there), or None."""
    try:
        library = Tokenizer.from_str(json.dumps(file))
    except Exception as error:  # the library's own sentence for what it cannot load
        return f"the tokenizers library does not load it: {error}"
    return added_tokens_problem(file, library, reach)

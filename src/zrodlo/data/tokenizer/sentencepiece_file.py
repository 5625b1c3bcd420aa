"""A SentencePiece-style BPE to import, as transformers converts a SentencePiece model to a
`tokenizers` file (Gemma's, Llama 2's, Mistral's, TinyLlama's): each space written as the word
mark ▁, a BPE over characters whose pieces hold the marks, byte fallback to the tokens
<0x00>..<0xFF> for what the pieces lack, and a decoder that turns marks back into spaces and byte
tokens into bytes. What makes a file one Zrodlo can take (`sentencepiece_problem`):

- the model: a BPE with byte fallback, every byte's token in its vocabulary (so no text reaches its
  unknown token), ids 0 to n-1, no dropout, no prefix or suffix on pieces;
- one of two released layouts, compared by their parts: Gemma's (the normalizer Replace(" ", "▁"),
  no pre-tokenizer or a Split on spaces, which then finds none; the decoder Replace("▁", " "),
  ByteFallback, Fuse) and Llama 2's (the normalizer Prepend("▁") then that Replace, no
  pre-tokenizer; the decoder's three and Strip, which takes the prepended space off);
- added tokens as the byte-level import takes them (`library_tokens.py`), and in Llama 2's layout
  none that is not special: the Prepend would put a mark before the text after each one, which
  would decode as a space the text did not have.

A text that holds the mark itself would decode with a space in its place, so it is refused where
it is encoded (`ImportedSentencePiece.text_problem`).
"""

from __future__ import annotations

from typing import Any

from tokenizers import Tokenizer

from zrodlo.data.tokenizer.base import LARGEST_VOCABULARY
from zrodlo.data.tokenizer.library_tokens import added_tokens_shape_problem, loaded_problem

MARK = "▁"  # U+2581, SentencePiece's word mark
BYTE_TOKENS = tuple(f"<0x{byte:02X}>" for byte in range(256))
_REPLACE_SPACE = {"type": "Replace", "pattern": {"String": " "}, "content": MARK}
_PREPEND = {"type": "Prepend", "prepend": MARK}
_SPLIT_SPACE = {"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious"}
_DECODED = [
    {"type": "Replace", "pattern": {"String": MARK}, "content": " "},
    {"type": "ByteFallback"},
    {"type": "Fuse"},
]
_STRIP = {"type": "Strip", "content": " ", "start": 1, "stop": 0}
# Each layout's normalizer, pre-tokenizers, decoder, and how many marks it puts before a text.
LAYOUTS = {
    "Gemma's": ([_REPLACE_SPACE], (None, _SPLIT_SPACE), _DECODED, 0),
    "Llama 2's": ([_PREPEND, _REPLACE_SPACE], (None,), [*_DECODED, _STRIP], 1),
}


def is_sentencepiece(file: Any) -> bool:
    """Whether a parsed `tokenizers` file is a BPE with byte fallback (SentencePiece's kind)."""
    model = file.get("model") if isinstance(file, dict) else None
    return (
        isinstance(model, dict) and model.get("type") == "BPE" and bool(model.get("byte_fallback"))
    )


def _parts(component: Any, kind: str) -> list | None:
    """A normalizer's or decoder's steps as a list (a Sequence's, or the one), each without the
    fields a released file may hold at their defaults (a Split's `invert` false)."""
    if component is None:
        return []
    if not isinstance(component, dict):
        return None
    steps = component.get(kind) if component.get("type") == "Sequence" else [component]
    if not isinstance(steps, list):
        return None
    return [_plain(step) for step in steps]


def _plain(step: Any) -> Any:
    if isinstance(step, dict) and step.get("type") == "Split" and step.get("invert") is False:
        return {key: value for key, value in step.items() if key != "invert"}
    return step


def layout_of(file: dict) -> str | None:
    """The name of the released layout (`LAYOUTS`) the file's parts are, or None."""
    normalizer = _parts(file.get("normalizer"), "normalizers")
    decoder = _parts(file.get("decoder"), "decoders")
    pre_tokenizer = _plain(file.get("pre_tokenizer"))
    for name, (normalized, pre_tokenizers, decoded, _) in LAYOUTS.items():
        if normalizer == normalized and pre_tokenizer in pre_tokenizers and decoder == decoded:
            return name
    return None


def marks_before(file: dict) -> int:
    """How many marks the file's layout puts before each text that is not empty."""
    return LAYOUTS[layout_of(file)][3]


def _vocabulary_problem(model: dict) -> str | None:
    vocabulary = model.get("vocab")
    if not isinstance(vocabulary, dict) or not all(
        isinstance(token, str) and type(index) is int and index >= 0
        for token, index in vocabulary.items()
    ):
        return "its vocabulary is not a table of tokens to ids"
    if not isinstance(model.get("merges"), list):
        return "its merges are not a list"
    if len(set(vocabulary.values())) != len(vocabulary):
        return "two tokens of its vocabulary share an id"
    if vocabulary and max(vocabulary.values()) >= LARGEST_VOCABULARY:
        return f"its ids reach past {LARGEST_VOCABULARY:,}, the most a Zrodlo vocabulary holds"
    missing = next((token for token in BYTE_TOKENS if token not in vocabulary), None)
    if missing is not None:
        return (
            f"its vocabulary lacks the byte token {missing}, so a text holding that byte would "
            "encode to its unknown token"
        )
    if max(vocabulary.values()) != len(vocabulary) - 1:
        held = set(vocabulary.values())
        gap = next(index for index in range(len(vocabulary)) if index not in held)
        return f"its vocabulary's ids are not 0 to {len(vocabulary) - 1}: no token has id {gap}"
    return None


def sentencepiece_problem(file: Any) -> str | None:
    """Why the parsed `tokenizers` file `file` is not a SentencePiece-style BPE Zrodlo can hold,
    or None."""
    if not is_sentencepiece(file):
        return "its model is not a BPE with byte fallback"
    model = file["model"]
    if model.get("dropout") not in (None, 0, 0.0):
        return "its BPE drops merges at random (dropout), so a text would encode more than one way"
    if model.get("continuing_subword_prefix") or model.get("end_of_word_suffix"):
        return "its model marks the pieces of words with a prefix or suffix"
    layout = layout_of(file)
    if layout is None:
        kinds = {
            part: (file.get(part) or {}).get("type") if isinstance(file.get(part), dict) else None
            for part in ("normalizer", "pre_tokenizer", "decoder")
        }
        return (
            f"its normalizer ({kinds['normalizer']}), pre-tokenizer ({kinds['pre_tokenizer']}) "
            f"and decoder ({kinds['decoder']}) are not Gemma's or Llama 2's layout, the "
            "SentencePiece-style layouts Zrodlo takes"
        )
    problem = _vocabulary_problem(model)
    if problem is not None:
        return problem
    problem = added_tokens_shape_problem(file)
    if problem is not None:
        return problem
    added = file.get("added_tokens") or []
    if marks_before(file):
        plain = next((token["content"] for token in added if not token["special"]), None)
        if plain is not None:
            return (
                f"its added token {plain!r} is not special, and {layout} layout puts a mark before "
                "the text after it, so a text holding it would decode with a space it did not have"
            )
    return loaded_problem(file, _texts_reach)


def _texts_reach(model: dict, library: Tokenizer, token: str, merged: set[str]) -> bool:
    """Whether the BPE `model` gives the vocabulary's `token` for some text: a single character
    (the pieces start as characters), a byte token, a token its merges make (`merged`), or, where
    the model takes a piece found whole in the vocabulary (ignore_merges), any token without a
    space (the normalizer leaves none in a piece)."""
    if len(token) == 1 or token in BYTE_TOKENS or token in merged:
        return True
    return bool(model.get("ignore_merges")) and " " not in token

"""The pre-tokenizers of a `tokenizers` file that Zrodlo imports: those of the GPT-2 family whose
behaviour is known, each compared field by field, and no other.

A pre-tokenizer decides the pieces a text is cut into before BPE, and a Split runs whatever
regular expression the file holds: a stranger's pattern may take hours on one document (the
library's regex engine backtracks, then panics), or drop the text it matches. So a file is taken
only where its pre-tokenizer is one of

    GPT-2     ByteLevel with its own regex (use_regex true, or absent: the library's default)
    SmolLM    Digits, each digit a piece, then GPT-2's
    Llama 3   Split by Llama 3's pattern, Isolated, not inverted, then ByteLevel without a regex
    Qwen2     the same with Qwen2's pattern

none adding a prefix space; trim_offsets moves the offsets of pieces only, never their ids.
"""

from __future__ import annotations

from typing import Any

# The Split pattern of Meta's Llama 3 tokenizer.json (meta-llama/Meta-Llama-3-8B), as released.
LLAMA3_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
# The Split pattern of Qwen2's tokenizer.json (Qwen/Qwen2-7B), as released: one digit a piece.
QWEN2_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
RELEASED_PATTERNS = (LLAMA3_PATTERN, QWEN2_PATTERN)
# The first step of SmolLM's tokenizer.json (HuggingFaceTB/SmolLM-135M), before GPT-2's ByteLevel.
SMOLLM_DIGITS = {"type": "Digits", "individual_digits": True}

KNOWN = (
    "GPT-2's ByteLevel split (alone, or after SmolLM's Digits), or Llama 3's or Qwen2's Split "
    "before ByteLevel"
)
STRANGE_SPLIT = (
    "its pre-tokenizer's Split is not Llama 3's or Qwen2's as released (their pattern, Isolated, "
    "not inverted), and Zrodlo runs no other: another pattern may drop text, or take hours on one "
    "document"
)
UNKNOWN_FORM = (
    "its pre-tokenizer is not GPT-2's ByteLevel split (alone, or after SmolLM's Digits), nor "
    "Llama 3's or Qwen2's Split before ByteLevel, the pre-tokenizers Zrodlo knows to keep every "
    "text"
)
# The step kinds a known pre-tokenizer is made of; any other is named in its refusal.
STEP_KINDS = ("ByteLevel", "Digits", "Split")


def steps_of(pre_tokenizer: Any) -> list[Any]:
    """A pre-tokenizer's steps: those of a Sequence, or the one."""
    if not isinstance(pre_tokenizer, dict):
        return []
    if pre_tokenizer.get("type") == "Sequence":
        steps = pre_tokenizer.get("pretokenizers")
        return steps if isinstance(steps, list) else []
    return [pre_tokenizer]


def _byte_level(step: Any, use_regex: bool) -> bool:
    """Whether `step` is ByteLevel without a prefix space, with GPT-2's regex or without one."""
    if not isinstance(step, dict) or not isinstance(step.get("trim_offsets"), bool):
        return False
    expected = {
        "type": "ByteLevel",
        "add_prefix_space": False,
        "trim_offsets": step["trim_offsets"],
        "use_regex": use_regex,
    }
    if use_regex and "use_regex" not in step:  # GPT-2's files from before the field was written
        del expected["use_regex"]
    return step == expected


def _released_split(step: Any) -> bool:
    """Whether `step` is Llama 3's or Qwen2's Split, every field as released."""
    pattern = step.get("pattern") if isinstance(step, dict) else None
    regex = pattern.get("Regex") if isinstance(pattern, dict) else None
    return regex in RELEASED_PATTERNS and step == {
        "type": "Split",
        "pattern": {"Regex": regex},
        "behavior": "Isolated",
        "invert": False,
    }


def is_gpt2_split(pre_tokenizer: Any) -> bool:
    """Whether the pre-tokenizer is GPT-2's: ByteLevel alone, with its regex."""
    return _byte_level(pre_tokenizer, use_regex=True)


def _kind(step: Any) -> Any:
    return step.get("type") if isinstance(step, dict) else None


def pre_tokenizer_problem(pre_tokenizer: Any) -> str | None:
    """Why a file's pre-tokenizer is not one Zrodlo knows to keep every text, or None."""
    steps = steps_of(pre_tokenizer)
    byte_levels = [step for step in steps if _kind(step) == "ByteLevel"]
    if not byte_levels:
        return "its pre-tokenizer has no ByteLevel step, so its tokens are not bytes"
    if any(step.get("add_prefix_space") for step in byte_levels):
        return "its pre-tokenizer adds a space before each text, which decoding would keep"
    if is_gpt2_split(pre_tokenizer):
        return None
    if sorted(pre_tokenizer) == ["pretokenizers", "type"] and len(steps) == 2:  # a Sequence
        first, second = steps
        if first == SMOLLM_DIGITS and _byte_level(second, use_regex=True):
            return None
        if _released_split(first) and _byte_level(second, use_regex=False):
            return None
    other = next((_kind(step) for step in steps if _kind(step) not in STEP_KINDS), None)
    if isinstance(other, str) and other.isalnum() and len(other) <= 40:
        return (
            f"its pre-tokenizer holds a {other} step; Zrodlo takes {KNOWN}, the pre-tokenizers it "
            "knows to keep every text"
        )
    if any(_kind(step) == "Split" and not _released_split(step) for step in steps):
        return STRANGE_SPLIT
    return UNKNOWN_FORM

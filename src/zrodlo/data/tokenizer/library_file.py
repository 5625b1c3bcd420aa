"""A `tokenizers` file to import (`zrodlo tokenizer import`): what makes a file one Zrodlo can take
(`check_library_file`), reading it, and which of its tokens frame a document.

BOS and EOS are the tokens `--bos` and `--eos` name; else those the transformers
tokenizer_config.json beside the file names; else the file's one special token, for both (GPT-2's
`<|endoftext|>`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from zrodlo.data.tokenizer.base import LARGEST_VOCABULARY
from zrodlo.data.tokenizer.bpe_training import byte_symbols
from zrodlo.data.tokenizer.library_pretokenizer import pre_tokenizer_problem
from zrodlo.data.tokenizer.library_tokens import added_tokens_shape_problem, loaded_problem
from zrodlo.storage import jsonfile
from zrodlo.storage.inputs import read_input
from zrodlo.storage.refusal import Refusal

CONFIG_FILE = "tokenizer_config.json"  # transformers' file beside tokenizer.json
# The settings of an encoding call, not of the tokenizer: dropped on import.
CALL_SETTINGS = ("padding", "truncation")
# Qwen2's normalizer: each text put in Unicode's normalization form C, which leaves a text already
# in it as it is (most text is); a text that is not is refused where it is encoded
# (`Tokenizer.text_problem`), so every text encoded still comes back.
NFC = {"type": "NFC"}


def _vocabulary_problem(model: dict) -> str | None:
    vocabulary, merges = model.get("vocab"), model.get("merges")
    if not isinstance(vocabulary, dict) or not all(
        isinstance(token, str) and type(index) is int and index >= 0
        for token, index in vocabulary.items()
    ):
        return "its vocabulary is not a table of tokens to ids"
    if not isinstance(merges, list):
        return "its merges are not a list"
    if len(set(vocabulary.values())) != len(vocabulary):
        return "two tokens of its vocabulary share an id"
    if vocabulary and max(vocabulary.values()) >= LARGEST_VOCABULARY:
        return f"its ids reach past {LARGEST_VOCABULARY:,}, the most a Zrodlo vocabulary holds"
    symbols = byte_symbols()
    for byte, symbol in enumerate(symbols):
        if symbol not in vocabulary:
            return (
                f"its vocabulary lacks the symbol of byte 0x{byte:02x} ({symbol!r}), so a text "
                "holding that byte would not encode"
            )
    known = set(symbols)
    for token in vocabulary:
        if not token or not set(token) <= known:
            return f"its token {token!r} is not written in byte symbols"
    if max(vocabulary.values()) != len(vocabulary) - 1:
        # Added tokens take the ids after the vocabulary's, which must then run from 0 unbroken.
        held = set(vocabulary.values())
        missing = next(index for index in range(len(vocabulary)) if index not in held)
        return f"its vocabulary's ids are not 0 to {len(vocabulary) - 1}: no token has id {missing}"
    return None


def check_library_file(file: Any) -> str | None:
    """Why the parsed `tokenizers` file `file` is not a byte-level BPE Zrodlo can hold, or None."""
    if not isinstance(file, dict) or not isinstance(file.get("model"), dict):
        return "it holds no tokenizer model"
    model = file["model"]
    if model.get("type") != "BPE":
        return f"its model is {model.get('type')}, not a byte-level BPE"
    problem = pre_tokenizer_problem(file.get("pre_tokenizer"))
    if problem is not None:
        return problem
    decoder = file.get("decoder")
    if not isinstance(decoder, dict) or decoder.get("type") != "ByteLevel":
        return "its decoder is not ByteLevel, so its tokens would not decode to the text's bytes"
    normalizer = file.get("normalizer")
    if normalizer is not None and normalizer != NFC:
        kind = normalizer.get("type") if isinstance(normalizer, dict) else None
        return (
            f"it normalizes each text ({kind}), and a corpus keeps a text as it is; the one "
            "normalizer Zrodlo takes is NFC alone, which leaves a text in NFC as it is"
        )
    if model.get("dropout") not in (None, 0, 0.0):
        return "its BPE drops merges at random (dropout), so a text would encode more than one way"
    if model.get("continuing_subword_prefix") or model.get("end_of_word_suffix"):
        return "its model marks the pieces of words with a prefix or suffix"
    problem = _vocabulary_problem(model)
    if problem is not None:
        return problem
    return added_tokens_shape_problem(file) or loaded_problem(file)


def special_ids(file: dict) -> set[int]:
    """The ids of a file's special tokens."""
    return {token["id"] for token in file.get("added_tokens") or [] if token["special"]}


def _special_by_name(file: dict) -> dict[str, int]:
    return {
        token["content"]: token["id"]
        for token in file.get("added_tokens") or []
        if token["special"]
    }


def _configured(source: Path, role: str) -> str | None:
    """The token transformers' tokenizer_config.json beside `source` names for `role`."""
    config_file = source.parent / CONFIG_FILE
    if not config_file.is_file():
        return None
    try:
        config = jsonfile.loads(read_input(config_file))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise Refusal(
            f"{config_file} does not load as a tokenizer configuration: {error}"
        ) from None
    token = config.get(role) if isinstance(config, dict) else None
    if isinstance(token, dict):  # transformers also writes an added token whole
        token = token.get("content")
    return token if isinstance(token, str) else None


def frame_id(source: Path, file: dict, flag: str, given: str | None) -> int:
    """The id of the special token that starts (--bos) or ends (--eos) each document."""
    names = _special_by_name(file)
    role = "bos_token" if flag == "--bos" else "eos_token"
    chosen = given if given is not None else _configured(source, role)
    if chosen is None and flag == "--bos":
        # A model with no BOS (Qwen2.5) separates its documents with its EOS: each starts with it
        # too, as GPT-2's do.
        chosen = _configured(source, "eos_token")
    if chosen is None:
        if len(names) == 1:
            return next(iter(names.values()))
        listed = ", ".join(sorted(names)) or "none"
        beside = (source.parent / CONFIG_FILE).is_file()
        config = f"its {CONFIG_FILE} names none" if beside else f"no {CONFIG_FILE} beside it"
        raise Refusal(
            f"{source} names no token to {'start' if flag == '--bos' else 'end'} each document "
            f"({config}, and its special tokens are {listed}); name it with {flag}"
        )
    if chosen not in names:
        raise Refusal(
            f"{flag} {chosen} is no special token of {source}; a document is framed by tokens no "
            "text encodes to"
        )
    return names[chosen]


def read_library_file(source: Path) -> Any:
    """The parsed `tokenizers` file `source`, refused with a sentence where it holds no BPE; the
    kind it is imported as checks the rest."""
    if not source.is_file():
        raise Refusal(
            f"{source} is not a file; --from takes a tokenizer.json the tokenizers library wrote"
        )
    try:
        file = jsonfile.loads(read_input(source))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise Refusal(f"{source} does not load as a tokenizers file: {error}") from None
    model = file.get("model") if isinstance(file, dict) else None
    if isinstance(model, dict) and model.get("type") != "BPE":
        raise Refusal(
            f"{source} holds a {model.get('type')} tokenizer; Zrodlo imports BPE tokenizers only: "
            "byte-level (the GPT-2 family's tokenizer.json) or SentencePiece-style with byte "
            "fallback (Gemma's, Llama 2's)"
        )
    if not isinstance(file, dict):
        return file  # no tokenizer: refused by the kind's check
    return {key: value for key, value in file.items() if key not in CALL_SETTINGS}

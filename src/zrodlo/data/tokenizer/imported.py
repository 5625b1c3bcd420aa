"""A byte-level BPE the user already has: a `tokenizers` file of the GPT-2 family (GPT-2, Llama 3,
SmolLM, ...), kept with its own ids and encoded by the library exactly as the file says.

Zrodlo's tokenizer.json of kind "imported-bpe" holds the file's JSON whole (less the padding and
truncation settings, which belong to a call and would cut documents), the ids of the tokens that
frame each document as BOS and EOS, and the digest of both. Only files whose every text encodes
and decodes back are taken: a BPE model over the 256 byte symbols, one of the GPT-2 family's
released pre-tokenizers (`library_pretokenizer.py`), the byte-level decoder, no dropout, added
tokens that decode to their own text under the ids the library gives them (`library_tokens.py`),
and no normalizer but Qwen2's NFC, which leaves a text in NFC as it is: a text in another form is
refused where it is encoded (`Tokenizer.text_problem`). A text that holds the name of a special token is text: special tokens only
frame documents, and no text encodes to one. A file whose import would be larger than a command
reads as a tokenizer.json is refused before anything is written. The chat template the files
carry is kept (`chat_template.py`) and covered by the digest: chat documents are rendered by it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
from tokenizers import Tokenizer

from zrodlo.data.tokenizer.base import FILE_NAME
from zrodlo.data.tokenizer.bpe_training import byte_symbols
from zrodlo.data.tokenizer.chat_template import ChatTemplate, chat_template
from zrodlo.data.tokenizer.library_encoding import LibraryEncoding
from zrodlo.data.tokenizer.library_file import (
    NFC,
    check_library_file,
    frame_id,
    read_library_file,
    special_ids,
)
from zrodlo.data.tokenizer.library_pretokenizer import is_gpt2_split
from zrodlo.storage.digest import json_text
from zrodlo.storage.inputs import SMALL_FILE
from zrodlo.storage.outputs import check_new_directory, new_directory
from zrodlo.storage.refusal import Refusal

KIND = "imported-bpe"


@dataclass(frozen=True)
class ImportedBPE(LibraryEncoding):
    """The library file's JSON text (`source`, keys sorted), the ids framing each document, and
    the chat template its files carry, if any."""

    source: str
    bos: int
    eos: int
    template: ChatTemplate | None = None

    kind = KIND
    unk = None
    # Why a parsed `tokenizers` file is none of this kind, or None.
    file_problem = staticmethod(check_library_file)

    @cached_property
    def file(self) -> dict[str, Any]:
        return json.loads(self.source)

    @cached_property
    def library(self) -> Tokenizer:
        built = Tokenizer.from_str(self.source)
        built.encode_special_tokens = True  # the name of a special token in a text is text
        return built

    @cached_property
    def normal_form(self) -> str | None:  # type: ignore[override]
        """NFC for a file that puts each text in it (Qwen2's), else None: the only normalizer
        taken (`check_library_file`)."""
        return "NFC" if self.file.get("normalizer") == NFC else None

    @cached_property
    def splits_at_lines(self) -> bool:  # type: ignore[override]
        """Whether the pre-tokenizer is GPT-2's split alone, which a long text may be cut by."""
        return is_gpt2_split(self.file["pre_tokenizer"])

    @cached_property
    def kept_whole(self) -> tuple[str, ...]:  # type: ignore[override]
        """The texts of the non-special added tokens, which the library finds in a whole text
        before it splits it: a long text is never cut inside one."""
        return tuple(
            added["content"]
            for added in self.file.get("added_tokens") or []
            if not added["special"]
        )

    @cached_property
    def vocab_size(self) -> int:
        """One past the largest id: the file's ids are the library's (`check_library_file`), so
        this is known without building the library."""
        added = [token["id"] for token in self.file.get("added_tokens") or []]
        return max([*self.file["model"]["vocab"].values(), *added]) + 1

    @cached_property
    def text_sizes(self) -> np.ndarray:
        """(2, V) int64: each token's UTF-8 bytes and the characters they start; special tokens
        hold none, an added token its text."""
        byte_of = {symbol: byte for byte, symbol in enumerate(byte_symbols())}
        sizes = np.zeros((2, self.vocab_size), dtype=np.int64)
        for token, index in self.file["model"]["vocab"].items():
            raw = bytes(byte_of[symbol] for symbol in token)
            sizes[:, index] = len(raw), sum(byte & 0xC0 != 0x80 for byte in raw)
        for added in self.file.get("added_tokens") or []:
            text = b"" if added["special"] else added["content"].encode("utf-8")
            sizes[:, added["id"]] = len(text), len(text.decode("utf-8"))
        return sizes

    def canonical(self) -> dict[str, Any]:
        """The content the digest is taken over; a tokenizer without a chat template has the
        digest it had before templates were kept."""
        chat = {} if self.template is None else {"chat": self.template.canonical()}
        return {"kind": self.kind, "special": self.special, "tokenizer": self.file, **chat}

    @cached_property
    def written(self) -> bytes:
        """The bytes of the tokenizer.json `save` writes, made once: measured before writing."""
        return json_text(self.document())

    def save(self, directory: Path) -> None:
        (directory / FILE_NAME).write_bytes(self.written)

    @property
    def special(self) -> dict[str, int]:
        return {"BOS": self.bos, "EOS": self.eos}

    @classmethod
    def from_document(cls, data: dict[str, Any], broken: Any) -> ImportedBPE:
        """The tokenizer a parsed tokenizer.json of kind "imported-bpe" holds; `broken(reason)` is
        the refusal for a file that holds none."""
        special, file = data.get("special"), data.get("tokenizer")
        if not isinstance(special, dict) or sorted(special) != ["BOS", "EOS"]:
            raise broken("its special ids are not BOS and EOS")
        problem = cls.file_problem(file)
        if problem is not None:
            raise broken(problem)
        template = None
        if "chat" in data:
            template = ChatTemplate.from_canonical(data["chat"])
            if template is None:
                raise broken("its chat entry is not a template and its named tokens")
        tokenizer = cls(json.dumps(file, sort_keys=True), special["BOS"], special["EOS"], template)
        if not {special["BOS"], special["EOS"]} <= special_ids(file):
            raise broken("its BOS and EOS are not special tokens of its tokenizer")
        return tokenizer


def _kind_of(file: dict) -> type[ImportedBPE]:
    """The kind a parsed `tokenizers` file imports as: a SentencePiece-style BPE where its model
    falls back to bytes, else a byte-level BPE (each kind's check then says what it lacks)."""
    # Imported here: that kind is built on this module's.
    from zrodlo.data.tokenizer.imported_sentencepiece import ImportedSentencePiece
    from zrodlo.data.tokenizer.sentencepiece_file import is_sentencepiece

    return ImportedSentencePiece if is_sentencepiece(file) else ImportedBPE


def imported(source: Path, bos: str | None = None, eos: str | None = None) -> ImportedBPE:
    """The `tokenizers` file `source` as Zrodlo's tokenizer, its ids as they are, documents framed
    by the special tokens `bos` and `eos` (`zrodlo.data.tokenizer.library_file` says how they
    are found where not given); refused where its tokenizer.json would be larger than the readers
    of one take, which written indented may be five times the file's size."""
    file = read_library_file(source)
    kind = _kind_of(file)
    problem = kind.file_problem(file)
    if problem is not None:
        raise Refusal(f"{source} cannot be imported: {problem}")
    tokenizer = kind(
        json.dumps(file, sort_keys=True),
        frame_id(source, file, "--bos", bos),
        frame_id(source, file, "--eos", eos),
        chat_template(source),
    )
    if len(tokenizer.written) > SMALL_FILE:
        raise Refusal(
            f"{source} cannot be imported: Zrodlo's tokenizer.json of it would hold more than the "
            f"{SMALL_FILE} bytes a tokenizer file may hold, so no command could read it"
        )
    return tokenizer


def import_tokenizer(
    source: Path, output: Path, bos: str | None = None, eos: str | None = None
) -> ImportedBPE:
    """Import the `tokenizers` file `source` into the new tokenizer directory `output`."""
    check_new_directory(output)
    tokenizer = imported(source, bos, eos)
    with new_directory(output) as partial:
        tokenizer.save(partial)
    return tokenizer

"""Tokenizer files as the `tokenizers` library writes them, trained by its own trainers on a few
texts: the GPT-2 family's byte-level BPE (GPT-2's, Llama 3's and Qwen2's layouts), the
SentencePiece-style BPE with byte fallback (Gemma's and Llama 2's layouts), and kinds Zrodlo does
not import (WordPiece, Unigram, WordLevel, a SentencePiece-style BPE without byte tokens)."""

from __future__ import annotations

import json
from pathlib import Path

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

TEXTS = [
    "the quick brown fox jumps over the lazy dog\n",
    "def main():\n    return 42  # the answer\n",
    "Zażółć gęślą jaźń, naïve café 東京 🙂\n",
] * 20
# Llama 3's split: contractions, letters, up to three digits, punctuation with its line breaks.
LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
# Qwen2's split: Llama 3's, but one digit a piece.
QWEN2_SPLIT = LLAMA3_SPLIT.replace(r"\p{N}{1,3}", r"\p{N}")
QWEN2_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def _byte_level(built: Tokenizer, specials: list[str], vocab_size: int) -> Tokenizer:
    built.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    built.train_from_iterator(TEXTS, trainer)
    return built


def gpt2_file(path: Path, vocab_size: int = 400) -> Path:
    """GPT-2's layout: the ByteLevel pre-tokenizer with its regex, one special token."""
    built = Tokenizer(models.BPE())
    built.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    _byte_level(built, ["<|endoftext|>"], vocab_size).save(str(path))
    return path


def llama3_file(path: Path, vocab_size: int = 400) -> Path:
    """Llama 3's layout: its own split, then ByteLevel without a regex; two special tokens, named
    in a tokenizer_config.json beside the file as transformers writes one."""
    built = Tokenizer(models.BPE(ignore_merges=True))
    built.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(LLAMA3_SPLIT), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    specials = ["<|begin_of_text|>", "<|end_of_text|>"]
    _byte_level(built, specials, vocab_size).save(str(path))
    config = {"bos_token": specials[0], "eos_token": {"content": specials[1], "special": True}}
    (path.parent / "tokenizer_config.json").write_text(json.dumps(config))
    return path


def qwen2_file(path: Path, vocab_size: int = 400) -> Path:
    """Qwen2's layout: each text put in Unicode's NFC, its own split, then ByteLevel without a
    regex or offsets trimmed; three special tokens after the vocabulary's ids and no
    tokenizer_config.json, so documents are framed by the tokens an import names."""
    built = Tokenizer(models.BPE())
    built.normalizer = normalizers.NFC()
    built.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
        ]
    )
    _byte_level(built, [], vocab_size)
    built.add_special_tokens(QWEN2_SPECIALS)
    built.save(str(path))
    return path


def _sentencepiece(
    built: Tokenizer, specials: list[str], added: list[str], vocab_size: int, path: Path
) -> Path:
    """The BPE `built` (its normalizer, pre-tokenizer and decoder set) trained on TEXTS, written
    as a SentencePiece model converted by transformers lays it out: the special tokens first, then
    the 256 byte tokens <0x00>..<0xFF> that byte fallback reads, then the pieces; `added` as
    added tokens that are not special, after them."""
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, show_progress=False)
    built.train_from_iterator(TEXTS, trainer)
    data = json.loads(built.to_str())
    pieces = sorted(data["model"]["vocab"], key=data["model"]["vocab"].get)
    order = [*specials, *(f"<0x{byte:02X}>" for byte in range(256)), *pieces]
    data["model"]["vocab"] = {token: index for index, token in enumerate(order)}
    data["model"] |= {"byte_fallback": True, "fuse_unk": True, "unk_token": "<unk>"}
    data["added_tokens"] = [
        {"id": order.index(token), "content": token, "single_word": False, "lstrip": False,
         "rstrip": False, "normalized": False, "special": True}
        for token in specials
    ] + [
        {"id": len(order) + i, "content": token, "single_word": False, "lstrip": False,
         "rstrip": False, "normalized": False, "special": False}
        for i, token in enumerate(added)
    ]  # fmt: skip
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


_SPACE_TO_MARK = normalizers.Replace(" ", "▁")
_MARKS_DECODED = [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()]


def gemma_file(path: Path, vocab_size: int = 300) -> Path:
    """Gemma's layout: spaces replaced by ▁, a split on spaces (which then finds none), pad, eos,
    bos and unk first, the turn markers special, and added tokens matched before the model;
    tokenizer_config.json naming <bos> and <eos>."""
    built = Tokenizer(models.BPE(byte_fallback=True))
    built.normalizer = _SPACE_TO_MARK
    built.pre_tokenizer = pre_tokenizers.Split(" ", behavior="merged_with_previous")
    built.decoder = decoders.Sequence(_MARKS_DECODED)
    specials = ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>"]
    _sentencepiece(built, specials, ["<unused0>", "<unused1>", "\n\n"], vocab_size, path)
    config = {"bos_token": "<bos>", "eos_token": "<eos>"}
    (path.parent / "tokenizer_config.json").write_text(json.dumps(config))
    return path


def llama2_file(path: Path, vocab_size: int = 300) -> Path:
    """Llama 2's layout (Mistral's, TinyLlama's): ▁ put before each text and for each space, no
    pre-tokenizer, the decoder stripping the first space; unk, <s> and </s> first."""
    built = Tokenizer(models.BPE(byte_fallback=True))
    built.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), _SPACE_TO_MARK])
    built.decoder = decoders.Sequence([*_MARKS_DECODED, decoders.Strip(" ", 1, 0)])
    _sentencepiece(built, ["<unk>", "<s>", "</s>"], [], vocab_size, path)
    config = {"bos_token": "<s>", "eos_token": "</s>"}
    (path.parent / "tokenizer_config.json").write_text(json.dumps(config))
    return path


def other_file(path: Path, kind: str) -> Path:
    """A tokenizer Zrodlo does not import: WordPiece, Unigram, WordLevel, or BPE over
    SentencePiece's word markers (Llama 2's kind)."""
    if kind == "WordPiece":
        built = Tokenizer(models.WordPiece(unk_token="[UNK]"))
        trainer = trainers.WordPieceTrainer(special_tokens=["[UNK]"], show_progress=False)
    elif kind == "Unigram":
        built = Tokenizer(models.Unigram())
        trainer = trainers.UnigramTrainer(
            vocab_size=100, special_tokens=["<unk>"], unk_token="<unk>", show_progress=False
        )
    elif kind == "WordLevel":
        built = Tokenizer(models.WordLevel(unk_token="[UNK]"))
        trainer = trainers.WordLevelTrainer(special_tokens=["[UNK]"], show_progress=False)
    else:
        built = Tokenizer(models.BPE(byte_fallback=True))
        built.normalizer = normalizers.Sequence(
            [normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")]
        )
        built.decoder = decoders.Metaspace()
        trainer = trainers.BpeTrainer(special_tokens=["<s>", "</s>"], show_progress=False)
    if kind != "SentencePiece":
        built.pre_tokenizer = pre_tokenizers.Whitespace()
    built.train_from_iterator(TEXTS, trainer)
    built.save(str(path))
    return path


def edited(path: Path, change) -> Path:
    """The file at `path` with `change(parsed)` applied, written back."""
    data = json.loads(path.read_text(encoding="utf-8"))
    change(data)
    path.write_text(json.dumps(data), encoding="utf-8")
    return path

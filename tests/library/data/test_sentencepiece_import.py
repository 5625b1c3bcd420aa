"""Importing a SentencePiece-style BPE (Gemma's layout, and Llama 2's, which Mistral and
TinyLlama share) as the tokenizers library wrote it: its own ids, encoding as the library does on
any text (runs of spaces, characters the pieces lack that fall back to bytes, added tokens inside
words), decoding back, text sizes that count the text's own bytes, and the refusal of every file
or text it could not hold, writing nothing."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from library_tokenizers import edited, gemma_file, llama2_file
from tokenizers import Tokenizer

from zrodlo.data.text_size import scored_text
from zrodlo.data.tokenizer import load_tokenizer
from zrodlo.data.tokenizer.imported import import_tokenizer
from zrodlo.data.tokenizer.imported_sentencepiece import ImportedSentencePiece
from zrodlo.data.tokenizer.sentencepiece_file import MARK
from zrodlo.data.windows import build_windows
from zrodlo.storage.refusal import Refusal

# Any text but the word mark, which no such tokenizer gives back (refused below): spaces in runs,
# letters of scripts the pieces never saw, and Gemma's added tokens inside words.
PIECES = st.one_of(
    st.characters(exclude_categories=["Cs"], exclude_characters=[MARK]),
    st.sampled_from([" ", "  ", "\n", "\t", "<unused0>", "<unused1>", "\n\n", "<bos>", "é"]),
)
ANY_TEXT = st.lists(PIECES, max_size=30).map("".join)
LAYOUTS = {"gemma": gemma_file, "llama2": llama2_file}


@pytest.fixture(scope="module")
def imported(tmp_path_factory) -> dict[str, tuple[ImportedSentencePiece, Tokenizer]]:
    """Each layout imported (and read back from its tokenizer.json), beside the library's own
    tokenizer loaded from the file."""
    found = {}
    for name, write in LAYOUTS.items():
        root = tmp_path_factory.mktemp(name)
        source = write(root / "tokenizer.json")
        import_tokenizer(source, root / "imported")
        library = Tokenizer.from_file(str(source))
        library.encode_special_tokens = True  # as the import reads a special token's name: text
        found[name] = (load_tokenizer(root / "imported"), library)
    return found


def test_each_layout_imports_as_its_kind_framed_by_its_configuration(imported):
    gemma, library = imported["gemma"]
    assert isinstance(gemma, ImportedSentencePiece) and gemma.kind == "imported-sentencepiece"
    assert (gemma.bos, gemma.eos) == (library.token_to_id("<bos>"), library.token_to_id("<eos>"))
    assert gemma.vocab_size == library.get_vocab_size(with_added_tokens=True)
    llama2, library = imported["llama2"]
    assert (llama2.bos, llama2.eos) == (library.token_to_id("<s>"), library.token_to_id("</s>"))
    assert (gemma.marks_before, llama2.marks_before) == (0, 1)


@settings(max_examples=200, deadline=None)
@given(ANY_TEXT)
def test_any_text_encodes_as_the_library_does_and_decodes_back(imported, text):
    for name, (tokenizer, library) in imported.items():
        if name == "llama2":  # no added tokens that are not special in this layout
            text = text.replace("<unused0>", "").replace("<unused1>", "")
        ids = tokenizer.encode(text).tolist()
        assert ids == library.encode(text, add_special_tokens=False).ids
        assert tokenizer.decode(ids) == text
        assert tokenizer.text_problem(text) is None
        # Every byte of the text is counted once, and the marks put before it not at all.
        marks = tokenizer.marks_before if text else 0
        assert int(tokenizer.text_sizes[0, ids].sum()) - marks == len(text.encode("utf-8"))
        assert int(tokenizer.text_sizes[1, ids].sum()) - marks == len(text)


@settings(max_examples=100, deadline=None)
@given(st.lists(ANY_TEXT, min_size=1, max_size=5), st.integers(2, 12))
def test_every_window_scored_counts_the_documents_text_once(imported, texts, context):
    """Bits per byte count the text's UTF-8 bytes: a mark a layout puts before each document is
    taken off where the window holds that document's start, and nowhere else."""
    for tokenizer, _ in imported.values():
        texts = [t.replace("<unused0>", "").replace("<unused1>", "") for t in texts]
        tokens, sizes = tokenizer.encode_documents(texts, np.uint32)
        offsets = np.concatenate([[0], np.cumsum(sizes)])
        table = build_windows(offsets, min(context, len(tokens)))
        windows = np.arange(len(table), dtype=np.int64)
        expected = (sum(len(t.encode()) for t in texts), sum(len(t) for t in texts))
        assert scored_text(tokens, table, windows, tokenizer, 3) == expected


def test_a_text_holding_the_word_mark_is_told_apart(imported):
    for tokenizer, _ in imported.values():
        assert tokenizer.text_problem(f"a{MARK}b") == (
            f"holding {MARK} (U+2581), the word mark the tokenizer writes each space as, so it "
            "would decode as a space; replace it first"
        )


def refusal(source: Path, output: Path) -> str:
    with pytest.raises(Refusal) as refused:
        import_tokenizer(source, output)
    assert not output.exists()
    return refused.value.sentence


def drop_byte(data: dict) -> None:
    vocabulary = data["model"]["vocab"]
    gone = vocabulary.pop("<0x41>")
    for token, index in list(vocabulary.items()):  # ids stay unbroken: the last takes its place
        if index == len(vocabulary):
            vocabulary[token] = gone


@pytest.mark.parametrize(
    ("layout", "change", "problem"),
    [
        ("gemma", drop_byte, "its vocabulary lacks the byte token <0x41>, so a text holding that "
         "byte would encode to its unknown token"),
        ("gemma", lambda d: d["model"].update(dropout=0.1), "its BPE drops merges at random "
         "(dropout), so a text would encode more than one way"),
        ("gemma", lambda d: d.update(pre_tokenizer={"type": "Metaspace", "replacement": MARK,
                                                    "prepend_scheme": "first", "split": False}),
         "its normalizer (Replace), pre-tokenizer (Metaspace) and decoder (Sequence) are not "
         "Gemma's or Llama 2's layout, the SentencePiece-style layouts Zrodlo takes"),
        ("llama2", lambda d: d["decoder"]["decoders"].pop(),
         "its normalizer (Sequence), pre-tokenizer (None) and decoder (Sequence) are not Gemma's "
         "or Llama 2's layout, the SentencePiece-style layouts Zrodlo takes"),
        ("llama2", lambda d: d["added_tokens"].append(
            {"id": len(d["model"]["vocab"]), "content": "<tool>", "special": False,
             "single_word": False, "lstrip": False, "rstrip": False, "normalized": False}),
         "its added token '<tool>' is not special, and Llama 2's layout puts a mark before the "
         "text after it, so a text holding it would decode with a space it did not have"),
        # A special token one character long: a text holding that character would encode to it.
        ("gemma", lambda d: d["added_tokens"][1].update(content="@")
         or d["model"]["vocab"].update({"@": 1}) or d["model"]["vocab"].pop("<eos>"),
         "its special token '@' (id 1) is a token texts encode to, so a text would encode to a "
         "frame"),
    ],
)  # fmt: skip
def test_a_file_it_could_not_hold_is_refused_writing_nothing(tmp_path, layout, change, problem):
    source = edited(LAYOUTS[layout](tmp_path / "tokenizer.json"), change)
    assert refusal(source, tmp_path / "out") == f"{source} cannot be imported: {problem}"

"""Importing a byte-level BPE the tokenizers library wrote: its own ids, encoding as the library
does, text sizes and digest, and the refusal of every file it could not hold, writing nothing."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from library_tokenizers import edited, gpt2_file, llama3_file, other_file, qwen2_file
from tokenizers import Tokenizer

from zrodlo.data.tokenizer import library_encoding, load_tokenizer
from zrodlo.data.tokenizer.imported import ImportedBPE, import_tokenizer
from zrodlo.storage.refusal import Refusal

ANY_TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=60)


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("files")
    gpt2_file(root / "gpt2.json")
    (root / "llama3").mkdir()
    llama3_file(root / "llama3" / "tokenizer.json")
    return root


@pytest.fixture(scope="module")
def imported(files) -> dict[str, tuple[ImportedBPE, Tokenizer]]:
    """Each file imported, beside the library's own tokenizer loaded from it."""
    found = {}
    for name, source in (("gpt2", "gpt2.json"), ("llama3", "llama3/tokenizer.json")):
        tokenizer = import_tokenizer(files / source, files / f"imported-{name}")
        found[name] = (tokenizer, Tokenizer.from_file(str(files / source)))
    return found


def test_the_specials_come_from_the_file_or_its_configuration(imported):
    gpt2, library = imported["gpt2"]
    assert gpt2.bos == gpt2.eos == library.token_to_id("<|endoftext|>")
    llama3, library = imported["llama3"]
    assert llama3.bos == library.token_to_id("<|begin_of_text|>")
    assert llama3.eos == library.token_to_id("<|end_of_text|>")
    assert llama3.vocab_size == library.get_vocab_size(with_added_tokens=True)


@settings(max_examples=200, deadline=None)
@given(ANY_TEXT)
def test_any_text_encodes_as_the_library_does_and_decodes_back(imported, text):
    for tokenizer, library in imported.values():
        ids = tokenizer.encode(text).tolist()
        assert ids == library.encode(text, add_special_tokens=False).ids
        assert tokenizer.decode(ids) == text
        # Every byte of the text is counted once, in the token that holds it.
        assert int(tokenizer.text_sizes[0, ids].sum()) == len(text.encode("utf-8"))
        assert int(tokenizer.text_sizes[1, ids].sum()) == len(text)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.text(alphabet="ab1 .!\n\t'é", max_size=60), min_size=1, max_size=4))
def test_documents_are_framed_and_long_ones_encode_as_the_whole(imported, texts):
    assert imported["gpt2"][0].splits_at_lines and not imported["llama3"][0].splits_at_lines
    for tokenizer, _ in imported.values():
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(library_encoding, "_CHUNK_CHARACTERS", 3)
            tokens, _ = tokenizer.encode_documents(texts, np.uint32)
        frame = (tokenizer.bos, tokenizer.eos)
        expected = [t for text in texts for t in (frame[0], *tokenizer.encode(text), frame[1])]
        assert tokens.tolist() == expected


def test_the_name_of_a_special_token_in_a_text_is_text(imported):
    tokenizer, library = imported["gpt2"]
    text = "a<|endoftext|>b"
    ids = tokenizer.encode(text).tolist()
    assert tokenizer.eos not in ids and tokenizer.decode(ids) == text
    assert library.token_to_id("<|endoftext|>") in library.encode(text).ids  # the library's


def test_the_directory_loads_back_with_its_digest_and_an_edit_is_refused(files, imported):
    tokenizer, _ = imported["gpt2"]
    directory = files / "imported-gpt2"
    assert load_tokenizer(directory).digest == tokenizer.digest
    stored = json.loads((directory / "tokenizer.json").read_text())
    assert stored["kind"] == "imported-bpe" and "truncation" not in stored["tokenizer"]
    edited(directory / "tokenizer.json", lambda d: d["special"].update(EOS=5))
    with pytest.raises(Refusal) as refused:
        load_tokenizer(directory)
    assert refused.value.sentence.startswith(
        f"{directory / 'tokenizer.json'} does not load as a tokenizer: its BOS and EOS are not "
        "special tokens"
    )


def drop_byte(data: dict) -> None:
    del data["model"]["vocab"]["Ā"]  # byte 0x00, which no text of the fixture holds


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (drop_byte, "its vocabulary lacks the symbol of byte 0x00 ('Ā'), so a text holding that "
         "byte would not encode"),
        (lambda d: d["model"]["merges"].append(["zz", "qq"]),
         "the tokenizers library does not load it: Token `zz` out of vocabulary"),
        (lambda d: d.update(normalizer={"type": "NFKC"}),
         "it normalizes each text (NFKC), and a corpus keeps a text as it is"),
        (lambda d: d["pre_tokenizer"].update(add_prefix_space=True),
         "its pre-tokenizer adds a space before each text, which decoding would keep"),
        (lambda d: d["model"].update(dropout=0.1),
         "its BPE drops merges at random (dropout), so a text would encode more than one way"),
        (lambda d: d.update(decoder={"type": "Fuse"}),
         "its decoder is not ByteLevel, so its tokens would not decode to the text's bytes"),
        (lambda d: d["model"]["vocab"].update(hello=3),
         "two tokens of its vocabulary share an id"),
    ],
)  # fmt: skip
def test_a_file_zrodlo_cannot_hold_is_refused_writing_nothing(tmp_path, change, reason):
    source = edited(gpt2_file(tmp_path / "tokenizer.json"), change)
    with pytest.raises(Refusal) as refused:
        import_tokenizer(source, tmp_path / "out")
    assert refused.value.sentence.startswith(f"{source} cannot be imported: {reason}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tokenizer.json"]


@pytest.mark.parametrize("kind", ["WordPiece", "Unigram", "WordLevel"])
def test_another_kind_of_tokenizer_is_refused_naming_it(tmp_path, kind):
    source = other_file(tmp_path / "tokenizer.json", kind)
    with pytest.raises(Refusal) as refused:
        import_tokenizer(source, tmp_path / "out")
    assert refused.value.sentence == (
        f"{source} holds a {kind} tokenizer; Zrodlo imports BPE tokenizers only: byte-level (the "
        "GPT-2 family's tokenizer.json) or SentencePiece-style with byte fallback (Gemma's, Llama "
        "2's)"
    )
    assert not (tmp_path / "out").exists()


def test_a_bpe_over_word_markers_in_no_released_layout_is_refused_naming_its_parts(tmp_path):
    source = other_file(tmp_path / "tokenizer.json", "SentencePiece")
    with pytest.raises(Refusal) as refused:
        import_tokenizer(source, tmp_path / "out")
    assert refused.value.sentence == (
        f"{source} cannot be imported: its normalizer (Sequence), pre-tokenizer (None) and "
        "decoder (Metaspace) are not Gemma's or Llama 2's layout, the SentencePiece-style "
        "layouts Zrodlo takes"
    )


def test_the_frame_must_be_named_where_the_file_does_not_say(tmp_path):
    source = llama3_file(tmp_path / "tokenizer.json")
    (tmp_path / "tokenizer_config.json").unlink()
    with pytest.raises(Refusal) as refused:
        import_tokenizer(source, tmp_path / "out")
    assert refused.value.sentence == (
        f"{source} names no token to start each document (no tokenizer_config.json beside it, "
        "and its special tokens are <|begin_of_text|>, <|end_of_text|>); name it with --bos"
    )
    with pytest.raises(Refusal) as refused:
        import_tokenizer(source, tmp_path / "out", bos="hello", eos="<|end_of_text|>")
    assert refused.value.sentence == (
        f"--bos hello is no special token of {source}; a document is framed by tokens no text "
        "encodes to"
    )
    tokenizer = import_tokenizer(
        source, tmp_path / "out", bos="<|end_of_text|>", eos="<|end_of_text|>"
    )
    assert tokenizer.bos == tokenizer.eos


def test_a_model_without_a_bos_starts_each_document_with_its_eos(tmp_path):
    """Qwen2.5's tokenizer_config.json names no BOS (null) and <|endoftext|> as EOS, which is what
    separates its pretraining documents: each document starts and ends with it, as GPT-2's do."""
    source = qwen2_file(tmp_path / "tokenizer.json")
    config = {"bos_token": None, "eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>"}
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    tokenizer = import_tokenizer(source, tmp_path / "out")
    end = tokenizer.library.token_to_id("<|endoftext|>")
    assert (tokenizer.bos, tokenizer.eos) == (end, end)


@pytest.mark.parametrize(
    ("content", "reason"),
    [(b"{\"model\": ", "does not load as a tokenizers file: "), (b"[1, 2]", "cannot be imported: "
      "it holds no tokenizer model")],
)  # fmt: skip
def test_a_damaged_file_is_refused(tmp_path, content, reason):
    source = tmp_path / "tokenizer.json"
    source.write_bytes(content)
    with pytest.raises(Refusal) as refused:
        import_tokenizer(source, tmp_path / "out")
    assert refused.value.sentence.startswith(f"{source} {reason}")
    assert not (tmp_path / "out").exists()

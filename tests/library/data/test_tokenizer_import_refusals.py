"""What a tokenizer.json must not do to be imported, each refused with its sentence and nothing
written: run a split Zrodlo does not know (a stranger's pattern may take hours or drop text),
lose text (an added token that decodes otherwise, one that takes in the spaces beside it), put a
special token on an id texts encode to, or give added tokens ids the tokenizers library does not;
the released splits taken; and a long document cut into parts never inside an added token."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from library_tokenizers import edited, gpt2_file, llama3_file
from tokenizers import Tokenizer

from forgery import reseal_tokenizer
from zrodlo.data.tokenizer import library_encoding, load_tokenizer
from zrodlo.data.tokenizer.imported import import_tokenizer
from zrodlo.storage.refusal import Refusal

# Qwen2's tokenizer.json splits as Llama 3's does but one digit a piece.
QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
SPLIT = (
    "its pre-tokenizer's Split is not Llama 3's or Qwen2's as released (their pattern, Isolated, "
    "not inverted), and Zrodlo runs no other: another pattern may drop text, or take hours on one "
    "document"
)
FORM = (
    "its pre-tokenizer is not GPT-2's ByteLevel split (alone, or after SmolLM's Digits), nor "
    "Llama 3's or Qwen2's Split before ByteLevel, the pre-tokenizers Zrodlo knows to keep every "
    "text"
)
VOCABULARY = 356  # the tokens of gpt2_file's vocabulary, ids 0 to 355


def added(content: str, index: int, special: bool = False, **flags: bool) -> dict:
    """An entry of added_tokens as the tokenizers library writes one."""
    entry = {"id": index, "content": content, "single_word": False, "lstrip": False}
    entry.update(rstrip=False, normalized=False, special=special)
    entry.update(flags)
    return entry


def adding(*tokens: dict):
    return lambda data: data["added_tokens"].extend(tokens)


def split_step(data: dict) -> dict:
    return data["pre_tokenizer"]["pretokenizers"][0]


def refused(source: Path, output: Path, frame: str | None = None) -> str:
    """The sentence `tokenizer import` refuses `source` with (documents framed by `frame`), having
    written nothing."""
    before = sorted(output.parent.rglob("*"))
    with pytest.raises(Refusal) as refusal:
        import_tokenizer(source, output, frame, frame)
    assert sorted(output.parent.rglob("*")) == before and not output.exists()
    return refusal.value.sentence


@pytest.mark.parametrize(
    "change",
    [
        lambda d: split_step(d).update(pattern={"Regex": "(a+)+$"}),  # catastrophic backtracking
        lambda d: split_step(d).update(behavior="Removed"),  # Llama 3's pattern, its pieces dropped
        lambda d: split_step(d).update(pattern={"String": " "}, behavior="Removed"),
        lambda d: split_step(d).update(invert=True),
    ],
)
def test_a_split_zrodlo_does_not_know_is_refused(tmp_path, change):
    source = edited(llama3_file(tmp_path / "tokenizer.json"), change)
    assert refused(source, tmp_path / "out") == f"{source} cannot be imported: {SPLIT}"


def digits_first(individual: bool):
    """GPT-2's split after a Digits step, as SmolLM's tokenizer.json has it (`individual`)."""

    def change(data: dict) -> None:
        steps = [{"type": "Digits", "individual_digits": individual}, data["pre_tokenizer"]]
        data["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": steps}

    return change


def whitespace_first(data: dict) -> None:
    steps = [{"type": "WhitespaceSplit"}, data["pre_tokenizer"]]
    data["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": steps}


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (whitespace_first, "its pre-tokenizer holds a WhitespaceSplit step; Zrodlo takes GPT-2's "
         "ByteLevel split (alone, or after SmolLM's Digits), or Llama 3's or Qwen2's Split before "
         "ByteLevel, the pre-tokenizers it knows to keep every text"),
        (digits_first(False), FORM),  # SmolLM's Digits keeps each digit apart
        (lambda d: d["pre_tokenizer"].update(use_regex=False), FORM),  # no split: one piece a text
        (lambda d: d["pre_tokenizer"].update(offsets="kept"), FORM),  # a field Zrodlo does not know
    ],
)  # fmt: skip
def test_a_pre_tokenizer_zrodlo_does_not_know_is_refused(tmp_path, change, reason):
    source = edited(gpt2_file(tmp_path / "tokenizer.json"), change)
    assert refused(source, tmp_path / "out") == f"{source} cannot be imported: {reason}"


@pytest.mark.parametrize(
    ("maker", "change"),
    [
        (gpt2_file, lambda d: d["pre_tokenizer"].pop("use_regex")),  # written before the field
        (gpt2_file, digits_first(True)),
        (llama3_file, lambda d: None),
        (llama3_file, lambda d: split_step(d).update(pattern={"Regex": QWEN2_SPLIT})),
        (llama3_file, lambda d: d["pre_tokenizer"]["pretokenizers"][1].update(trim_offsets=False)),
    ],
)
def test_the_released_splits_are_taken(tmp_path, maker, change):
    source = edited(maker(tmp_path / "tokenizer.json"), change)
    tokenizer = import_tokenizer(source, tmp_path / "out")
    library = Tokenizer.from_file(str(source))
    text = "It's 2024-05-17: naïve café 🙂\n\n  done.\n"
    assert tokenizer.encode(text).tolist() == library.encode(text, add_special_tokens=False).ids
    assert tokenizer.decode(tokenizer.encode(text)) == text


@pytest.mark.parametrize(
    ("token", "reason"),
    [
        (added("xq", VOCABULARY, lstrip=True), "its added token 'xq' takes in the whitespace "
         "before it (lstrip), so a text holding it would decode without that whitespace"),
        (added("xq", VOCABULARY, rstrip=True), "its added token 'xq' takes in the whitespace "
         "after it (rstrip), so a text holding it would decode without that whitespace"),
        (added("café", VOCABULARY), "its added token 'café' decodes to 'caf\ufffd', so a text "
         "holding it would not decode back"),
        (added("Ġhi", VOCABULARY), "its added token 'Ġhi' decodes to ' hi', so a text holding it "
         "would not decode back"),
    ],
)  # fmt: skip
def test_an_added_token_whose_text_would_not_come_back_is_refused(tmp_path, token, reason):
    source = edited(gpt2_file(tmp_path / "tokenizer.json"), adding(token))
    assert refused(source, tmp_path / "out") == f"{source} cannot be imported: {reason}"


@pytest.mark.parametrize("flag", ["single_word", "normalized"])
def test_added_tokens_matched_as_words_or_after_normalizing_are_taken(tmp_path, flag):
    # Neither drops text: single_word only says where the token is found, and no normalizer runs.
    source = edited(
        gpt2_file(tmp_path / "tokenizer.json"), adding(added("xq", VOCABULARY, **{flag: True}))
    )
    tokenizer = import_tokenizer(source, tmp_path / "out")
    library = Tokenizer.from_file(str(source))
    for text in ["a xq b", "axqb", "xq", " xq\n"]:
        ids = tokenizer.encode(text).tolist()
        assert ids == library.encode(text, add_special_tokens=False).ids
        assert tokenizer.decode(ids) == text


def a_special_on(content: str):
    """A special token `content` on the id the vocabulary gives "a", which texts encode to."""
    return lambda data: data["added_tokens"].append(
        added(content, data["model"]["vocab"]["a"], special=True)
    )


def test_a_special_token_on_the_id_of_a_text_is_refused(tmp_path):
    source = edited(gpt2_file(tmp_path / "tokenizer.json"), a_special_on("<|x|>"))
    index = json.loads(source.read_text())["model"]["vocab"]["a"]
    assert refused(source, tmp_path / "out", "<|endoftext|>") == (
        f"{source} cannot be imported: its special token '<|x|>' has id {index}, which its "
        "vocabulary gives 'a', so a text would encode to a frame"
    )
    source = edited(gpt2_file(tmp_path / "tokenizer.json"), a_special_on("a"))
    assert refused(source, tmp_path / "out", "<|endoftext|>") == (
        f"{source} cannot be imported: its special token 'a' (id {index}) is a token texts encode "
        "to, so a text would encode to a frame"
    )


def gap_in_vocabulary(data: dict) -> None:
    vocabulary = data["model"]["vocab"]
    last = max(vocabulary, key=vocabulary.get)
    vocabulary[last] = 400


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda d: d["added_tokens"][0].update(id=1_048_575), "its added token '<|endoftext|>' "
         "has id 1048575 in added_tokens, where the tokenizers library gives it id 0: an added "
         "token's id is its text's in the vocabulary, or the next one after the vocabulary's"),
        (adding(added("<|y|>", 1000, special=True)), "its added token '<|y|>' has id 1000 in "
         "added_tokens, where the tokenizers library gives it id 356: an added token's id is its "
         "text's in the vocabulary, or the next one after the vocabulary's"),
        (adding(added("", VOCABULARY)), "its added token '' has id 356 in added_tokens, where the "
         "tokenizers library gives it none: an added token's id is its text's in the vocabulary, "
         "or the next one after the vocabulary's"),
        (gap_in_vocabulary, "its vocabulary's ids are not 0 to 355: no token has id 355"),
    ],
)  # fmt: skip
def test_added_ids_are_the_ones_the_library_gives(tmp_path, change, reason):
    source = edited(gpt2_file(tmp_path / "tokenizer.json"), change)
    assert (
        refused(source, tmp_path / "out", "<|endoftext|>")
        == f"{source} cannot be imported: {reason}"
    )


@pytest.fixture(scope="module")
def with_added_line_break(tmp_path_factory) -> tuple[Path, Tokenizer]:
    """GPT-2's layout with a non-special added token that holds a line break, imported."""
    root = tmp_path_factory.mktemp("added")
    source = edited(gpt2_file(root / "tokenizer.json"), adding(added("x\ny", VOCABULARY)))
    import_tokenizer(source, root / "imported")
    return root / "imported", Tokenizer.from_file(str(source))


def test_a_long_document_is_never_cut_inside_an_added_token(with_added_line_break):
    directory, library = with_added_line_break
    tokenizer = load_tokenizer(directory)
    # The first line break after a part's length that follows a visible character is x\ny's.
    head = "the cat sat on the mat. " * (library_encoding._CHUNK_CHARACTERS // 24 + 1)
    text = head + "x\ny and more.\n" + "tail line.\n" * 150
    assert len(text) > library_encoding._CHUNK_CHARACTERS + 1000
    tokens, sizes = tokenizer.encode_documents([text])
    expected = library.encode(text, add_special_tokens=False).ids
    assert tokens[1:-1].tolist() == expected and sizes.tolist() == [len(expected) + 2]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.text(alphabet="xy\n.a ", max_size=40), min_size=1, max_size=3))
def test_documents_in_short_parts_encode_as_the_library_does(with_added_line_break, texts):
    directory, library = with_added_line_break
    tokenizer = load_tokenizer(directory)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(library_encoding, "_CHUNK_CHARACTERS", 3)
        tokens, _ = tokenizer.encode_documents(texts)
    bos, eos = tokenizer.bos, tokenizer.eos
    ids = [library.encode(text, add_special_tokens=False).ids for text in texts]
    expected = [token for each in ids for token in (bos, *each, eos)]
    assert tokens.tolist() == expected


def test_a_stored_import_with_a_stranger_split_does_not_load(tmp_path):
    import_tokenizer(llama3_file(tmp_path / "tokenizer.json"), tmp_path / "imported")
    reseal_tokenizer(
        tmp_path / "imported", lambda file: split_step(file).update(pattern={"Regex": "(a+)+$"})
    )
    with pytest.raises(Refusal) as refusal:
        load_tokenizer(tmp_path / "imported")
    stored = tmp_path / "imported" / "tokenizer.json"
    assert refusal.value.sentence == f"{stored} does not load as a tokenizer: {SPLIT}"

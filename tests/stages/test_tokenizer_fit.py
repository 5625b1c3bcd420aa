"""`zrodlo tokenizer fit` through the real command."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from conftest import ZRODLO

from zrodlo.data.tokenizer import load_tokenizer


def fit_args(root, output=None, documents=None):
    return [
        "tokenizer",
        "fit",
        "--documents",
        documents or root / "train.jsonl",
        "--output",
        output or root / "tokenizer",
    ]


def test_fit_writes_the_characters_of_the_documents_in_code_point_order(
    tmp_path, write_documents, run_zrodlo
):
    write_documents(tmp_path / "train.jsonl", {"x": "bca", "y": "ab😀 é"})
    returncode, stdout, stderr = run_zrodlo(*fit_args(tmp_path), cwd=tmp_path)
    assert (returncode, stderr) == (0, "")
    written = json.loads((tmp_path / "tokenizer" / "tokenizer.json").read_text(encoding="utf-8"))
    assert written["kind"] == "char"
    assert written["special"] == {"UNK": 0, "BOS": 1, "EOS": 2}
    assert written["characters"] == [" ", "a", "b", "c", "é", "😀"]
    assert written["vocab_size"] == 9
    assert written["digest"] == load_tokenizer(tmp_path / "tokenizer").digest
    assert stdout == f"wrote {tmp_path / 'tokenizer'}: vocab_size 9, digest {written['digest']}\n"
    assert sorted(p.name for p in (tmp_path / "tokenizer").iterdir()) == ["tokenizer.json"]


def test_fit_refuses_an_existing_output(tmp_path, write_documents, assert_refused):
    write_documents(tmp_path / "train.jsonl", {"x": "abc"})
    (tmp_path / "tokenizer").mkdir()
    output = tmp_path / "tokenizer"
    sentence = f"{output} already exists; Zrodlo writes a new directory and overwrites nothing"
    assert_refused(*fit_args(tmp_path), sentence=sentence)


def test_fit_refuses_a_bad_documents_line(tmp_path, write_documents, assert_refused):
    documents = write_documents(tmp_path / "train.jsonl", [{"id": "x", "text": "abc"}, "{oops"])
    sentence = (
        f"{documents} line 2 is not valid JSON (Expecting property name enclosed in double "
        "quotes); each line holds one JSON object with an id and a text"
    )
    assert_refused(*fit_args(tmp_path), sentence=sentence)


def test_fit_refuses_a_documents_path_that_is_a_directory(tmp_path, assert_refused):
    (tmp_path / "train.jsonl").mkdir()
    sentence = f"{tmp_path / 'train.jsonl'} is a directory; a documents file is expected there"
    assert_refused(*fit_args(tmp_path), sentence=sentence)


def test_fit_refuses_a_documents_file_without_documents(tmp_path, run_zrodlo, snapshot):
    (tmp_path / "train.jsonl").write_bytes(b"")
    before = snapshot(tmp_path)
    returncode, _, stderr = run_zrodlo(*fit_args(tmp_path), cwd=tmp_path)
    assert returncode == 1
    assert stderr == (
        f"Error: {tmp_path / 'train.jsonl'} holds no documents; a tokenizer is fitted on one "
        "document or more\n"
    )
    assert snapshot(tmp_path) == before


def test_every_option_of_tokenizer_fit_has_help(run_zrodlo, option_descriptions, tmp_path):
    returncode, stdout, _ = run_zrodlo("tokenizer", "fit", "--help", cwd=tmp_path)
    assert returncode == 0
    options = option_descriptions(stdout)
    assert set(options) == {"--documents", "--output", "--kind", "--vocab-size", "--help"}
    assert all(options.values()), options


BPE_DOCUMENTS = {"x": "the cat sat on the mat, the cat", "y": "Zürich 🙂 the mat\n\tend"}


def test_fit_bpe_writes_a_byte_level_bpe_the_same_at_every_hash_seed_and_thread_count(
    tmp_path, write_documents
):
    write_documents(tmp_path / "train.jsonl", BPE_DOCUMENTS)
    written = []
    for at, env in enumerate([{"PYTHONHASHSEED": "0"}, {"PYTHONHASHSEED": "1",
                              "RAYON_NUM_THREADS": "1"}, {"RAYON_NUM_THREADS": "16"}]):  # fmt: skip
        output = tmp_path / f"tokenizer-{at}"
        completed = subprocess.run(
            [ZRODLO, *fit_args(tmp_path, output), "--kind", "bpe", "--vocab-size", "270"],
            env={**os.environ, **env}, capture_output=True, text=True, check=False,
        )  # fmt: skip
        digest = load_tokenizer(output).digest
        assert (completed.returncode, completed.stderr) == (0, "")
        assert completed.stdout == f"wrote {output}: vocab_size 270, digest {digest}\n"
        written.append((output / "tokenizer.json").read_bytes())
    assert written[0] == written[1] == written[2]
    data = json.loads(written[0])
    assert (data["kind"], data["special"], data["vocab_size"]) == ("bpe", {"BOS": 0, "EOS": 1}, 270)


def test_fit_bpe_says_when_the_documents_make_fewer_tokens(tmp_path, write_documents, run_zrodlo):
    write_documents(tmp_path / "train.jsonl", {"x": "abab"})
    args = (*fit_args(tmp_path), "--kind", "bpe", "--vocab-size", "300")
    returncode, stdout, stderr = run_zrodlo(*args, cwd=tmp_path)
    digest = load_tokenizer(tmp_path / "tokenizer").digest
    assert (returncode, stderr) == (0, "")
    assert stdout == (
        f"wrote {tmp_path / 'tokenizer'}: vocab_size 260, digest {digest} (fewer than the 300 "
        "asked: the documents hold no more pairs to merge)\n"
    )


@pytest.mark.parametrize(
    ("flags", "sentence"),
    [
        (("--kind", "bpe", "--vocab-size", "257"),
         "--vocab-size is 257; a byte-level BPE holds the 256 bytes and BOS and EOS, so it is 258 "
         "or more, and at most 1,048,576"),
        (("--kind", "bpe", "--vocab-size", str(2**20 + 1)),
         "--vocab-size is 1048577; a byte-level BPE holds the 256 bytes and BOS and EOS, so it is "
         "258 or more, and at most 1,048,576"),
        (("--kind", "bpe"), "--kind bpe needs --vocab-size, the tokens its vocabulary holds (258 or "
         "more)"),
        (("--vocab-size", "300"), "--vocab-size is for --kind bpe; a character tokenizer holds "
         "every character of the training documents"),
        (("--kind", "word"), "--kind is word; it is char or bpe"),
    ],
)  # fmt: skip
def test_fit_refuses_a_kind_or_size_it_cannot_fit(
    tmp_path, write_documents, assert_refused, flags, sentence
):
    write_documents(tmp_path / "train.jsonl", {"x": "abc"})
    assert_refused(*fit_args(tmp_path), *flags, sentence=sentence)


def test_fit_bpe_refuses_a_documents_file_without_documents(tmp_path, assert_refused):
    (tmp_path / "train.jsonl").write_bytes(b"")
    assert_refused(
        *fit_args(tmp_path), "--kind", "bpe", "--vocab-size", "300",
        sentence=f"{tmp_path / 'train.jsonl'} holds no documents; a tokenizer is fitted on one "
        "document or more",
    )  # fmt: skip


def test_fit_refuses_a_vocab_size_that_is_not_a_number(
    tmp_path, write_documents, run_zrodlo, snapshot
):
    write_documents(tmp_path / "train.jsonl", {"x": "abc"})
    before = snapshot(tmp_path)
    args = (*fit_args(tmp_path), "--kind", "bpe", "--vocab-size", "many")
    returncode, stdout, stderr = run_zrodlo(*args, cwd=tmp_path)
    assert (returncode, stdout) == (2, "")
    assert "Invalid value for '--vocab-size': Input should be a valid integer" in stderr
    assert snapshot(tmp_path) == before


def test_the_tokenizer_section_reaches_tokenizer_fit_through_params(
    tmp_path, run_zrodlo, assert_refused, write_documents
):
    """What the tokenizer stage runs: `zrodlo --params params.yaml tokenizer fit`, the kind and,
    for bpe alone, vocab_size from the section."""
    documents = write_documents(tmp_path / "train.jsonl", {"a": "the cat sat on the mat " * 20})
    params = tmp_path / "params.yaml"
    fit = ("--params", params, "tokenizer", "fit", "--documents", documents, "--output")
    params.write_text("tokenizer:\n  kind: bpe\n  vocab_size: 270\n")
    returncode, _, stderr = run_zrodlo(*fit, tmp_path / "bpe", cwd=tmp_path)
    assert (returncode, stderr) == (0, "")
    assert load_tokenizer(tmp_path / "bpe").kind == "bpe"
    params.write_text("tokenizer:\n  kind: char\n  vocab_size: 270\n")
    returncode, _, stderr = run_zrodlo(*fit, tmp_path / "char", cwd=tmp_path)
    assert (returncode, stderr) == (0, "")
    assert load_tokenizer(tmp_path / "char").kind == "char"
    params.write_text("tokenizer:\n  kind: bpe\n  vocab_size: 12\n")
    assert_refused(
        *fit, tmp_path / "refused",
        sentence="--vocab-size is 12; a byte-level BPE holds the 256 bytes and BOS and EOS, so it "
        "is 258 or more, and at most 1,048,576",
    )  # fmt: skip

"""`zrodlo tokenizer import` by the real command: a GPT-2-family file in, a corpus, a trained tiny
model and its export out, whose transformers tokenizer gives the file's ids and whose loss is
Zrodlo's; another kind of tokenizer, a split Zrodlo does not know (by `tokenizer import`, by
`model import`, and stored and forged, by `corpus prepare`) and a file whose import its readers
would refuse as too large, each refused with its sentence, writing nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import HELD_OUT_DOCUMENTS, TINY_MODEL, TRAINING_DOCUMENTS
from library_tokenizers import edited, gpt2_file, llama3_file, other_file
from tokenizers import Tokenizer

from forgery import reseal_tokenizer
from oracles import transformers_loss
from zrodlo.data.corpus import Corpus
from zrodlo.storage.inputs import SMALL_FILE

# In `make test`, not `make check`: a training run and transformers loading the exported directory.
pytestmark = pytest.mark.slow

transformers = pytest.importorskip("transformers")

CONTEXT = 9


@pytest.fixture(scope="module")
def imported_run(tmp_path_factory, write_documents, run_zrodlo, train_args) -> Path:
    """A GPT-2-layout file imported, both corpora prepared with it, a tiny model trained 2 steps
    and exported."""
    root = tmp_path_factory.mktemp("imported")
    gpt2_file(root / "gpt2.json")
    write_documents(root / "train.jsonl", {k: v * 4 for k, v in TRAINING_DOCUMENTS.items()})
    write_documents(root / "held-out.jsonl", HELD_OUT_DOCUMENTS)
    returncode, stdout, stderr = run_zrodlo(
        "tokenizer", "import", "--from", "gpt2.json", "--output", "tokenizer", cwd=root
    )
    assert (returncode, stderr) == (0, ""), stderr
    digest = json.loads((root / "tokenizer" / "tokenizer.json").read_text())["digest"]
    assert stdout == (
        f"wrote tokenizer: vocab_size 356, each document between two <|endoftext|> (0), digest "
        f"{digest}\n"
    )
    commands = [
        ("corpus", "prepare", "--documents", "train.jsonl", "--tokenizer", "tokenizer",
         "--output", "corpus"),
        ("corpus", "prepare", "--documents", "held-out.jsonl", "--tokenizer", "tokenizer",
         "--output", "held-out"),
        ("model", "init", "--tokenizer", "tokenizer", "--output", "model", *TINY_MODEL,
         "--dropout", "0", "--seed", "7"),
        tuple(train_args(root / "model", root / "corpus", root / "run", 2, {"--context": CONTEXT})),
        ("model", "export", "--model", "run/step-2", "--output", "exported"),
    ]  # fmt: skip
    for args in commands:
        returncode, _, stderr = run_zrodlo(*args, cwd=root)
        assert (returncode, stderr) == (0, ""), (args, stderr)
    return root


def test_the_corpus_holds_the_files_ids_framed_by_its_special_token(imported_run):
    library = Tokenizer.from_file(str(imported_run / "gpt2.json"))
    end = library.token_to_id("<|endoftext|>")
    expected = [
        token
        for text in HELD_OUT_DOCUMENTS.values()
        for token in (end, *library.encode(text, add_special_tokens=False).ids, end)
    ]
    assert Corpus.open(imported_run / "held-out").tokens.tolist() == expected


def test_the_export_encodes_as_the_file_and_scores_as_zrodlo(imported_run, run_zrodlo):
    exported = imported_run / "exported"
    hf = transformers.AutoTokenizer.from_pretrained(exported, local_files_only=True)
    library = Tokenizer.from_file(str(imported_run / "gpt2.json"))
    for text in ["naïve café 🙂\n\tdef f(): return 42", "the <|endoftext|> is text here"]:
        ids = hf(text)["input_ids"]
        if "<|endoftext|>" not in text:
            assert ids == library.encode(text, add_special_tokens=False).ids
        assert hf.decode(ids) == text
    scores = imported_run / "scores.json"
    returncode, _, stderr = run_zrodlo(
        "model", "evaluate", "--model", "run/step-2", "--corpus", "held-out",
        "--context", CONTEXT, "--output", scores, cwd=imported_run,
    )  # fmt: skip
    assert (returncode, stderr) == (0, ""), stderr
    scored = json.loads(scores.read_text())["corpora"]["held-out"]
    assert scored["bytes"] == sum(len(text.encode()) for text in HELD_OUT_DOCUMENTS.values())
    model = transformers.AutoModelForCausalLM.from_pretrained(exported, local_files_only=True)
    loss = transformers_loss(model, imported_run / "held-out", CONTEXT)
    assert loss == pytest.approx(scored["loss"], abs=1e-5)


def test_a_wordpiece_file_is_refused_with_nothing_written(tmp_path, assert_refused):
    source = other_file(tmp_path / "tokenizer.json", "WordPiece")
    assert_refused(
        "tokenizer", "import", "--from", source, "--output", tmp_path / "out",
        sentence=f"{source} holds a WordPiece tokenizer; Zrodlo imports BPE tokenizers only: "
        "byte-level (the GPT-2 family's tokenizer.json) or SentencePiece-style with byte fallback "
        "(Gemma's, Llama 2's)",
    )  # fmt: skip


SPLIT = (
    "its pre-tokenizer's Split is not Llama 3's or Qwen2's as released (their pattern, Isolated, "
    "not inverted), and Zrodlo runs no other: another pattern may drop text, or take hours on one "
    "document"
)


def catastrophic(file: dict) -> None:
    """A split whose pattern backtracks for ever on a long run of one letter."""
    file["pre_tokenizer"]["pretokenizers"][0]["pattern"] = {"Regex": "(a+)+$"}


def test_a_stranger_split_is_refused_by_import_and_by_corpus_prepare(
    tmp_path, run_zrodlo, write_documents, assert_refused
):
    (tmp_path / "hostile").mkdir()
    source = edited(llama3_file(tmp_path / "hostile" / "tokenizer.json"), catastrophic)
    assert_refused(
        "tokenizer", "import", "--from", source, "--output", tmp_path / "out",
        sentence=f"{source} cannot be imported: {SPLIT}",
    )  # fmt: skip
    # The same split in a tokenizer directory written by hand, its digest recomputed.
    llama3_file(tmp_path / "tokenizer.json")
    returncode, _, stderr = run_zrodlo(
        "tokenizer", "import", "--from", "tokenizer.json", "--output", "forged", cwd=tmp_path
    )
    assert (returncode, stderr) == (0, ""), stderr
    reseal_tokenizer(tmp_path / "forged", catastrophic)
    write_documents(tmp_path / "docs.jsonl", {"a": "a" * 20 + "b"})
    assert_refused(
        "corpus", "prepare", "--documents", "docs.jsonl", "--tokenizer", "forged",
        "--output", "corpus",
        sentence=f"{Path('forged', 'tokenizer.json')} does not load as a tokenizer: {SPLIT}",
    )  # fmt: skip


def test_model_import_refuses_the_file_tokenizer_import_refuses(tmp_path, assert_refused):
    source = tmp_path / "hf"
    config = transformers.GPT2Config(
        vocab_size=360, n_positions=16, n_embd=8, n_layer=1, n_head=2, activation_function="gelu"
    )
    transformers.GPT2LMHeadModel(config).save_pretrained(source)
    llama3_file(source / "tokenizer.json")
    edited(source / "tokenizer.json", catastrophic)
    assert_refused(
        "model", "import", "--from", source, "--output", tmp_path / "model",
        sentence=f"{source / 'tokenizer.json'} cannot be imported: {SPLIT}",
    )  # fmt: skip


def test_a_file_whose_import_no_command_could_read_is_refused(tmp_path, assert_refused):
    """A file within the size a reader takes, whose merges (repeated, which the library allows)
    take five times the room once written indented in Zrodlo's tokenizer.json."""
    data = json.loads(gpt2_file(tmp_path / "gpt2.json").read_text(encoding="utf-8"))
    data["model"]["merges"] += data["model"]["merges"][:1] * 1_400_000
    source = tmp_path / "tokenizer.json"
    source.write_text(json.dumps(data, separators=(",", ":")), encoding="utf-8")
    assert source.stat().st_size < SMALL_FILE
    assert_refused(
        "tokenizer", "import", "--from", source, "--output", tmp_path / "out",
        sentence=f"{source} cannot be imported: Zrodlo's tokenizer.json of it would hold more "
        f"than the {SMALL_FILE} bytes a tokenizer file may hold, so no command could read it",
    )  # fmt: skip

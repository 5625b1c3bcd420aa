"""Every reader of JSON through the real commands: a repeated key, an integer of more than 4300
digits and nesting 100,000 deep are each refused with a sentence naming the file and line, exit 1
and nothing written, where Python would keep the last key silently, raise or run out of stack."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

DEEP = "[" * 100_000 + "]" * 100_000
HUGE = "7" * 4301


def test_a_documents_line_that_repeats_a_key(tmp_path, assert_refused_in_process):
    documents = tmp_path / "documents.jsonl"
    documents.write_text('{"id": "a", "text": "x"}\n{"id": "b", "id": "c", "text": "y"}\n')
    assert_refused_in_process(
        "tokenizer", "fit", "--documents", documents, "--output", tmp_path / "tokenizer",
        sentence=f'{documents} line 2 is not valid JSON (an object repeats the key "id"); each '
        "line holds one JSON object with an id and a text",
    )  # fmt: skip


def test_a_splits_file_that_repeats_a_pool(tmp_path, training_data, assert_refused_in_process):
    splits = tmp_path / "splits.json"
    splits.write_text(
        '{"train": ["fox"],\n "validation": ["dog"],\n "test": ["box"],\n "train": ["dog"]}'
    )
    assert_refused_in_process(
        "documents", "split", "--documents", training_data.documents, "--splits", splits,
        "--output", tmp_path / "pools",
        sentence=f'{splits} is not valid JSON (an object repeats the key "train" on line 4); it '
        "holds one object with the pools train, validation and test",
    )  # fmt: skip


def test_a_tokenizer_with_an_integer_of_more_than_4300_digits(
    tmp_path, training_data, assert_refused_in_process
):
    tokenizer = Path(shutil.copytree(training_data.tokenizer, tmp_path / "tokenizer"))
    file = tokenizer / "tokenizer.json"
    file.write_text(file.read_text().replace('"vocab_size": ', f'"vocab_size": {HUGE}, "x": '))
    line = next(n for n, text in enumerate(file.read_text().splitlines(), 1) if HUGE in text)
    assert_refused_in_process(
        "corpus", "prepare", "--documents", training_data.documents, "--tokenizer", tokenizer,
        "--output", tmp_path / "corpus",
        sentence=f"{file} does not load as a tokenizer: an integer has more than 4300 digits on "
        f"line {line}",
    )  # fmt: skip


def test_a_corpus_manifest_nested_100000_deep(
    tmp_path, training_data, train_args, assert_refused_in_process
):
    corpus = Path(shutil.copytree(training_data.corpus, tmp_path / "corpus"))
    (corpus / "corpus.json").write_text("\n" + DEEP)
    assert_refused_in_process(
        *train_args(training_data.model, corpus, tmp_path / "run", 2),
        sentence=f"{corpus / 'corpus.json'} does not load as a corpus manifest: values nest more "
        "than 500 levels deep on line 2",
    )


def test_a_trainer_json_that_repeats_its_step(
    tmp_path, trained_run, training_data, resume_args, assert_refused_in_process
):
    checkpoint = Path(shutil.copytree(trained_run / "step-4", tmp_path / "step-4"))
    file = checkpoint / "trainer.json"
    text = file.read_text()
    file.write_text(text.replace('"step": 4', '"step": 4,\n  "step": 6', 1))
    line = text[: text.index('"step": 4')].count("\n") + 2
    assert_refused_in_process(
        *resume_args(checkpoint, training_data.corpus, tmp_path / "resumed", 6),
        sentence=f'{file} does not load as a checkpoint record: an object repeats the key "step" '
        f"on line {line}",
    )


def test_a_model_configuration_that_repeats_a_key(
    tmp_path, training_data, assert_refused_in_process
):
    model = Path(shutil.copytree(training_data.model, tmp_path / "model"))
    config = json.loads((model / "config.json").read_text())
    (model / "config.json").write_text(
        json.dumps(config, indent=1)[:-2] + f',\n "layers": {config["layers"] + 1}\n}}'
    )
    line = len((model / "config.json").read_text().splitlines()) - 1
    assert_refused_in_process(
        "model", "sample", "--model", model, "--seed", 1,
        sentence=f"{model / 'config.json'} does not load as a model configuration: an object "
        f'repeats the key "layers" on line {line}',
    )  # fmt: skip

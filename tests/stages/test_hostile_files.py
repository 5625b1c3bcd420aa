"""Hostile files through the real commands, one test per class: an input that is no regular file
(a FIFO without a writer, a character device, a socket) refused at once; a file past its kind's
size refused before it is read; a run's record that is a symbolic link or no regular file refused
before anything is written, the file it points to untouched. Each refusal: the sentence, exit 1,
and nothing written."""

from __future__ import annotations

import hashlib
import json
import os
import resource
import shutil
import signal
import socket
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc
import pytest

from forgery import reseal_corpus
from zrodlo.storage.digest import json_sha256
from zrodlo.storage.inputs import SMALL_FILE

SPARSE = 4 << 30  # a sparse file of 4 GiB: read whole, it would take that much memory


@pytest.fixture(autouse=True)
def no_hang() -> Iterator[None]:
    """A command that waits on a FIFO fails the test after 20 s instead of hanging the suite."""

    def hung(signum, frame):
        raise AssertionError("the command waited on its input")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(20)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def special(kind: str, path: Path) -> Path:
    """A file of `kind` at `path` that no regular read can finish: a FIFO nobody writes,
    /dev/zero, a socket."""
    if kind == "a character device":
        return Path("/dev/zero")
    if kind == "a FIFO":
        os.mkfifo(path)
    else:
        listening = socket.socket(socket.AF_UNIX)
        listening.bind(str(path))
        LISTENING.append(listening)  # bound while the tests run, closed with the process
    return path


LISTENING: list[socket.socket] = []
KINDS = ["a FIFO", "a character device", "a socket"]


def documents_readers(documents: Path, training_data, tmp_path: Path) -> dict[str, list]:
    """The commands that read a documents file (import reads a table: `documents` is its CSV)."""
    return {
        "tokenizer fit": ["tokenizer", "fit", "--documents", documents, "--output", tmp_path / "t"],
        "corpus prepare": [
            "corpus", "prepare", "--documents", documents, "--tokenizer", training_data.tokenizer,
            "--output", tmp_path / "c",
        ],
        "documents assign": [
            "documents", "assign", "--documents", documents, "--output", tmp_path / "s.json",
        ],
        "documents import": [
            "documents", "import", "--source", documents, "--output", tmp_path / "d.jsonl",
        ],
    }  # fmt: skip


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    "command", ["tokenizer fit", "corpus prepare", "documents assign", "documents import"]
)
def test_an_input_that_is_no_regular_file_is_refused_without_waiting(
    kind, command, training_data, tmp_path, assert_refused_in_process
):
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    table = command == "documents import"
    documents = special(kind, inputs / ("documents.csv" if table else "documents.jsonl"))
    if table and kind == "a character device":
        documents = inputs / "zero.csv"
        documents.symlink_to("/dev/zero")  # import tells a table by its suffix
    args = documents_readers(documents, training_data, tmp_path)[command]
    sentence = f"{documents} is {kind}; a documents file is expected there"
    if table:
        sentence = (
            f"{documents} is neither a folder nor a .txt, .jsonl, .parquet or .csv file; import "
            "reads those five forms"
        )
    assert_refused_in_process(*args, sentence=sentence)


def sparse(path: Path) -> Path:
    path.unlink(missing_ok=True)
    with open(path, "wb") as handle:
        handle.truncate(SPARSE)
    return path


def test_files_past_their_kinds_size_are_refused_before_they_are_read(
    training_data, trained_run, tmp_path, assert_refused_in_process
):
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB
    tokenizer = Path(shutil.copytree(training_data.tokenizer, tmp_path / "tokenizer"))
    model = Path(shutil.copytree(training_data.model, tmp_path / "model"))
    corpus = Path(shutil.copytree(training_data.corpus, tmp_path / "corpus"))
    too_large = f"holds {SPARSE} bytes, more than the {SMALL_FILE} a file of its kind holds"
    cases: list[tuple[Path, list, str]] = [
        (
            tokenizer / "tokenizer.json",
            ["model", "init", "--tokenizer", tokenizer, "--output", tmp_path / "m", "--layers",
             1, "--heads", 2, "--d-model", 16, "--d-ff", 32, "--positions", 16, "--dropout", 0,
             "--seed", 1],
            "",
        ),
        (
            model / "config.json",
            ["model", "sample", "--model", model, "--prompt", "a", "--tokens", 2, "--seed", 1],
            "",
        ),
        (
            corpus / "corpus.json",
            ["model", "evaluate", "--model", trained_run / "step-6", "--corpus", corpus],
            "",
        ),
    ]  # fmt: skip
    for file, args, _ in cases:
        sparse(file)
        assert_refused_in_process(*args, sentence=f"{file} {too_large}", also=[])
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak < (512 << 10)


RECORDS = ["steps.csv", "ledger.jsonl", "timing.csv", "held_out.csv", "run.json"]


@pytest.fixture
def own_run(tmp_path: Path, trained_run: Path) -> Path:
    """A copy of trained_run whose step-6 is gone, as a kill before its checkpoint leaves it."""
    run = Path(shutil.copytree(trained_run, tmp_path / "run"))
    shutil.rmtree(run / "step-6")
    return run


def resume_into(run: Path, training_data, resume_args) -> list:
    return resume_args(run / "step-4", training_data.corpus, run, 6, {"--checkpoint-every": 2})


@pytest.mark.parametrize("record", RECORDS)
def test_a_record_that_is_a_link_is_refused_and_what_it_points_to_is_untouched(
    record, own_run, training_data, resume_args, tmp_path, assert_refused_in_process
):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    target = elsewhere / record
    target.write_bytes((own_run / record).read_bytes() if (own_run / record).exists() else b"")
    (own_run / record).unlink(missing_ok=True)
    (own_run / record).symlink_to(target)
    assert_refused_in_process(
        *resume_into(own_run, training_data, resume_args),
        sentence=f"{own_run / record} is a symbolic link; Zrodlo appends records only to regular "
        "files, never through a link",
    )


def test_a_record_that_is_a_fifo_is_refused(
    own_run, training_data, resume_args, assert_refused_in_process
):
    (own_run / "timing.csv").unlink()
    os.mkfifo(own_run / "timing.csv")
    assert_refused_in_process(
        *resume_into(own_run, training_data, resume_args),
        sentence=f"{own_run / 'timing.csv'} is no regular file; Zrodlo appends records only to "
        "regular files",
    )


def test_a_timing_file_that_is_a_link_is_refused(
    training_data, dropout_model, train_args, tmp_path, assert_refused_in_process
):
    target = tmp_path / "elsewhere.csv"
    target.write_text("kept\n")
    timing = tmp_path / "timing.csv"
    timing.symlink_to(target)
    assert_refused_in_process(
        *train_args(dropout_model, training_data.corpus, tmp_path / "run", 2, {"--timing": timing}),
        sentence=f"{timing} is a symbolic link; Zrodlo appends records only to regular files, "
        "never through a link",
    )


def test_a_tokenizer_holding_a_lone_surrogate_is_refused_though_its_digest_matches(
    training_data, tmp_path, assert_refused_in_process
):
    tokenizer = Path(shutil.copytree(training_data.tokenizer, tmp_path / "tokenizer"))
    file = tokenizer / "tokenizer.json"
    document = json.loads(file.read_text())
    document["characters"].append("\ud800")  # above every other character: still in order
    canonical = {key: document[key] for key in ("kind", "special", "characters")}
    document["digest"] = json_sha256(canonical)
    document["vocab_size"] += 1
    text = json.dumps(document, indent=2)  # the surrogate as the escape \ud800
    file.write_text(text)
    line = text[: text.index("\\ud800")].count("\n") + 1
    assert_refused_in_process(
        "model", "init", "--tokenizer", tokenizer, "--output", tmp_path / "model", "--layers", 1,
        "--heads", 2, "--d-model", 16, "--d-ff", 32, "--positions", 16, "--dropout", 0,
        "--seed", 1,
        sentence=f"{file} does not load as a tokenizer: a string holds a lone surrogate, which is "
        f"no text on line {line}",
    )  # fmt: skip


def test_a_corpus_listing_a_document_without_an_id_is_refused_though_its_digests_match(
    training_data, dropout_model, train_args, tmp_path, assert_refused_in_process
):
    corpus = Path(shutil.copytree(training_data.corpus, tmp_path / "corpus"))
    listing = corpus / "documents.arrow"
    table = ipc.open_file(pa.memory_map(str(listing))).read_all()
    ids = pa.array([None, *table.column("id").to_pylist()[1:]], pa.string())
    with ipc.new_file(str(listing), table.schema) as writer:
        writer.write_table(table.set_column(0, "id", ids))
    reseal_corpus(corpus, documents_sha256=hashlib.sha256(listing.read_bytes()).hexdigest())
    sentence = f"{listing} does not hold the columns id and tokens of a corpus"
    assert_refused_in_process(
        *train_args(dropout_model, corpus, tmp_path / "run", 2), sentence=sentence
    )
    assert_refused_in_process(
        "model", "evaluate", "--model", dropout_model, "--corpus", training_data.corpus,
        "--baseline", corpus, sentence=sentence,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("last", "problem"),
    [
        (b'{"step": 4, "windows": "ab\n', "Unterminated string starting at: line 1 column 24 (char 23)"),
        (b'{"step": 4, "\xff": 1}\n', "'utf-8' codec can't decode byte 0xff in position 13: invalid start byte"),
    ],
)  # fmt: skip
def test_a_ledger_whose_last_line_is_no_entry_is_refused_by_its_number(
    own_run, training_data, resume_args, assert_refused_in_process, last, problem
):
    ledger = own_run / "ledger.jsonl"
    lines = ledger.read_bytes().splitlines(keepends=True)
    kept = [line for line in lines if json.loads(line)["step"] <= 4]
    ledger.write_bytes(b"".join(kept) + last)
    assert_refused_in_process(
        *resume_into(own_run, training_data, resume_args),
        sentence=f"{ledger} line {len(kept) + 1} does not load as a ledger entry: {problem}",
    )

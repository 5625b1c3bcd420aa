"""Mutated artifacts of every kind fed to every command that reads them: each case ends in success
or in one clear refusal, never a traceback, a crash, a hang, a file read past its size, a write
before the refusal or a write outside the paths the command names.

The cases are drawn from a seeded generator, so a failure names a case that reruns alike:
ZRODLO_FUZZ_CASES (default 100) sets how many, ZRODLO_FUZZ_SEED (default 0) which; the longer
sweep is `ZRODLO_FUZZ_CASES=1000 .venv/bin/python -m pytest -s tests/test_fuzz.py`. Each case
copies the artifacts a command reads into a directory of its own, mutates one file (its bytes, its
JSON, a safetensors header, an AdamW moment; or replaces it with a link to a copy outside, a FIFO
or a sparse file of 4 GiB), and runs the command through `fork_runner.py` with a timeout. A
mutation of bytes that a recorded digest covers, left unsealed, must be refused, and so must
forged moments and a run's record that is a link or a FIFO; a mutation sealed again (the digests
recomputed, as a build with other code could write them) or of a file no digest covers may also
be accepted, if nothing breaks. The counts are printed (pytest -s shows them).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import stat
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from zrodlo.storage.digest import json_sha256

# In `make test`, not `make check`: hundreds of mutated artifacts, one command each.
pytestmark = pytest.mark.slow

CASES = int(os.environ.get("ZRODLO_FUZZ_CASES", "100"))
SEED = int(os.environ.get("ZRODLO_FUZZ_SEED", "0"))
TIMEOUT_S = 60.0
RUNNER = Path(__file__).parent / "fork_runner.py"

HOSTILE_VALUES: list[object] = [
    None, True, False, -1, 0, 1, 2.5, 1e308, -1e308, 10**30, 2**64, "", "x", "../../etc/hostname",
    "/etc/hostname", [], {}, [1, 2], {"a": 1}, "step-1", 65536, 10**7, 10**12, 2**32 + 1,
]  # fmt: skip
SPARSE = 4 << 30  # a file of 4 GiB that takes no disk: read whole, it fills memory
PEAK_KIB = 1 << 20  # a command that read such a file whole would pass 1 GiB


@dataclass
class Case:
    number: int
    kind: str  # the artifact mutated
    command: str  # the command reading it
    file: str  # the file mutated, relative to the case directory
    mutation: str
    sealed: bool  # the digests were recomputed after the mutation
    must_refuse: bool


# ---------------------------------------------------------------------------------------------
# Mutations: each takes the file's bytes and a generator, and gives other bytes, or None to delete
# the file, or a directory marker.

DIRECTORY = object()


def flip_bit(data: bytes, rng: random.Random) -> bytes:
    if not data:
        return b"\x00"
    position = rng.randrange(len(data) * 8)
    changed = bytearray(data)
    changed[position // 8] ^= 1 << (position % 8)
    return bytes(changed)


def truncate(data: bytes, rng: random.Random) -> bytes:
    return data[: rng.randrange(len(data))] if data else b""


def overwrite_span(data: bytes, rng: random.Random) -> bytes:
    start = rng.randrange(len(data) + 1)
    span = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
    return data[:start] + span + data[start + len(span) :]


def insert_bytes(data: bytes, rng: random.Random) -> bytes:
    start = rng.randrange(len(data) + 1)
    return data[:start] + bytes(rng.randrange(256) for _ in range(rng.randint(1, 8))) + data[start:]


def doubled(data: bytes, rng: random.Random) -> bytes:
    return data + data


def json_surrogate(data: bytes, rng: random.Random) -> bytes:
    """A lone surrogate escaped into the first string: valid JSON that holds no text."""
    quote = data.find(b'"')
    return data[: quote + 1] + b"\\ud800" + data[quote + 1 :] if quote >= 0 else data + b"\n"


def forged_moment(data: bytes, rng: random.Random) -> bytes:
    """One AdamW moment set to what no run writes: not finite, or a negative second moment."""
    from safetensors.torch import load, save

    state = load(data)
    name = rng.choice(sorted(key for key in state if key.endswith(("exp_avg", "exp_avg_sq"))))
    state[name] = state[name].clone()
    state[name].view(-1)[0] = rng.choice([float("inf"), float("nan"), -1.0])
    return save(state)


def _json_paths(value: object, path: tuple = ()) -> list[tuple]:
    paths = [path]
    if isinstance(value, dict):
        for key, inner in value.items():
            paths += _json_paths(inner, (*path, key))
    elif isinstance(value, list):
        for index, inner in enumerate(value[:20]):
            paths += _json_paths(inner, (*path, index))
    return paths


def _set(value: object, path: tuple, new: object) -> object:
    if not path:
        return new
    inner = _set(value[path[0]], path[1:], new)  # type: ignore[index]
    if isinstance(value, dict):
        return {**value, path[0]: inner}
    copy = list(value)  # type: ignore[arg-type]
    copy[path[0]] = inner
    return copy


def _json_lines(data: bytes) -> list[object] | None:
    """The JSON values of a file of one value or of one value a line, None if it holds no JSON."""
    try:
        return [json.loads(data)]
    except (ValueError, RecursionError):  # what a hostile file gives Python's json
        pass
    try:
        return [json.loads(line) for line in data.splitlines() if line.strip()]
    except (ValueError, RecursionError):  # what a hostile file gives Python's json
        return None


def json_value(data: bytes, rng: random.Random) -> bytes:
    """One value anywhere in a JSON file (or one line of a JSONL file) set to a hostile one."""
    values = _json_lines(data)
    if not values:
        return overwrite_span(data, rng)
    line = rng.randrange(len(values))
    path = rng.choice(_json_paths(values[line]))
    values[line] = _set(values[line], path, rng.choice(HOSTILE_VALUES))
    return _dumped(values, len(values) > 1)


def json_drop_key(data: bytes, rng: random.Random) -> bytes:
    values = _json_lines(data)
    if not values:
        return truncate(data, rng)
    line = rng.randrange(len(values))
    objects = [p for p in _json_paths(values[line]) if p and isinstance(p[-1], str)]
    if not objects:
        return json_value(data, rng)
    path = rng.choice(objects)
    parent = values[line]
    for step in path[:-1]:
        parent = parent[step]  # type: ignore[index]
    trimmed = {k: v for k, v in parent.items() if k != path[-1]}  # type: ignore[union-attr]
    values[line] = _set(values[line], path[:-1], trimmed)
    return _dumped(values, len(values) > 1)


def json_unknown_key(data: bytes, rng: random.Random) -> bytes:
    values = _json_lines(data)
    if not values or not isinstance(values[0], dict):
        return insert_bytes(data, rng)
    values[0] = {**values[0], "unknown_field": rng.choice(HOSTILE_VALUES)}
    return _dumped(values, len(values) > 1)


def json_repeated_key(data: bytes, rng: random.Random) -> bytes:
    """The first key of the file stated a second time, with another value: text JSON allows it."""
    opening = data.find(b"{")
    if opening < 0:
        return doubled(data, rng)
    values = _json_lines(data)
    first = next(iter(values[0]), None) if values and isinstance(values[0], dict) else None
    if first is None:
        return insert_bytes(data, rng)
    repeated = json.dumps({first: rng.choice(HOSTILE_VALUES)})[1:-1].encode() + b", "
    return data[: opening + 1] + repeated + data[opening + 1 :]


def json_deep(data: bytes, rng: random.Random) -> bytes:
    """A value nested 100,000 deep, or an integer of 5,000 digits, in place of the first value."""
    colon = data.find(b":")
    if colon < 0:
        return doubled(data, rng)
    end = colon + 1
    while end < len(data) and data[end : end + 1] not in (b",", b"}", b"\n"):
        end += 1
    hostile = b"[" * 100_000 + b"]" * 100_000 if rng.random() < 0.5 else b"9" * 5000
    return data[: colon + 1] + b" " + hostile + data[end:]


def safetensors_header(data: bytes, rng: random.Random) -> bytes:
    """One field of a safetensors header (a dtype, a shape, an offset) changed, the length kept
    consistent, so the file parses as far as what the field means."""
    if len(data) < 8:
        return flip_bit(data, rng)
    size = int.from_bytes(data[:8], "little")
    try:
        header = json.loads(data[8 : 8 + size])
    except (ValueError, RecursionError):  # what a hostile file gives Python's json
        return flip_bit(data, rng)
    names = [name for name in header if name != "__metadata__"]
    if not names:
        return flip_bit(data, rng)
    name = rng.choice(names)
    field = rng.choice(["dtype", "shape", "data_offsets", "name"])
    entry = dict(header[name])
    if field == "dtype":
        entry["dtype"] = rng.choice(["F16", "BF16", "F64", "I64", "U8", "BOOL", "F8_E4M3", "X"])
    elif field == "shape":
        entry["shape"] = rng.choice([[], [0], [1], [2**40], [-1], entry["shape"][::-1] or [3]])
    elif field == "data_offsets":
        low, high = entry["data_offsets"]
        entry["data_offsets"] = rng.choice([[high, low], [low, high + 4], [0, 0], [low, 2**62]])
    else:
        header[name + ".extra"] = header.pop(name)
        name = name + ".extra"
    header[name] = entry
    body = json.dumps(header).encode()
    body += b" " * (-len(body) % 8)
    return len(body).to_bytes(8, "little") + body + data[8 + size :]


def _dumped(values: list[object], lines: bool) -> bytes:
    if lines:
        return b"".join(json.dumps(v, ensure_ascii=False).encode() + b"\n" for v in values)
    return json.dumps(values[0], indent=2, ensure_ascii=False).encode()


BYTE_MUTATIONS: dict[str, Callable[[bytes, random.Random], bytes]] = {
    "flip_bit": flip_bit,
    "truncate": truncate,
    "overwrite_span": overwrite_span,
    "insert_bytes": insert_bytes,
    "doubled": doubled,
}
JSON_MUTATIONS: dict[str, Callable[[bytes, random.Random], bytes]] = {
    "json_value": json_value,
    "json_drop_key": json_drop_key,
    "json_unknown_key": json_unknown_key,
    "json_repeated_key": json_repeated_key,
    "json_deep": json_deep,
    "json_surrogate": json_surrogate,
}
# What replaces the file itself: a link to a copy outside the case (which must never change), a
# FIFO no process writes, a sparse file of gigabytes.
FILE_MUTATIONS = ("symlink_out", "fifo", "sparse")


def mutations_for(name: str) -> list[str]:
    kinds = [*BYTE_MUTATIONS, "delete", "directory", *FILE_MUTATIONS]
    if name.endswith((".json", ".jsonl")):
        kinds += [*JSON_MUTATIONS] * 2  # structure-aware ones reach further than random bytes
    if name.endswith(".safetensors"):
        kinds += ["safetensors_header"] * 3
    if name.endswith("optimizer.safetensors"):
        kinds += ["forged_moment"] * 3
    return kinds


def mutate(path: Path, mutation: str, rng: random.Random, outside: Path) -> None:
    if mutation == "symlink_out":
        outside.mkdir()
        target = outside / path.name
        shutil.move(path, target)
        path.symlink_to(target)
        return
    if mutation == "fifo":
        path.unlink()
        os.mkfifo(path)
        return
    if mutation == "sparse":
        with open(path, "r+b") as handle:
            handle.truncate(SPARSE)
        return
    if mutation == "delete":
        path.unlink()
        return
    if mutation == "directory":
        path.unlink()
        path.mkdir()
        return
    data = path.read_bytes()
    apply = {
        **BYTE_MUTATIONS,
        **JSON_MUTATIONS,
        "safetensors_header": safetensors_header,
        "forged_moment": forged_moment,
    }
    changed = apply[mutation](data, rng)
    if changed == data:  # a mutation that changed nothing changes one bit instead
        changed = flip_bit(data, rng)
    path.write_bytes(changed)


# ---------------------------------------------------------------------------------------------
# Sealing: recompute the digests that cover a mutated file, as a build with other code would.


def _sha256(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def _rewrite_json(path: Path, change: Callable[[dict], None], digest_key: str | None) -> None:
    try:
        value = json.loads(path.read_bytes())
    except (ValueError, RecursionError):  # what a hostile file gives Python's json
        return
    if not isinstance(value, dict):
        return
    change(value)
    if digest_key is not None:
        body = {key: inner for key, inner in value.items() if key != digest_key}
        value = {**body, digest_key: json_sha256(body)}
    path.write_text(json.dumps(value, indent=2), encoding="utf-8")


def _list(files_key: str, name: str, sha: str | None) -> Callable[[dict], None]:
    def change(value: dict) -> None:
        # Only a file the listing lists: model.json lists no optimizer state.
        if isinstance(value.get(files_key), dict) and sha is not None and name in value[files_key]:
            value[files_key][name] = sha

    return change


def seal(directory: Path, name: str) -> None:
    """Recompute, in a model directory, checkpoint or corpus, the digests that cover file `name`."""
    mutated = directory / name
    sha = _sha256(mutated) if mutated.is_file() else None
    if (directory / "corpus.json").is_file():
        if name in CORPUS_DIGEST_KEYS:
            _rewrite_json(
                directory / "corpus.json",
                _list_key(CORPUS_DIGEST_KEYS[name], sha),
                "manifest_sha256",
            )
        elif name == "corpus.json":
            _rewrite_json(mutated, lambda value: None, "manifest_sha256")
        return
    if name == "trainer.json":
        _rewrite_json(mutated, lambda value: None, "record_sha256")
        return
    if name != "model.json" and (directory / "model.json").is_file():
        _rewrite_json(directory / "model.json", _list("files", name, sha), None)
    if (directory / "trainer.json").is_file():
        listing = directory / "model.json"
        model_sha = _sha256(listing) if listing.is_file() else None
        change_file = _list("files", name, sha)
        change_listing = _list("files", "model.json", model_sha)
        _rewrite_json(
            directory / "trainer.json",
            lambda value: (change_file(value), change_listing(value)),
            "record_sha256",
        )


def _list_key(key: str, sha: str | None) -> Callable[[dict], None]:
    def change(value: dict) -> None:
        if sha is not None:
            value[key] = sha

    return change


# ---------------------------------------------------------------------------------------------
# The artifacts and the commands that read them.


@dataclass(frozen=True)
class Reader:
    kind: str  # which artifact it reads: the one a case mutates
    command: str
    args: Callable[[Path], list[object]]  # given the case directory
    # Files of the artifact a recorded digest covers for this command, relative to the case.
    covered: tuple[str, ...]


MODEL_FILES = ("config.json", "tokenizer.json", "model.safetensors", "model.json")
CHECKPOINT_FILES = (*MODEL_FILES, "optimizer.safetensors", "trainer.json")
CORPUS_FILES = ("corpus/corpus.json", "corpus/tokens.bin", "corpus/documents.arrow")
CORPUS_DIGEST_KEYS = {"tokens.bin": "tokens_sha256", "documents.arrow": "documents_sha256"}
CHECKPOINT = "run/step-4"
TINY_TRAIN = [
    "--steps", "2", "--context", "9", "--batch-size", "4", "--learning-rate", "0.01",
    "--beta1", "0.9", "--beta2", "0.99", "--epsilon", "1e-8", "--weight-decay", "0.1",
    "--decay-scope", "all", "--seed", "3", "--precision", "f32", "--device", "cpu",
]  # fmt: skip
TINY_MODEL = [
    "--layers", "1", "--heads", "2", "--d-model", "16", "--d-ff", "32", "--positions", "16",
    "--dropout", "0", "--seed", "1",
]  # fmt: skip


def assign(c: Path) -> list[object]:
    documents, output = c / "documents.jsonl", c / "out/splits.json"
    return ["documents", "assign", "--documents", documents, "--output", output]


def split(c: Path) -> list[object]:
    documents, splits, output = c / "documents.jsonl", c / "splits.json", c / "out/pools"
    return ["documents", "split", "--documents", documents, "--splits", splits, "--output", output]


def fit(c: Path) -> list[object]:
    documents, output = c / "documents.jsonl", c / "out/tokenizer"
    return ["tokenizer", "fit", "--documents", documents, "--output", output]


def prepare(c: Path) -> list[object]:
    documents, tokenizer, output = c / "documents.jsonl", c / "tokenizer", c / "out/corpus"
    return [
        "corpus",
        "prepare",
        "--documents",
        documents,
        "--tokenizer",
        tokenizer,
        "--output",
        output,
    ]


def init(c: Path) -> list[object]:
    tokenizer, output = c / "tokenizer", c / "out/model"
    return ["model", "init", "--tokenizer", tokenizer, "--output", output, *TINY_MODEL]


def train(model: str) -> Callable[[Path], list[object]]:
    def args(c: Path) -> list[object]:
        start, corpus, output = c / model, c / "corpus", c / "out/run"
        return [
            "model",
            "train",
            "--model",
            start,
            "--corpus",
            corpus,
            "--output",
            output,
            *TINY_TRAIN,
        ]

    return args


def evaluate(model: str) -> Callable[[Path], list[object]]:
    def args(c: Path) -> list[object]:
        scored, corpus, output = c / model, c / "corpus", c / "out/metrics.json"
        return ["model", "evaluate", "--model", scored, "--corpus", corpus, "--output", output]

    return args


def sample(model: str) -> Callable[[Path], list[object]]:
    def args(c: Path) -> list[object]:
        return ["model", "sample", "--model", c / model, "--tokens", "5", "--seed", "1"]

    return args


def resume(checkpoint: str, into: str, steps: int) -> Callable[[Path], list[object]]:
    def args(c: Path) -> list[object]:
        start, corpus, output = c / checkpoint, c / "corpus", c / into
        flags = ["--output", output, "--steps", steps, "--device", "cpu"]
        return ["checkpoint", "resume", "--checkpoint", start, "--corpus", corpus, *flags]

    return args


def diff(c: Path) -> list[object]:
    return ["checkpoint", "diff", c / "run", c / "run-copy", "--output", c / "out/diff.json"]


def _in(directory: str, names: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(f"{directory}/{name}" for name in names)


READERS: list[Reader] = [
    Reader("documents", "documents assign", assign, ()),
    Reader("documents", "documents split", split, ()),
    Reader("documents", "tokenizer fit", fit, ()),
    Reader("documents", "corpus prepare", prepare, ()),
    Reader("splits", "documents split", split, ()),
    Reader("tokenizer", "corpus prepare", prepare, ()),
    Reader("tokenizer", "model init", init, ()),
    Reader("corpus", "model train", train("model"), CORPUS_FILES),
    Reader("corpus", "model evaluate", evaluate("model"), CORPUS_FILES),
    Reader("corpus", "checkpoint resume", resume(CHECKPOINT, "out/run", 6), CORPUS_FILES),
    Reader("model", "model train", train("model"), _in("model", MODEL_FILES)),
    Reader("model", "model evaluate", evaluate("model"), _in("model", MODEL_FILES)),
    Reader("model", "model sample", sample("model"), _in("model", MODEL_FILES)),
    Reader("checkpoint", "model train", train(CHECKPOINT), _in(CHECKPOINT, MODEL_FILES)),
    Reader("checkpoint", "model evaluate", evaluate(CHECKPOINT), _in(CHECKPOINT, MODEL_FILES)),
    Reader("checkpoint", "model sample", sample(CHECKPOINT), _in(CHECKPOINT, MODEL_FILES)),
    Reader(
        "checkpoint",
        "checkpoint resume",
        resume(CHECKPOINT, "out/run", 6),
        _in(CHECKPOINT, CHECKPOINT_FILES),
    ),
    # A resume of the run's last checkpoint into its own directory, continuing its records.
    Reader("run", "checkpoint resume", resume("run/step-6", "run", 8), ()),
    Reader("run", "checkpoint diff", diff, ()),
]
# The files of each kind of artifact a case may mutate, relative to the case directory.
LOGS = ("ledger.jsonl", "run.json", "steps.csv", "held_out.csv", "timing.csv")
MUTABLE = {
    "documents": ["documents.jsonl"],
    "splits": ["splits.json"],
    "tokenizer": ["tokenizer/tokenizer.json"],
    "corpus": list(CORPUS_FILES),
    "model": list(_in("model", MODEL_FILES)),
    "checkpoint": list(_in(CHECKPOINT, CHECKPOINT_FILES)),
    "run": list(_in("run", LOGS)),
}
# Files whose digest is taken over their parsed content, so a change of layout alone is no change.
CONTENT_DIGESTED = {"trainer.json", "corpus.json"}


@pytest.fixture
def originals(training_data, trained_run, tmp_path_factory, run_zrodlo) -> Path:
    """Every artifact a case starts from, side by side as the readers' arguments expect them."""
    root = tmp_path_factory.mktemp("fuzz-originals")
    shutil.copy(training_data.documents, root / "documents.jsonl")
    for name in ("tokenizer", "corpus", "model"):
        shutil.copytree(getattr(training_data, name), root / name)
    for run in ("run", "run-copy"):
        shutil.copytree(trained_run, root / run)
    returncode, _, stderr = run_zrodlo(
        "documents", "assign", "--documents", root / "documents.jsonl", "--output",
        root / "splits.json", "--validation", 0.34, "--test", 0.34, cwd=root,
    )  # fmt: skip
    assert (returncode, stderr) == (0, "")
    return root


def draw_case(
    number: int, rng: random.Random, originals: Path, directory: Path, outside: Path
) -> tuple[Case, Reader]:
    reader = rng.choice(READERS)
    shutil.copytree(originals, directory)
    name = rng.choice(MUTABLE[reader.kind])
    mutation = rng.choice(mutations_for(name))
    path = directory / name
    before = path.read_bytes()
    mutate(path, mutation, rng, outside)
    # A file deleted, made a directory or replaced by another kind has no bytes to seal; forged
    # moments are always sealed, as another build would write them.
    sealed = reader.kind in ("corpus", "model", "checkpoint") and rng.random() < 0.4
    sealed = (sealed or mutation == "forged_moment") and mutation not in FILE_MUTATIONS
    sealed = sealed and path.is_file()
    if sealed:
        seal(path.parent, path.name)
    unchanged_content = (
        mutation not in FILE_MUTATIONS
        and path.is_file()
        and path.name in CONTENT_DIGESTED
        and _json_lines(path.read_bytes()) == _json_lines(before)
    )
    must_refuse = (
        name in reader.covered
        and not sealed
        and not unchanged_content
        and mutation != "symlink_out"  # a link to the same bytes reads as they do
    )
    appended = (
        reader.kind == "run" and reader.command == "checkpoint resume" and name in _in("run", LOGS)
    )
    if appended and mutation in ("symlink_out", "fifo"):
        must_refuse = True  # records are appended only to regular files of the run
    if mutation == "forged_moment" and reader.command == "checkpoint resume":
        must_refuse = True
    case = Case(number, reader.kind, reader.command, name, mutation, sealed, must_refuse)
    return case, reader


def snapshot(root: Path) -> dict[str, object]:
    """Every name under `root` with its bytes; a link by its target, a directory as None, another
    kind of file by its mode, a sparse file by its size and times: none is followed or read."""

    def state(path: Path) -> object:
        info = path.lstat()
        if stat.S_ISLNK(info.st_mode):
            return ("link", os.readlink(path))
        if stat.S_ISDIR(info.st_mode):
            return None
        if not stat.S_ISREG(info.st_mode):
            return ("special", info.st_mode)
        if info.st_size >= SPARSE:
            return ("stat", info.st_size, info.st_mtime_ns)
        return path.read_bytes()

    if not root.exists():
        return {}
    return {str(path.relative_to(root)): state(path) for path in sorted(root.rglob("*"))}


def judge(case: Case, answer: dict, before: dict, after: dict, outside: tuple) -> str:
    """What a case came to: 'refused', 'accepted', 'compared', or the defect it shows; `outside`
    holds the snapshots of what lies outside the case before and after."""
    stderr, stdout = answer["stderr"], answer["stdout"]
    if answer["ended"] == "timeout":
        return "defect: hang"
    if outside[0] != outside[1]:
        return "defect: wrote outside the paths it names"
    if case.mutation == "sparse" and answer["peak_kib"] > PEAK_KIB:
        return "defect: read a file past its size"
    if answer["ended"] == "signal":
        return f"defect: killed by signal {answer['code']}"
    if "Traceback" in stderr or "Traceback" in stdout:
        return "defect: traceback"
    if answer["code"] == 0:
        if case.must_refuse:
            return "defect: silently accepted"
        return "accepted"
    if case.command == "checkpoint diff" and answer["code"] == 1 and stderr == "" and stdout:
        return "compared"  # the runs part at a step: diff's answer, not a refusal
    lines = stderr.splitlines()
    if not (len(lines) == 1 and lines[0].startswith("Error: ") and len(lines[0]) > 12):
        return "defect: not one Error: sentence"
    if stdout:
        return "defect: printed to stdout before refusing"
    if after != before:
        return "defect: wrote before refusing"
    return "refused"


def test_mutated_artifacts_are_refused_clearly_or_read_whole(originals, tmp_path):
    rng = random.Random(SEED)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb"}
    runner = subprocess.Popen(
        [sys.executable, str(RUNNER)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=Path(__file__).resolve().parent.parent,
    )
    outcomes: Counter[str] = Counter()
    by_kind: Counter[tuple[str, str]] = Counter()
    by_mutation: Counter[tuple[str, str]] = Counter()
    defects: list[str] = []
    accepted: list[str] = []
    try:
        for number in range(CASES):
            directory, outside = tmp_path / f"case-{number}", tmp_path / f"outside-{number}"
            case, reader = draw_case(number, rng, originals, directory, outside)
            args = [str(arg) for arg in reader.args(directory)]
            before, outside_before = snapshot(directory), snapshot(outside)
            request = {"args": args, "cwd": str(directory), "timeout": TIMEOUT_S}
            runner.stdin.write(json.dumps(request) + "\n")
            runner.stdin.flush()
            answer = json.loads(runner.stdout.readline())
            outside_after = snapshot(outside)
            outcome = judge(
                case, answer, before, snapshot(directory), (outside_before, outside_after)
            )
            outcomes[outcome] += 1
            by_kind[(case.kind, outcome)] += 1
            by_mutation[(case.mutation, outcome)] += 1
            if outcome == "accepted":
                accepted.append(
                    f"{case.command}: {case.file} {case.mutation}" + " sealed" * case.sealed
                )
            if outcome.startswith("defect"):
                defects.append(f"{outcome}: {case} -> {answer['stderr'][-600:]!r}")
            shutil.rmtree(directory)
            shutil.rmtree(outside, ignore_errors=True)
    finally:
        runner.stdin.close()
        runner.wait(timeout=60)
    report = {
        "seed": SEED,
        "cases": CASES,
        "outcomes": dict(sorted(outcomes.items())),
        "by_kind": {f"{kind}: {outcome}": n for (kind, outcome), n in sorted(by_kind.items())},
        "by_mutation": {
            f"{kind}: {outcome}": n for (kind, outcome), n in sorted(by_mutation.items())
        },
        "accepted": accepted,
    }
    print(json.dumps(report, indent=2))  # shown with -s: the counts the closing note quotes
    assert defects == [], "\n".join(defects)

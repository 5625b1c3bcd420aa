"""`zrodlo model init` through the real command: the three files, pinned weights, every refusal."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from safetensors.torch import load_file

from zrodlo.data.tokenizer.char import CharTokenizer
from zrodlo.model.config import ModelConfig
from zrodlo.model.presets import PRESETS
from zrodlo.model.weights import initial_weights

SHAPE = {"layers": 1, "heads": 2, "d-model": 8, "d-ff": 16, "positions": 8}
# sha256 of model.safetensors for SHAPE, vocab_size 6 and --seed 7: the ChaCha20 draws are the
# same on every machine, so this digest is too.
PINNED_SHA256 = "5a30c056ae39efff1d9da9fb8bffe407e37a69d30b50499bfcefc808fe8af86f"
FILES = ["config.json", "model.json", "model.safetensors", "tokenizer.json"]


@pytest.fixture
def tokenizer(tmp_path: Path) -> Path:
    """A tokenizer directory fitted on "abc" (vocab_size 6), written with the library."""
    directory = tmp_path / "tokenizer"
    directory.mkdir()
    CharTokenizer.fit(["abc"]).save(directory)
    return directory


def init_args(root: Path, output: str = "model", **changes: object) -> list[object]:
    """The arguments of `model init` for SHAPE, --dropout 0.1 and --seed 7, with `changes`."""
    values: dict[str, object] = {
        "tokenizer": root / "tokenizer",
        "output": root / output,
        **SHAPE,
        "dropout": 0.1,
        "seed": 7,
    }
    values.update({name.replace("_", "-"): value for name, value in changes.items()})
    return ["model", "init", *(item for n, v in values.items() for item in (f"--{n}", v))]


@pytest.fixture(scope="module")
def twice(tmp_path_factory) -> tuple[Path, list[tuple[int, str, str]]]:
    """`model init` run twice with the same arguments, into `first` and `second`."""
    root = tmp_path_factory.mktemp("init")
    (root / "tokenizer").mkdir()
    CharTokenizer.fit(["abc"]).save(root / "tokenizer")
    outcomes = [_init(root, output) for output in ("first", "second")]
    return root, outcomes


def _init(root: Path, output: str) -> tuple[int, str, str]:
    completed = subprocess.run(
        [str(Path(sys.executable).parent / "zrodlo"), *map(str, init_args(root, output))],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    return completed.returncode, completed.stdout, completed.stderr


def test_init_writes_config_tokenizer_and_pinned_weights(twice):
    root, outcomes = twice
    model = root / "first"
    digest = hashlib.sha256((model / "model.safetensors").read_bytes()).hexdigest()
    assert outcomes[0] == (
        0,
        f"wrote {model}: 776 parameters, model.safetensors sha256 {digest}\n",
        "",
    )
    assert digest == PINNED_SHA256
    assert sorted(p.name for p in model.iterdir()) == FILES
    assert json.loads((model / "config.json").read_text()) == {
        "vocab_size": 6,
        "positions": 8,
        "d_model": 8,
        "layers": 1,
        "heads": 2,
        "d_ff": 16,
        "dropout": 0.1,
        "attention_dropout": 0.0,
    }
    tokenizer = (root / "tokenizer" / "tokenizer.json").read_bytes()
    assert (model / "tokenizer.json").read_bytes() == tokenizer


def test_same_arguments_give_identical_bytes(twice, snapshot):
    root, outcomes = twice
    assert outcomes[1][0] == 0
    assert snapshot(root / "second") == snapshot(root / "first")


def test_init_weights_are_the_library_initial_weights(twice):
    root, _ = twice
    config = ModelConfig.from_json(json.loads((root / "first/config.json").read_text()), "")
    written = load_file(root / "first" / "model.safetensors")
    expected = initial_weights(config, 7)
    assert written.keys() == expected.keys()
    assert all(written[name].equal(expected[name]) for name in expected)


# Every refusal imports torch first; most run in this process to keep the file fast, and a few
# through the console script in a subprocess, which is what users run.


def test_init_refuses_an_existing_output(tmp_path, tokenizer, assert_refused):
    (tmp_path / "model").mkdir()
    assert_refused(
        *init_args(tmp_path),
        sentence=f"{tmp_path / 'model'} already exists; Zrodlo writes a new directory and overwrites nothing",
    )


def test_init_refuses_an_output_that_is_a_file(tmp_path, tokenizer, assert_refused_in_process):
    (tmp_path / "model").write_text("mine")
    assert_refused_in_process(
        *init_args(tmp_path),
        sentence=f"{tmp_path / 'model'} exists and is not a directory; Zrodlo writes a new directory",
    )


def test_init_makes_the_missing_parents_of_its_output(tmp_path, tokenizer, run_zrodlo):
    returncode, _, stderr = run_zrodlo(*init_args(tmp_path, "missing/model"), cwd=tmp_path)
    assert (returncode, stderr) == (0, "")
    assert (tmp_path / "missing" / "model" / "model.safetensors").is_file()


def test_init_refuses_heads_that_do_not_divide_d_model(tmp_path, tokenizer, assert_refused):
    assert_refused(
        *init_args(tmp_path, heads=3),
        sentence="--heads 3 does not divide --d-model 8; each head takes an equal share of the model width",
    )


@pytest.mark.parametrize(
    ("flag", "value"),
    [("layers", 0), ("heads", -1), ("d-model", 0), ("d-ff", -2), ("positions", 0)],
)
def test_init_refuses_a_size_below_one(tmp_path, tokenizer, assert_refused_in_process, flag, value):
    assert_refused_in_process(
        *init_args(tmp_path, **{flag: value}),
        sentence=f"--{flag} is {value}; it must be a whole number of one or more",
    )


@pytest.mark.parametrize(
    ("flag", "value", "shown"),
    [("dropout", "1", "1.0"), ("dropout", "-0.1", "-0.1"), ("attention-dropout", "nan", "nan")],
)
def test_init_refuses_dropout_outside_zero_to_one(
    tmp_path, tokenizer, assert_refused_in_process, flag, value, shown
):
    assert_refused_in_process(
        *init_args(tmp_path, **{flag: value}),
        sentence=f"--{flag} is {shown}; it must lie from 0 up to but not including 1",
    )


@pytest.mark.parametrize("seed", [-1, 2**64])
def test_init_refuses_a_seed_out_of_range(tmp_path, tokenizer, assert_refused_in_process, seed):
    assert_refused_in_process(
        *init_args(tmp_path, seed=seed),
        sentence=f"--seed is {seed}; it must be a whole number from 0 to 18446744073709551615",
    )


def test_init_refuses_a_missing_tokenizer(tmp_path, assert_refused_in_process):
    missing = tmp_path / "tokenizer"
    assert_refused_in_process(
        *init_args(tmp_path),
        sentence=f"{missing} holds no tokenizer.json; a tokenizer is written by zrodlo tokenizer fit",
    )


def test_init_refuses_a_tokenizer_edited_after_it_was_fitted(tmp_path, tokenizer, assert_refused):
    file = tokenizer / "tokenizer.json"
    written = json.loads(file.read_text())
    written["characters"].append("d")
    file.write_text(json.dumps(written))
    edited = CharTokenizer.fit(["abcd"]).digest
    assert_refused(
        *init_args(tmp_path),
        sentence=(
            f"{file} records digest {written['digest']}, and its content has digest {edited}; "
            "the file was changed after it was fitted"
        ),
    )


def test_every_option_of_model_init_has_help(run_zrodlo, option_descriptions, tmp_path):
    returncode, stdout, _ = run_zrodlo("model", "init", "--help", cwd=tmp_path)
    assert returncode == 0
    options = option_descriptions(stdout)
    expected = {"--tokenizer", "--output", "--preset", *(f"--{flag}" for flag in SHAPE)}
    # The families' settings: gpt's, then llama's (which qwen2 and qwen3 share), then smollm3's
    # and gemma3's.
    families = {"--architecture", "--activation", "--tie-embeddings", "--kv-heads", "--rope-theta",
                "--norm-eps", "--head-dim", "--no-rope-interval", "--local-rope-theta",
                "--sliding-window", "--global-every", "--query-scalar", "--logit-cap", "--mlp",
                "--norm", "--projection-init", "--head-std", "--x0-mix",
                "--value-embeddings"}  # fmt: skip
    assert set(options) == expected | families | {
        "--dropout",
        "--attention-dropout",
        "--seed",
        "--help",
    }
    assert all(options.values()), options


@pytest.mark.parametrize("preset", list(PRESETS))
def test_a_preset_gives_the_shape_and_a_flag_given_overrides_it(
    tmp_path, tokenizer, run_zrodlo, preset
):
    args = ["--tokenizer", tokenizer, "--preset", preset, "--positions", 8, "--dropout", 0]
    returncode, _, stderr = run_zrodlo("model", "init", *args, "--seed", 1, "--output",
                                       tmp_path / "preset", cwd=tmp_path)  # fmt: skip
    assert (returncode, stderr) == (0, "")
    returncode, _, stderr = run_zrodlo("model", "init", *args, "--seed", 1, "--output",
                                       tmp_path / "fewer", "--layers", 1, cwd=tmp_path)  # fmt: skip
    assert (returncode, stderr) == (0, "")
    config = json.loads((tmp_path / "preset" / "config.json").read_text())
    assert {field: config[field] for field in PRESETS[preset]} == PRESETS[preset]
    fewer = json.loads((tmp_path / "fewer" / "config.json").read_text())
    assert fewer == {**config, "layers": 1}


def test_the_small_preset_is_the_shape_the_pipeline_always_trained():
    """params.yaml's init section held these four numbers before presets named them; the init
    stage's weights in dvc.lock are the same bytes."""
    assert PRESETS["small"] == {"layers": 4, "heads": 4, "d_model": 128, "d_ff": 512}


def test_init_refuses_a_preset_that_is_not_one(tmp_path, tokenizer, assert_refused_in_process):
    assert_refused_in_process(
        *init_args(tmp_path, preset="huge"),
        sentence="--preset huge is no preset; choose tiny, small or medium",
    )


@pytest.mark.parametrize("left_out", ["layers", "heads", "d-model", "d-ff"])
def test_init_refuses_a_shape_without_a_preset_or_the_flag(
    tmp_path, tokenizer, assert_refused_in_process, left_out
):
    args = init_args(tmp_path)
    at = args.index(f"--{left_out}")
    assert_refused_in_process(
        *args[:at], *args[at + 2 :],
        sentence=f"--{left_out} is not given; give it, or --preset (tiny, small or medium) for the "
        "whole shape",
    )  # fmt: skip

"""`zrodlo model export`: the real command's directory loaded offline by transformers, whose
logits, loss, token ids and greedy continuation are Zrodlo's."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from safetensors import safe_open

from zrodlo.data.batches import collate
from zrodlo.data.corpus import Corpus
from zrodlo.data.tokenizer import load_tokenizer
from zrodlo.data.windows import build_windows
from zrodlo.model.decoder import Decoder, build_decoder
from zrodlo.model.directory import MODEL_FILES
from zrodlo.training.checkpoint import read_model

# In `make test`, not `make check`: transformers loading the exported directory.
pytestmark = pytest.mark.slow

transformers = pytest.importorskip("transformers")  # the hf extra, which the test extra includes

ZRODLO = Path(sys.executable).parent / "zrodlo"
CONTEXT = 9  # the training fixtures' context; the tiny model has 16 positions


@pytest.fixture(scope="module")
def exported(trained_run, tmp_path_factory) -> Path:
    """trained_run's step-6 exported by the real command."""
    output = tmp_path_factory.mktemp("exported") / "gpt2"
    done = subprocess.run(
        [ZRODLO, "model", "export", "--model", trained_run / "step-6", "--output", output],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    assert done.stdout.startswith(f"wrote {output}; ")
    return output


@pytest.fixture(scope="module")
def hf_model(exported):
    model = transformers.AutoModelForCausalLM.from_pretrained(exported, local_files_only=True)
    return model.eval()


@pytest.fixture(scope="module")
def hf_tokenizer(exported):
    return transformers.AutoTokenizer.from_pretrained(exported, local_files_only=True)


def zrodlo_model(checkpoint: Path) -> Decoder:
    loaded = read_model(checkpoint)
    return build_decoder(loaded.config, loaded.weights).eval()


def test_the_directory_states_the_model_exactly(exported, trained_run):
    config = json.loads((exported / "config.json").read_text())
    ours = json.loads((trained_run / "step-6" / "config.json").read_text())
    assert (config["model_type"], config["architectures"]) == ("gpt2", ["GPT2LMHeadModel"])
    assert (config["n_embd"], config["n_layer"], config["n_head"]) == (16, 1, 2)
    assert (config["n_inner"], config["n_positions"], config["vocab_size"]) == (
        ours["d_ff"],
        ours["positions"],
        ours["vocab_size"],
    )
    assert (config["activation_function"], config["layer_norm_epsilon"]) == ("gelu", 1e-5)
    assert config["tie_word_embeddings"] is False
    ids = (config["bos_token_id"], config["eos_token_id"], config["pad_token_id"])
    assert ids == (1, 2, 2)
    with safe_open(exported / "model.safetensors", "pt") as weights:
        assert weights.metadata() == {"format": "pt"}
        # GPT-2's Conv1D holds (in, out): Zrodlo's qkv is (3 * 16, 16) as an nn.Linear.
        assert weights.get_slice("transformer.h.0.attn.c_attn.weight").get_shape() == [16, 48]


def test_transformers_computes_zrodlos_logits(hf_model, trained_run, training_data):
    corpus = Corpus.open(training_data.corpus)
    table = build_windows(corpus.offsets, CONTEXT)
    inputs, _ = collate(corpus.tokens, table, np.arange(len(table)))  # (8, 8)
    with torch.no_grad():
        expected = zrodlo_model(trained_run / "step-6")(inputs)
        logits = hf_model(inputs).logits
    assert logits.shape == expected.shape
    torch.testing.assert_close(logits, expected, atol=1e-5, rtol=0)


def test_transformers_loss_is_zrodlo_model_evaluates(
    hf_model, trained_run, training_data, run_zrodlo, tmp_path
):
    scores = tmp_path / "scores.json"
    returncode, _, stderr = run_zrodlo(
        "model", "evaluate", "--model", trained_run / "step-6", "--corpus", training_data.held_out,
        "--context", CONTEXT, "--output", scores, cwd=tmp_path,
    )  # fmt: skip
    assert (returncode, stderr) == (0, ""), stderr
    expected = json.loads(scores.read_text())["corpora"]["held-out"]["loss"]
    corpus = Corpus.open(training_data.held_out)
    table = build_windows(corpus.offsets, CONTEXT)
    inputs, targets = collate(corpus.tokens, table, np.arange(len(table)))
    with torch.no_grad():
        logits = hf_model(inputs).logits  # (windows, 8, vocab)
    summed = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), reduction="sum")
    loss = summed.item() / int((targets != -100).sum())
    assert loss == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize(
    "text",
    [
        "the quick brown fox",
        "Zebra? <bos> <eos> <unk> \u00e9\u65e5\n\tlazy",  # unknown characters and special names
        "",
    ],
)
def test_every_character_encodes_to_zrodlos_id(text, hf_tokenizer, trained_run):
    ours = load_tokenizer(trained_run / "step-6")
    expected = ours.encode(text).tolist()
    assert hf_tokenizer(text)["input_ids"] == expected
    known = "".join(ours.characters)
    assert hf_tokenizer(known)["input_ids"] == ours.encode(known).tolist()
    assert (hf_tokenizer.bos_token_id, hf_tokenizer.eos_token_id) == (1, 2)
    assert (hf_tokenizer.unk_token_id, hf_tokenizer.pad_token_id) == (0, 2)


def test_greedy_generate_is_zrodlos_greedy_sample(
    hf_model, hf_tokenizer, trained_run, run_zrodlo, tmp_path
):
    prompt, tokens = "the ", 10  # BOS, 4 prompt and 10 new tokens fit the 16 positions
    returncode, stdout, stderr = run_zrodlo(
        "model", "sample", "--model", trained_run / "step-6", "--prompt", prompt,
        "--tokens", tokens, "--temperature", 0, "--seed", 1, cwd=tmp_path,
    )  # fmt: skip
    assert (returncode, stderr) == (0, ""), stderr
    ids = [hf_tokenizer.bos_token_id, *hf_tokenizer(prompt)["input_ids"]]
    generated = hf_model.generate(
        torch.tensor([ids]), do_sample=False, max_new_tokens=tokens, eos_token_id=2
    )[0, len(ids) :].tolist()
    if 2 in generated:
        generated = generated[: generated.index(2)]
    assert generated, "the continuation must hold tokens to compare"
    assert stdout == prompt + hf_tokenizer.decode(generated) + "\n"


def test_an_existing_output_is_refused(trained_run, assert_refused, tmp_path):
    output = tmp_path / "gpt2"
    output.mkdir()
    assert_refused(
        "model", "export", "--model", trained_run / "step-6", "--output", output,
        sentence=f"{output} already exists; Zrodlo writes a new directory and overwrites nothing",
    )  # fmt: skip


def test_a_directory_that_is_no_model_is_refused(assert_refused, tmp_path):
    missing = tmp_path / "missing"
    assert_refused(
        "model", "export", "--model", missing, "--output", tmp_path / "gpt2",
        sentence=f"{missing} is not a directory; a model directory holds {', '.join(MODEL_FILES)}",
    )  # fmt: skip

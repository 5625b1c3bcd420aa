"""`api.load`: a model directory or checkpoint as a torch module in eval mode whose logits give the
loss `model evaluate` prints, within 1e-6, and its tokenizer; a checkpoint of adapters with its
base; a conversation and a chat prompt rendered as a chat corpus and `model sample --chat` render
them."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
import torch.nn.functional as F
from conftest import zrodlo_succeeds

from zrodlo import api
from zrodlo.data.corpus import Corpus
from zrodlo.data.tokenizer import load_tokenizer

pytestmark = pytest.mark.slow  # the real commands


@pytest.fixture(scope="module")
def short(training_data, tmp_path_factory):
    """A corpus of one document shorter than the tiny model's positions, so that `model evaluate`
    at a context of its length scores it as one window: every token after the first once."""
    root = tmp_path_factory.mktemp("loaded")
    (root / "one.jsonl").write_text(json.dumps({"id": "vow", "text": "judge my vow"}) + "\n")
    zrodlo_succeeds("corpus", "prepare", "--documents", "one.jsonl", "--tokenizer",
                    training_data.tokenizer, "--output", "corpus", cwd=root)  # fmt: skip
    return root / "corpus"


def evaluated_loss(model, corpus, scores) -> float:
    """`model evaluate`'s loss on the corpus read as one window: its tokens, all of them."""
    window = len(Corpus.open(corpus).tokens)
    zrodlo_succeeds("model", "evaluate", "--model", model, "--corpus", corpus, "--context", window,
                    "--output", scores, cwd=scores.parent)  # fmt: skip
    return json.loads(scores.read_text())["corpora"][corpus.name]["loss"]


def loss_of(loaded: api.Loaded, corpus) -> float:
    ids = torch.from_numpy(Corpus.open(corpus).tokens.astype("int64"))[None]  # (1, T)
    with torch.no_grad():
        logits = loaded.model(ids[:, :-1])  # (1, T-1, vocab)
    return float(F.cross_entropy(logits[0], ids[0, 1:]))


def test_a_checkpoints_logits_give_model_evaluates_loss(trained_run, short, tmp_path):
    checkpoint = trained_run / "step-6"
    loaded = api.load(checkpoint)
    assert isinstance(loaded.model, torch.nn.Module) and not loaded.model.training
    evaluated = evaluated_loss(checkpoint, short, tmp_path / "scores.json")
    assert loss_of(loaded, short) == pytest.approx(evaluated, abs=1e-6)
    model, tokenizer = loaded  # it unpacks, as a pair
    assert model is loaded.model
    text = "the quick brown fox"
    assert tokenizer.decode(tokenizer.encode(text)) == text
    assert tokenizer.digest == load_tokenizer(checkpoint).digest


def test_a_checkpoint_of_adapters_is_loaded_over_its_base(training_data, short, tmp_path):
    shutil.copytree(training_data.model, tmp_path / "model")
    zrodlo_succeeds(
        "model", "train", "--model", "model", "--corpus", training_data.corpus, "--output", "run",
        "--steps", "2", "--context", "9", "--batch-size", "4", "--learning-rate", "0.05",
        "--beta1", "0.9", "--beta2", "0.99", "--epsilon", "1e-8", "--weight-decay", "0",
        "--decay-scope", "matrices", "--seed", "3", "--precision", "f32", "--device", "cpu",
        "--lora-rank", "2", "--lora-base", "bf16", cwd=tmp_path,
    )  # fmt: skip
    checkpoint = tmp_path / "run" / "step-2"
    loaded = api.load(checkpoint)
    held = {p.dtype for p in loaded.model.parameters() if not p.requires_grad}
    assert held == {torch.bfloat16}  # the base as the run held it
    evaluated = evaluated_loss(checkpoint, short, tmp_path / "scores.json")
    assert loss_of(loaded, short) == pytest.approx(evaluated, abs=1e-6)


def test_a_conversation_and_a_prompt_render_as_the_commands_render_them(training_data):
    loaded = api.load(training_data.model)
    messages = [{"role": "user", "content": "box"}, {"role": "assistant", "content": "fox"}]
    ids, weights = loaded.conversation(messages)  # the plain form: BOS, "role: content" lines
    assert loaded.tokenizer.decode(ids[weights == 1].tolist()) == "fox"  # and EOS, weighted
    answer = int(weights.argmax())  # the first weighted token: the answer's
    assert loaded.prompt("box") == ids[:answer].tolist()  # what a sample continues
    with pytest.raises(api.Refusal) as refused:
        loaded.conversation([{"role": "user"}])
    assert refused.value.sentence.startswith("the conversation has message 1 without a role")

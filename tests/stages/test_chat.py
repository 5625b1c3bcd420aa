"""Chat documents through the real commands: imported in the messages form, rendered by the chat
template of an imported model's tokenizer to transformers' `apply_chat_template` ids, weighted on
the answers, evaluated to transformers' loss with labels -100 outside the assistant turns, trained
and resumed to the same bytes; and refused, naming the line, where they are no conversation."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import typing
from pathlib import Path

import numpy as np
import pytest
import torch
from library_tokenizers import qwen2_file

from zrodlo.data.corpus import Corpus
from zrodlo.data.formats import CorpusManifest
from zrodlo.data.tokenizer import load_tokenizer
from zrodlo.storage.refusal import Refusal

pytestmark = pytest.mark.slow
transformers = pytest.importorskip("transformers")

ZRODLO = Path(sys.executable).parent / "zrodlo"
# A template of the ChatML layout Qwen2.5 uses, written here: each turn between <|im_start|> and
# <|im_end|>, the assistant's included.
CHATML = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
CONVERSATIONS = {
    "sum": [{"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Two and two?"},
            {"role": "assistant", "content": "Four."}],
    "colours": [{"role": "user", "content": "A colour?"},
                {"role": "assistant", "content": "Blue."},
                {"role": "user", "content": "One more."},
                {"role": "assistant", "content": "Green."}],
    "greeting": [{"role": "user", "content": "Hello there"},
                 {"role": "assistant", "content": "Hi, née Ann."}],
    "plain": [{"role": "user", "content": "Say yes"}, {"role": "assistant", "content": "yes"}],
}  # fmt: skip
CONTEXT = 96  # longer than any conversation: each is one window, as transformers reads it


def zrodlo(*args: object, cwd: Path, status: int = 0) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "400"}
    done = subprocess.run(
        [str(ZRODLO), *map(str, args)], cwd=cwd, env=env, capture_output=True, text=True,
        timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == status, (args, done.stderr)
    return done


def write_conversations(path: Path, conversations: dict[str, list]) -> Path:
    lines = [json.dumps({"id": key, "messages": value}) for key, value in conversations.items()]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def chat(tmp_path_factory) -> Path:
    """A Qwen2-shaped transformers model with a chat template, imported as `model`, and the
    conversations imported as `documents.jsonl` and prepared as `corpus`."""
    root = tmp_path_factory.mktemp("chat")
    source = root / "source"
    source.mkdir()
    qwen2_file(source / "tokenizer.json")
    config = {"bos_token": None, "eos_token": "<|im_end|>", "chat_template": CHATML}
    (source / "tokenizer_config.json").write_text(json.dumps(config))
    torch.manual_seed(0)  # transformers' own initialisation: the fixture's weights only
    shape = transformers.Qwen2Config(
        vocab_size=400, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=CONTEXT,
        tie_word_embeddings=True, use_sliding_window=False,
    )  # fmt: skip
    transformers.Qwen2ForCausalLM(shape).save_pretrained(source)
    zrodlo("model", "import", "--from", source, "--output", "model", cwd=root)
    write_conversations(root / "chats.jsonl", CONVERSATIONS)
    zrodlo("documents", "import", "--source", "chats.jsonl", "--output", "documents.jsonl",
           cwd=root)  # fmt: skip
    zrodlo("corpus", "prepare", "--documents", "documents.jsonl", "--tokenizer", "model",
           "--output", "corpus", cwd=root)  # fmt: skip
    return root


def documents_of(corpus: Corpus) -> list[tuple[list[int], list[int]]]:
    """Each document's ids and weights."""
    assert corpus.weights is not None
    bounds = zip(corpus.offsets[:-1], corpus.offsets[1:], strict=True)
    return [(corpus.tokens[a:b].tolist(), corpus.weights[a:b].tolist()) for a, b in bounds]


def test_a_conversation_is_apply_chat_templates_ids_weighted_on_the_answers(chat):
    reference = transformers.AutoTokenizer.from_pretrained(chat / "source")
    corpus = Corpus.open(chat / "corpus")
    for messages, (ids, weights) in zip(CONVERSATIONS.values(), documents_of(corpus), strict=True):
        expected = reference.apply_chat_template(messages, tokenize=True, return_dict=True)
        assert ids == expected["input_ids"]
        answers = [message["content"] + "<|im_end|>" for message in messages
                   if message["role"] == "assistant"]  # fmt: skip
        assert reference.decode([i for i, w in zip(ids, weights, strict=True) if w]) == "".join(
            answers
        )
    manifest = json.loads((chat / "corpus" / "corpus.json").read_text())
    assert manifest["format_version"] == 4
    chosen_only = {"enable_thinking"}  # written where corpus prepare was given the choice
    assert list(manifest) == [
        key for key in typing.get_type_hints(CorpusManifest) if key not in chosen_only
    ]
    assert manifest["weighted_targets"] == sum(sum(w) for _, w in documents_of(corpus))


def test_the_export_carries_the_template_to_the_same_ids(chat):
    zrodlo("model", "export", "--model", "model", "--output", "exported", cwd=chat)
    exported = transformers.AutoTokenizer.from_pretrained(chat / "exported")
    corpus = Corpus.open(chat / "corpus")
    for messages, (ids, _) in zip(CONVERSATIONS.values(), documents_of(corpus), strict=True):
        assert (
            exported.apply_chat_template(messages, tokenize=True, return_dict=True)["input_ids"]
            == ids
        )


def test_a_chat_sample_is_transformers_greedy_answer(chat):
    prompt = "Two and two?"
    said = zrodlo("model", "sample", "--model", "model", "--prompt", prompt, "--chat",
                  "--tokens", 12, "--temperature", 0, "--seed", 1, cwd=chat).stdout  # fmt: skip
    reference = transformers.AutoTokenizer.from_pretrained(chat / "source")
    asked = reference.apply_chat_template(
        [{"role": "user", "content": prompt}], add_generation_prompt=True, return_tensors="pt",
        return_dict=True,
    )["input_ids"]  # fmt: skip
    model = transformers.AutoModelForCausalLM.from_pretrained(chat / "source").eval()
    ended = reference.convert_tokens_to_ids("<|im_end|>")
    generated = model.generate(
        asked, attention_mask=torch.ones_like(asked), max_new_tokens=12, do_sample=False,
        eos_token_id=ended, pad_token_id=ended,
    )[0, asked.shape[1]:].tolist()  # fmt: skip
    answer = generated[: generated.index(ended)] if ended in generated else generated
    assert said == reference.decode(answer) + "\n"


def test_evaluate_is_transformers_loss_on_the_answers(chat):
    zrodlo("model", "evaluate", "--model", "model", "--corpus", "corpus", "--context", CONTEXT,
           "--output", "scores.json", cwd=chat)  # fmt: skip
    scored = json.loads((chat / "scores.json").read_text())["corpora"]["corpus"]
    model = transformers.AutoModelForCausalLM.from_pretrained(chat / "source").eval()
    summed, counted = 0.0, 0
    for ids, weights in documents_of(Corpus.open(chat / "corpus")):
        labels = torch.tensor([i if w else -100 for i, w in zip(ids, weights, strict=True)])
        with torch.no_grad():
            loss = model(torch.tensor([ids]), labels=labels[None]).loss.item()
        answered = int((labels[1:] != -100).sum())  # transformers shifts: the first is no target
        summed, counted = summed + loss * answered, counted + answered
    assert scored["targets"] == counted
    assert scored["loss"] == pytest.approx(summed / counted, abs=1e-5)


def test_a_chat_run_resumes_to_the_same_bytes_at_one_and_two_processes(
    chat, train_args, resume_args
):
    flags = {"--batch-size": 2, "--micro-batch-size": 1, "--context": 16, "--checkpoint-every": 2}
    zrodlo(*train_args("model", "corpus", "whole", 4, flags), cwd=chat)
    zrodlo(*train_args("model", "corpus", "cut", 2, flags), cwd=chat)
    zrodlo(*resume_args("cut/step-2", "corpus", "resumed", 4), cwd=chat)
    zrodlo(*train_args("model", "corpus", "two", 4, {**flags, "--processes": 2}), cwd=chat)
    for name in ("model.safetensors", "optimizer.safetensors"):
        whole = (chat / "whole" / "step-4" / name).read_bytes()
        assert (chat / "resumed" / "step-4" / name).read_bytes() == whole
        assert (chat / "two" / "step-4" / name).read_bytes() == whole
    steps = (chat / "whole" / "steps.csv").read_text().splitlines()
    targets = [int(line.split(",")[4]) for line in steps[1:]]
    assert min(targets) > 0 and max(targets) < 2 * 15  # the answers' targets of 2 windows of 15


def test_own_tokenizers_use_the_plain_form(chat, tmp_path):
    zrodlo("tokenizer", "fit", "--documents", chat / "documents.jsonl", "--output", "chars",
           cwd=tmp_path)  # fmt: skip
    zrodlo("corpus", "prepare", "--documents", chat / "documents.jsonl", "--tokenizer", "chars",
           "--output", "corpus", cwd=tmp_path)  # fmt: skip
    corpus = Corpus.open(tmp_path / "corpus")
    tokenizer = load_tokenizer(tmp_path / "chars")
    ids, weights = documents_of(corpus)[1]  # "colours"
    assert (
        tokenizer.decode(ids)
        == "user: A colour?\nassistant: Blue.user: One more.\nassistant: Green."
    )
    answered = [i for i, w in zip(ids, weights, strict=True) if w]
    assert answered.count(tokenizer.eos) == 2
    assert tokenizer.decode(answered) == "Blue.Green."


def test_a_line_that_is_no_conversation_is_refused_naming_it(tmp_path):
    bad = {**CONVERSATIONS, "mute": [{"role": "user", "content": "hello?"}]}
    write_conversations(tmp_path / "chats.jsonl", bad)
    done = zrodlo("documents", "import", "--source", "chats.jsonl", "--output", "out.jsonl",
                  cwd=tmp_path, status=1)  # fmt: skip
    assert done.stderr == (
        'Error: chats.jsonl line 5 (id "mute") has no assistant turn, so nothing of it would be '
        "trained on; messages is a list of objects with a role (system, user or assistant) and a "
        "string content, at least one of them the assistant's\n"
    )
    assert not (tmp_path / "out.jsonl").exists()
    done = zrodlo("documents", "import", "--source", "chats.jsonl", "--output", "out.jsonl",
                  "--skip-invalid", cwd=tmp_path)  # fmt: skip
    assert "skipped 1 (1 not a conversation)" in done.stdout
    assert len((tmp_path / "out.jsonl").read_text().splitlines()) == len(CONVERSATIONS)


def test_a_content_holding_a_special_token_is_refused(chat, tmp_path):
    forged = {"forged": [{"role": "user", "content": "hi<|im_end|>"},
                         {"role": "assistant", "content": "ok"}]}  # fmt: skip
    write_conversations(tmp_path / "chats.jsonl", forged)
    done = zrodlo("corpus", "prepare", "--documents", "chats.jsonl", "--tokenizer",
                  chat / "model", "--output", "corpus", cwd=tmp_path, status=1)  # fmt: skip
    assert done.stderr == (
        "Error: chats.jsonl line 1 (id \"forged\") has message 1 holding '<|im_end|>', the text "
        "of a special token, which its chat template would read as that token\n"
    )
    assert not (tmp_path / "corpus").exists()


def test_a_changed_weight_is_refused_by_the_digest(chat, tmp_path):
    shutil.copytree(chat / "corpus", tmp_path / "corpus")
    weights, manifest = tmp_path / "corpus" / "weights.bin", tmp_path / "corpus" / "corpus.json"
    data = bytearray(weights.read_bytes())
    data[int(np.flatnonzero(np.frombuffer(bytes(data), np.uint8))[0])] = 0  # an answer unweighted
    weights.write_bytes(bytes(data))
    with pytest.raises(Refusal) as refused:
        Corpus.open(tmp_path / "corpus")
    recorded = json.loads(manifest.read_text())["weights_sha256"]
    assert refused.value.sentence == (
        f"{weights} has sha256 {hashlib.sha256(data).hexdigest()}, and {manifest} records "
        f"{recorded}; the corpus was changed after it was prepared"
    )

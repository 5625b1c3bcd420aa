"""Conversations as ids and weights, by the rules docs/chat.md states: the plain form for Zrodlo's
own tokenizers, a template's rendering for an imported one, and the refusals of a conversation
whose answers cannot be told; and the windows of a weighted corpus, which hold an answer."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from library_tokenizers import qwen2_file

from zrodlo.data.chat_encoding import ChatProblem, chat_prompt, encode_conversation
from zrodlo.data.conversation import Message, conversation_problem, plain_text
from zrodlo.data.tokenizer.char import CharTokenizer
from zrodlo.data.tokenizer.imported import imported
from zrodlo.data.windows import build_windows

ASKED = (Message("user", "hi"), Message("assistant", "yo"), Message("user", "bye"))
CHARS = CharTokenizer.fit([plain_text(ASKED)])


def test_the_plain_form_weighs_the_answer_and_its_eos():
    ids, weights = encode_conversation(CHARS, ASKED)
    assert CHARS.decode(ids) == "user: hi\nassistant: youser: bye\n"  # BOS and EOS dropped
    assert ids[0] == CHARS.bos and ids[-1] == CHARS.eos  # framed as every document
    answered = ids[weights == 1].tolist()
    assert answered == [*CHARS.encode("yo").tolist(), CHARS.eos]
    assert weights[-1] == 0  # a conversation ending on the user's turn: its EOS is no answer


def test_the_plain_prompt_opens_the_answer():
    start, stops = chat_prompt(CHARS, "hi")
    assert start[0] == CHARS.bos
    assert CHARS.decode(start) == "user: hi\nassistant: "
    assert stops == {CHARS.eos}


def chatml(tmp_path: Path, template: str):
    qwen2_file(tmp_path / "tokenizer.json")
    config = {"bos_token": None, "eos_token": "<|im_end|>", "chat_template": template}
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    return imported(tmp_path / "tokenizer.json")


def test_a_template_that_raises_is_a_problem_with_its_words(tmp_path):
    tokenizer = chatml(tmp_path, "{{ raise_exception('no system messages here') }}")
    with pytest.raises(ChatProblem) as problem:
        encode_conversation(tokenizer, ASKED)
    assert str(problem.value) == (
        "cannot be rendered by its tokenizer's chat template: no system messages here"
    )


def test_a_template_that_rewrites_an_answer_is_refused(tmp_path):
    shouting = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] | upper }}\n{% endfor %}"
    with pytest.raises(ChatProblem) as problem:
        encode_conversation(chatml(tmp_path, shouting), ASKED)
    assert str(problem.value) == (
        "has message 1, which its chat template does not write as given, so the tokens of the "
        "answers cannot be told"
    )


@pytest.mark.parametrize(
    ("messages", "problem"),
    [
        ([], "has messages [], not a non-empty list"),
        ([{"role": "user"}], "has message 1 without a role and a content"),
        ([{"role": "tool", "content": "x"}], 'has message 1 of role "tool"'),
        ([{"role": "user", "content": 3}], "has message 1 of content 3, which is not a string"),
        ([{"role": "user", "content": "x"}], "has no assistant turn"),
    ],
)
def test_what_is_no_conversation_says_why(messages, problem):
    assert conversation_problem(messages).startswith(problem)


def test_a_weighted_corpus_has_the_windows_that_hold_an_answer():
    # Two documents of 7 tokens: the first's answer at its last target, the second has none.
    offsets = np.array([0, 7, 14])
    weights = np.zeros(14, np.uint8)
    weights[6] = 1
    table = build_windows(offsets, 4, weights)  # 3 targets a window: 2 windows a document
    assert len(table) == 1
    starts, counts = table.locate(np.array([0]))
    assert (starts.tolist(), counts.tolist()) == ([3], [3])
    assert table.targets_of(np.array([0])) == 1

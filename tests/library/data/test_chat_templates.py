"""The chat templates of the families people fine-tune, written here in their layouts, rendered to
transformers' `apply_chat_template` ids and weighted on exactly what the assistant writes:
Gemma's (`<start_of_turn>model`, a system message folded into the first user turn, alternation
enforced by `raise_exception`), Qwen3's (a `<think>` block written in the turns after the last
question, the reasoning dropped from the ones before), and a template that marks the answers with
`{% generation %}` blocks, whose weights are transformers' assistant mask."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from library_tokenizers import gemma_file, qwen2_file

from zrodlo.data.chat_encoding import ChatProblem, encode_conversation
from zrodlo.data.conversation import Message
from zrodlo.data.tokenizer.imported import imported

transformers = pytest.importorskip("transformers")

GEMMA = (
    "{{ bos_token }}"
    "{% if messages[0]['role'] == 'system' %}"
    "{% set folded = messages[0]['content'] + '\\n\\n' %}{% set turns = messages[1:] %}"
    "{% else %}{% set folded = '' %}{% set turns = messages %}{% endif %}"
    "{% for message in turns %}"
    "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
    "{% endif %}"
    "{% set role = 'model' if message['role'] == 'assistant' else message['role'] %}"
    "{{ '<start_of_turn>' + role + '\\n' + (folded if loop.first else '') "
    "+ message['content'] | trim + '<end_of_turn>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<start_of_turn>model\\n' }}{% endif %}"
)
QWEN3 = (
    "{% set ns = namespace(last=-1) %}"
    "{% for message in messages %}{% if message['role'] == 'user' %}"
    "{% set ns.last = loop.index0 %}{% endif %}{% endfor %}"
    "{% for message in messages %}"
    "{% if message['role'] == 'assistant' %}"
    "{% set content = message['content'] %}{% set reasoning = '' %}"
    "{% if '</think>' in content %}"
    "{% set reasoning = content.split('</think>')[0].rstrip('\\n').split('<think>')[-1]"
    ".lstrip('\\n') %}"
    "{% set content = content.split('</think>')[-1].lstrip('\\n') %}"
    "{% endif %}"
    "{% if loop.index0 > ns.last %}"
    "{{ '<|im_start|>assistant\\n<think>\\n' + reasoning.strip('\\n') + '\\n</think>\\n\\n' "
    "+ content + '<|im_end|>\\n' }}"
    "{% else %}{{ '<|im_start|>assistant\\n' + content + '<|im_end|>\\n' }}{% endif %}"
    "{% else %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] "
    "+ '<|im_end|>\\n' }}{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
    "{% if enable_thinking is defined and enable_thinking is false %}"
    "{{ '<think>\\n\\n</think>\\n\\n' }}{% endif %}{% endif %}"
)
MARKED = (
    "{% for message in messages %}"
    "{% if message['role'] == 'assistant' %}{{ '<|im_start|>assistant\\n' }}"
    "{% generation %}{{ message['content'] + '<|im_end|>' }}{% endgeneration %}{{ '\\n' }}"
    "{% else %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] "
    "+ '<|im_end|>\\n' }}{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
ANSWERED = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "A colour?"},
    {"role": "assistant", "content": "<think>\nAny will do.\n</think>\n\nBlue."},
    {"role": "user", "content": "One more."},
    {"role": "assistant", "content": "<think>\nNot blue again.\n</think>\n\nGreen."},
]


def tokenizers(tmp_path: Path, layout: str, template: str) -> tuple:
    """The tokenizer files of `layout` with `template`, imported by Zrodlo and loaded by
    transformers."""
    directory = tmp_path / layout
    directory.mkdir()
    if layout == "gemma":
        gemma_file(directory / "tokenizer.json")
        config = {"bos_token": "<bos>", "eos_token": "<eos>", "chat_template": template}
    else:
        qwen2_file(directory / "tokenizer.json")
        config = {"bos_token": None, "eos_token": "<|im_end|>", "chat_template": template}
    (directory / "tokenizer_config.json").write_text(json.dumps(config))
    ours = imported(directory / "tokenizer.json")
    return ours, transformers.AutoTokenizer.from_pretrained(directory, local_files_only=True)


def encoded(tokenizer, messages: list[dict]) -> tuple[list[int], list[int]]:
    ids, weights = encode_conversation(tokenizer, tuple(Message(**m) for m in messages))
    return ids.tolist(), weights.tolist()


def weighted_text(reference, ids: list[int], weights: list[int]) -> str:
    return reference.decode([i for i, w in zip(ids, weights, strict=True) if w])


@pytest.mark.parametrize(
    ("messages", "answers"),
    [
        # Gemma's template writes an answer as it is (trimmed), a <think> block and all.
        (ANSWERED[:3], "<think>\nAny will do.\n</think>\n\nBlue.<end_of_turn>"),
        ([m | {"content": m["content"].rsplit("\n", 1)[-1]} for m in ANSWERED],
         "Blue.<end_of_turn>Green.<end_of_turn>"),
    ],
)  # fmt: skip
def test_gemmas_template_folds_the_system_message_and_weighs_the_models_turns(
    tmp_path, messages, answers
):
    ours, reference = tokenizers(tmp_path, "gemma", GEMMA)
    ids, weights = encoded(ours, messages)
    assert (
        ids == reference.apply_chat_template(messages, tokenize=True, return_dict=True)["input_ids"]
    )
    assert weighted_text(reference, ids, weights) == answers
    assert "<start_of_turn>user\nBe brief.\n\nA colour?" in reference.decode(ids)


def test_gemmas_template_refuses_turns_that_do_not_alternate_in_its_words(tmp_path):
    ours, _ = tokenizers(tmp_path, "gemma", GEMMA)
    doubled = (Message("user", "a"), Message("user", "b"), Message("assistant", "c"))
    with pytest.raises(ChatProblem) as problem:
        encode_conversation(ours, doubled)
    assert str(problem.value) == (
        "cannot be rendered by its tokenizer's chat template: Conversation roles must alternate "
        "user/assistant/user/assistant/..."
    )


@pytest.mark.parametrize(
    ("messages", "answers"),
    [
        # No reasoning given: the last turn's empty <think> block is the assistant's to write.
        ([{"role": "user", "content": "Two and two?"}, {"role": "assistant", "content": "Four."}],
         "<think>\n\n</think>\n\nFour.<|im_end|>"),
        # The reasoning of a turn before the last question is dropped, as the template drops it.
        (ANSWERED, "Blue.<|im_end|><think>\nNot blue again.\n</think>\n\nGreen.<|im_end|>"),
    ],
)  # fmt: skip
def test_qwen3s_thinking_blocks_are_weighed_where_the_template_writes_them(
    tmp_path, messages, answers
):
    ours, reference = tokenizers(tmp_path, "qwen3", QWEN3)
    ids, weights = encoded(ours, messages)
    assert (
        ids == reference.apply_chat_template(messages, tokenize=True, return_dict=True)["input_ids"]
    )
    assert weighted_text(reference, ids, weights) == answers


def test_generation_blocks_weigh_what_transformers_assistant_mask_holds(tmp_path):
    ours, reference = tokenizers(tmp_path, "chatml", MARKED)
    ids, weights = encoded(ours, ANSWERED)
    expected = reference.apply_chat_template(
        ANSWERED, tokenize=True, return_dict=True, return_assistant_tokens_mask=True
    )
    assert ids == expected["input_ids"]
    assert weights == expected["assistant_masks"]
    assert weighted_text(reference, ids, weights) == "".join(
        m["content"] + "<|im_end|>" for m in ANSWERED if m["role"] == "assistant"
    )


@pytest.mark.parametrize(
    ("thinking", "answers"),
    [
        (None, "<think>\n\n</think>\n\nFour.<|im_end|>"),
        # With thinking off the empty block is the prompt's (transformers' generation prompt
        # writes it), not the assistant's to write.
        (False, "Four.<|im_end|>"),
    ],
)
def test_qwen3s_enable_thinking_decides_whose_the_empty_block_is(tmp_path, thinking, answers):
    ours, reference = tokenizers(tmp_path, "qwen3", QWEN3)
    messages = [
        {"role": "user", "content": "Two and two?"},
        {"role": "assistant", "content": "Four."},
    ]
    ids, weights = encode_conversation(ours, tuple(Message(**m) for m in messages), thinking)
    chosen = {} if thinking is None else {"enable_thinking": thinking}
    expected = reference.apply_chat_template(messages, tokenize=True, return_dict=True, **chosen)
    assert ids.tolist() == expected["input_ids"]
    assert weighted_text(reference, ids.tolist(), weights.tolist()) == answers
    assert ours.template.reads_thinking

"""`corpus prepare --enable-thinking/--disable-thinking` through the real command: the chat
template is rendered with that enable_thinking, to transformers' `apply_chat_template` ids with the
same choice; corpus.json and the corpus digest record it; and the flag is refused, with nothing
written, where no template would read it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import zrodlo_succeeds
from library_tokenizers import qwen2_file

from zrodlo.data.corpus import Corpus

pytestmark = pytest.mark.slow
transformers = pytest.importorskip("transformers")

# SmolLM3's layout, written here: a system turn naming the reasoning mode, /think unless
# enable_thinking is false, and in that mode an empty think block opening the assistant's turn.
SMOLLM3 = (
    "{% if enable_thinking is defined and enable_thinking is false %}{% set mode = '/no_think' %}"
    "{% else %}{% set mode = '/think' %}{% endif %}"
    "{{ '<|im_start|>system\\nReasoning Mode: ' + mode + '<|im_end|>\\n' }}"
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
    "{% if mode == '/no_think' %}{{ '<think>\\n\\n</think>\\n' }}{% endif %}{% endif %}"
)
CHATML = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
CONVERSATIONS = [
    [{"role": "user", "content": "Two and two?"}, {"role": "assistant", "content": "Four."}],
    [{"role": "user", "content": "A colour?"}, {"role": "assistant", "content": "Blue."}],
]


def tokenizer(root: Path, name: str, template: str) -> Path:
    """A Qwen2-layout tokenizer with `template`, as transformers reads it (`root/name-source`)
    and imported by `tokenizer import` (`root/name`)."""
    source = root / f"{name}-source"
    source.mkdir()
    qwen2_file(source / "tokenizer.json")
    config = {"bos_token": None, "eos_token": "<|im_end|>", "chat_template": template}
    (source / "tokenizer_config.json").write_text(json.dumps(config))
    zrodlo_succeeds("tokenizer", "import", "--from", source / "tokenizer.json", "--output", name,
                    cwd=root)  # fmt: skip
    return root / name


@pytest.fixture(scope="module")
def chats(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("thinking")
    lines = [json.dumps({"id": str(i), "messages": m}) for i, m in enumerate(CONVERSATIONS)]
    (root / "chats.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (root / "texts.jsonl").write_text('{"id": "a", "text": "Plain text."}\n', encoding="utf-8")
    return root


@pytest.mark.parametrize("thinking", [None, False, True])
def test_the_choice_renders_as_transformers_renders_it_and_the_digest_records_it(chats, thinking):
    name = {None: "default", False: "off", True: "on"}[thinking]
    work = chats / name
    work.mkdir()
    tokenizer(work, "tokenizer", SMOLLM3)
    flag = [] if thinking is None else ["--enable-thinking" if thinking else "--disable-thinking"]
    zrodlo_succeeds("corpus", "prepare", "--documents", chats / "chats.jsonl", "--tokenizer",
                    "tokenizer", "--output", "corpus", *flag, cwd=work)  # fmt: skip
    corpus = Corpus.open(work / "corpus")  # its digest verified from the bytes and the choice
    manifest = json.loads((work / "corpus" / "corpus.json").read_text())
    assert manifest.get("enable_thinking") == thinking
    reference = transformers.AutoTokenizer.from_pretrained(work / "tokenizer-source")
    chosen = {} if thinking is None else {"enable_thinking": thinking}
    expected = [
        reference.apply_chat_template(m, tokenize=True, return_dict=True, **chosen)["input_ids"]
        for m in CONVERSATIONS
    ]
    assert corpus.tokens.tolist() == [i for ids in expected for i in ids]
    answered = reference.decode(corpus.tokens[corpus.weights == 1].tolist())
    assert answered == "Four.<|im_end|>Blue.<|im_end|>"
    (work / "digest").write_text(corpus.digest)


def test_each_choice_is_its_own_corpus(chats):
    digests = {name: (chats / name / "digest").read_text() for name in ("default", "off", "on")}
    assert len(set(digests.values())) == 3, digests  # "on" renders as the default, recorded apart


def test_a_choice_no_template_reads_is_refused_writing_nothing(chats, tmp_path, assert_refused):
    tokenizer(tmp_path, "chatml", CHATML)
    for name in ("chats.jsonl", "texts.jsonl"):
        (tmp_path / name).write_bytes((chats / name).read_bytes())
    assert_refused(
        "corpus", "prepare", "--documents", "chats.jsonl", "--tokenizer", "chatml", "--output",
        "corpus", "--disable-thinking",
        sentence="--disable-thinking is passed to a chat template as enable_thinking, and the "
        "tokenizer's template reads none (Qwen3's and SmolLM3's read it)",
    )  # fmt: skip
    assert_refused(
        "corpus", "prepare", "--documents", "texts.jsonl", "--tokenizer", "chatml", "--output",
        "corpus", "--enable-thinking",
        sentence="--enable-thinking chooses how a chat template renders; texts.jsonl holds texts",
    )  # fmt: skip

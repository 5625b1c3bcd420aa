"""An imported tokenizer's chat template: the Jinja text a model's tokenizer files carry
(`chat_template.jinja`, or `chat_template` in tokenizer_config.json) and the named special tokens
it may use, rendered as transformers renders it so that a conversation's ids are
`apply_chat_template`'s.

The environment is transformers': sandboxed and immutable, trim_blocks and lstrip_blocks, loop
controls, a `tojson` that leaves non-ASCII as it is, `raise_exception`, and the
`{% generation %}`...`{% endgeneration %}` block that marks what the assistant writes (its text is
rendered between two private-use characters, which `render` takes out again, keeping where they
stood: the answers' spans, as `return_assistant_tokens_mask` reads them). One difference, for
reproducibility: no `strftime_now`, so a template that would print today's date prints the one it
falls back to (Llama 3.2's: "26 Jul 2024"), and a corpus does not change with the day it was
prepared on. transformers gives the same ids with `date_string` set to that date.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from zrodlo.data.conversation import Conversation
from zrodlo.storage import jsonfile
from zrodlo.storage.inputs import read_input
from zrodlo.storage.refusal import Refusal

TEMPLATE_FILE = "chat_template.jinja"
CONFIG_FILE = "tokenizer_config.json"
# The named special tokens transformers hands a template, as tokenizer_config.json names them.
NAMED_TOKENS = (
    "bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token",
)  # fmt: skip


# What a generation block's text is rendered between: private-use characters no message may hold.
OPENED, CLOSED = "\ue000", "\ue001"
Spans = list[tuple[int, int]]  # (start, end) in characters of a rendering


class TemplateFailure(Exception):
    """A template that raised (its own `raise_exception` included) or would not compile."""


def _generation_extension() -> type:
    """The Jinja extension of the `generation` block: its body rendered between OPENED and CLOSED."""
    import jinja2.ext
    from jinja2 import nodes

    class Generation(jinja2.ext.Extension):
        tags = {"generation"}  # noqa: RUF012 (Jinja's own class attribute)

        def parse(self, parser: Any) -> Any:
            line = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return nodes.CallBlock(self.call_method("_marked"), [], [], body).set_lineno(line)

        def _marked(self, caller: Any) -> str:
            return OPENED + caller() + CLOSED

    return Generation


def unmarked(rendered: str) -> tuple[str, Spans | None]:
    """A rendering without the generation blocks' marks, and where each block's text stands in it;
    None for a rendering that holds no block."""
    if OPENED not in rendered:
        return rendered, None
    text, spans, at, opened = [], [], 0, None
    for piece in re.split(f"([{OPENED}{CLOSED}])", rendered):
        if piece == OPENED:
            opened = at
        elif piece == CLOSED:
            if opened is not None:
                spans.append((opened, at))
            opened = None
        else:
            text.append(piece)
            at += len(piece)
    return "".join(text), spans


def thinking_choice(thinking: bool | None) -> dict[str, bool]:
    """`enable_thinking` as a template is given it and a corpus records it: nothing where None
    (the template's own default)."""
    return {} if thinking is None else {"enable_thinking": thinking}


@dataclass(frozen=True)
class ChatTemplate:
    """The Jinja text and the named special tokens (name, text) it is rendered with."""

    text: str
    tokens: tuple[tuple[str, str], ...]

    def canonical(self) -> dict[str, Any]:
        return {"template": self.text, "tokens": dict(self.tokens)}

    @classmethod
    def from_canonical(cls, value: Any) -> ChatTemplate | None:
        """The template `canonical` wrote; None for a value that is not one."""
        if not isinstance(value, dict) or sorted(value) != ["template", "tokens"]:
            return None
        text, tokens = value["template"], value["tokens"]
        if not isinstance(text, str) or not isinstance(tokens, dict):
            return None
        if not all(name in NAMED_TOKENS and isinstance(t, str) for name, t in tokens.items()):
            return None
        return cls(text, tuple(sorted(tokens.items())))

    @cached_property
    def compiled(self) -> Any:
        import jinja2
        import jinja2.ext
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        def raise_exception(message: str) -> None:
            raise TemplateFailure(message)

        def tojson(value: Any, ensure_ascii: bool = False, indent: Any = None,
                   separators: Any = None, sort_keys: bool = False) -> str:  # fmt: skip
            return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent,
                              separators=separators, sort_keys=sort_keys)  # fmt: skip

        environment = ImmutableSandboxedEnvironment(
            trim_blocks=True,
            lstrip_blocks=True,
            extensions=[jinja2.ext.loopcontrols, _generation_extension()],
        )
        environment.filters["tojson"] = tojson
        environment.globals["raise_exception"] = raise_exception
        try:
            return environment.from_string(self.text)
        except jinja2.TemplateError as error:
            raise TemplateFailure(f"it does not compile ({error})") from None

    @cached_property
    def reads_thinking(self) -> bool:
        """Whether the template reads `enable_thinking` (Qwen3's, SmolLM3's)."""
        import jinja2.meta

        parsed = self.compiled.environment.parse(self.text)
        return "enable_thinking" in jinja2.meta.find_undeclared_variables(parsed)

    def render(
        self, messages: Conversation, generation_prompt: bool = False, thinking: bool | None = None
    ) -> str:
        """The conversation as the template writes it, and with `generation_prompt` the opening
        of the assistant's turn that follows; generation blocks marked (`unmarked`). `thinking`
        is passed as `enable_thinking`, left undefined where None (the template's default)."""
        import jinja2

        try:
            return self.compiled.render(
                messages=[message.as_json() for message in messages],
                tools=None,
                documents=None,
                add_generation_prompt=generation_prompt,
                **thinking_choice(thinking),
                **dict(self.tokens),
            )
        except (jinja2.TemplateError, TypeError, ValueError) as error:
            raise TemplateFailure(str(error)) from None


def chat_template(source: Path) -> ChatTemplate | None:
    """The chat template of the tokenizer files beside the tokenizer.json `source`: its
    chat_template.jinja, else tokenizer_config.json's chat_template (the one named "default" of
    a list); None where there is neither."""
    config = _config(source.parent / CONFIG_FILE)
    text: Any = None
    if (source.parent / TEMPLATE_FILE).is_file():
        try:
            text = read_input(source.parent / TEMPLATE_FILE).decode("utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise Refusal(f"{source.parent / TEMPLATE_FILE} cannot be read: {error}") from None
    else:
        text = config.get("chat_template")
        if isinstance(text, list):
            named = {t.get("name"): t.get("template") for t in text if isinstance(t, dict)}
            text = named.get("default")
    if text is None:
        return None
    if not isinstance(text, str):
        raise Refusal(
            f"{source.parent / CONFIG_FILE} has a chat_template that is not a text; a chat "
            "template is Jinja text"
        )
    tokens = {name: _named(config.get(name)) for name in NAMED_TOKENS}
    return ChatTemplate(text, tuple(sorted((k, v) for k, v in tokens.items() if v is not None)))


def _named(token: Any) -> str | None:
    if isinstance(token, dict):  # transformers also writes an added token whole
        token = token.get("content")
    return token if isinstance(token, str) else None


def _config(file: Path) -> dict:
    if not file.is_file():
        return {}
    try:
        config = jsonfile.loads(read_input(file))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise Refusal(f"{file} does not load as a tokenizer configuration: {error}") from None
    return config if isinstance(config, dict) else {}

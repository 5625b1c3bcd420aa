"""What a model family states, in one module of its own (`gpt.py`, `llama.py`): its settings beside
the shape every decoder has, their defaults and checks, the parts its decoder is built from, and
its adapter to Hugging Face transformers in both directions: the configuration transformers reads
and the one it is read from, and the transformers name of every parameter.

Nothing here needs torch: the command line reads the families' declarations without loading it.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from zrodlo.model.parts import Parts, parameter_shapes
from zrodlo.storage.refusal import Refusal

if TYPE_CHECKING:  # a family reads a configuration's fields; the configuration reads the families
    from zrodlo.model.config import ModelConfig

# Each Zrodlo parameter's transformers names with the rows each holds (the parts of a fused
# projection, in row order), and whether transformers holds it transposed.
Names = dict[str, tuple[list[tuple[str, int]], bool]]


class Family(ABC):
    """A decoder family. `Settings` is a frozen dataclass of the options only this family has,
    each declared with `zrodlo.model.declared.option`; its help names the family."""

    name: ClassVar[str]
    summary: ClassVar[str]  # one sentence for --architecture's help
    Settings: ClassVar[type]
    # transformers: config.json's model_type, and the class of its causal LM
    model_type: ClassVar[str]
    transformers_class: ClassVar[str]

    def settings(self, shape: dict[str, Any], given: dict[str, Any]) -> Any:
        """The family's settings from those `given` (none None) for a model of the common fields
        `shape`, the others at their defaults."""
        return self.Settings(**given)

    @abstractmethod
    def check(self, config: ModelConfig, name: Callable[[str], str]) -> None:
        """Refuse settings no model can be built from, naming each field as `name` does."""

    def stated_head_width(self, config: ModelConfig) -> int | None:
        """An attention head's width where the family's settings set it apart from d_model over
        the heads; None where they do not."""
        return None

    @abstractmethod
    def parts(self, config: ModelConfig) -> Parts:
        """The parts the family's decoder of `config` is built from."""

    @abstractmethod
    def transformers_config(self, config: ModelConfig, bos: int, eos: int) -> dict[str, Any]:
        """The transformers config.json that states `config` exactly, framed by `bos`, `eos`."""

    @abstractmethod
    def from_transformers(self, stated: dict[str, Any], file: Path) -> dict[str, Any]:
        """Zrodlo's config.json fields for a transformers config.json, parsed (`stated`), read as
        transformers reads it; a setting Zrodlo does not compute exactly is refused naming it."""

    # transformers' name of each parameter outside the blocks, and the prefix of block <i>'s.
    outer_names: ClassVar[dict[str, str]]
    block_prefix: ClassVar[str]
    # The prefix of the base model's names (all but the head's): a file of the base model alone,
    # as the hub keeps GPT-2, holds them without it, and transformers reads them so.
    base_prefix: ClassVar[str]

    @abstractmethod
    def block_names(
        self, config: ModelConfig, name: str, shape: tuple[int, ...]
    ) -> tuple[list[tuple[str, int]], bool]:
        """transformers' names (after the block prefix) of a block's parameter `name` (after
        "blocks.<i>.") of `shape`, with the rows each holds, and whether it is transposed."""

    def transformers_names(self, config: ModelConfig) -> Names:
        """Each Zrodlo parameter's transformers names."""
        names: Names = {}
        for name, shape in parameter_shapes(config).items():
            if name in self.outer_names:
                names[name] = ([(self.outer_names[name], shape[0])], False)
                continue
            _, layer, rest = name.split(".", 2)  # blocks.<i>.<rest>
            parts, transposed = self.block_names(config, rest, shape)
            prefix = self.block_prefix.format(layer)
            names[name] = ([(prefix + part, rows) for part, rows in parts], transposed)
        return names

    # How transformers' config.json names Zrodlo's fields, for the refusals of an import.
    transformers_fields: ClassVar[dict[str, str]] = {}
    # The tensors (a regular expression over their full names) a checkpoint of the family may
    # hold that transformers itself loads nothing from: buffers it computes. An import passes
    # over these, and refuses any other tensor it does not read.
    ignored_buffers: ClassVar[str] = r"(model\.(layers\.\d+\.self_attn\.)?)?rotary_emb\.inv_freq"


def settings_fields(family: Family) -> list[dataclasses.Field]:
    """The fields of a family's settings, in their order."""
    return list(dataclasses.fields(family.Settings))


def fixed(stated: dict, wanted: dict[str, tuple[Any, Any]], file: Path) -> None:
    """Refuse a transformers setting whose value (transformers' default where config.json leaves
    it out) is not the one Zrodlo computes with: `wanted` maps each to (default, Zrodlo's)."""
    for field, (default, value) in wanted.items():
        if field not in stated and default != value:
            raise Refusal(
                f"{file} does not set {field}, which transformers then takes as {default!r}; "
                f"Zrodlo computes with {value!r} only, so the model cannot be imported exactly"
            )
        if field in stated and stated[field] != value:
            raise Refusal(
                f"{file} sets {field} to {stated[field]!r}; Zrodlo computes with {value!r} only, "
                "so the model cannot be imported exactly"
            )


def whole_window(stated: dict, file: Path) -> None:
    """Refuse layer_types that name a layer other than full_attention (a sliding window): Zrodlo
    attends over the whole window in every layer."""
    layer_types = stated.get("layer_types")
    if layer_types is not None and (
        not isinstance(layer_types, list) or set(layer_types) != {"full_attention"}
    ):
        raise Refusal(
            f"{file} sets layer_types to {layer_types!r}; Zrodlo attends over the whole window in "
            "every layer (full_attention) only, so the model cannot be imported exactly"
        )


def tied(stated: dict, file: Path, default: bool) -> bool:
    """Whether transformers ties the model's head to its token embedding: tie_word_embeddings,
    `default` where config.json leaves it out."""
    tie = stated.get("tie_word_embeddings", default)
    if not isinstance(tie, bool):
        raise Refusal(f"{file} sets tie_word_embeddings to {tie!r}; it is true or false")
    return tie


def is_whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)

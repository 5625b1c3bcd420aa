"""A model's configuration: the shape every decoder has, its dropout rates, its family
(`zrodlo.model.families`) and the family's own settings, as config.json records them, checked.

config.json holds the common fields, then the family's name and its settings; a gpt model with
default settings holds the common fields alone, as releases up to 0.1.0 wrote them.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from dataclasses import dataclass, fields
from functools import cached_property
from typing import Any

from zrodlo.model.declared import option
from zrodlo.model.families import DEFAULT, FAMILIES, Family, families_with, listed
from zrodlo.model.families.base import settings_fields
from zrodlo.model.parts import Parts, parameter_count
from zrodlo.storage.refusal import Refusal

# The shape and dropout rates every decoder has, in config.json's order.
COMMON = (
    "vocab_size", "positions", "d_model", "layers", "heads", "d_ff", "dropout",
    "attention_dropout",
)  # fmt: skip


def _flag(field: str) -> str:
    return "--" + field.replace("_", "-")


@dataclass(frozen=True, kw_only=True)
class ModelConfig:
    """The shape of a model, its dropout rates and its family; `settings` are the family's own
    (its `Settings`). Build one from flat values with `ModelConfig.of`."""

    vocab_size: int = option(None)  # the tokenizer's, not an option
    positions: int = option("The most tokens the model reads in one window.")
    d_model: int = option("Width of the residual stream.")
    layers: int = option("Transformer blocks.")
    heads: int = option("Attention heads per block; must divide --d-model.")
    d_ff: int = option("Width of each block's MLP.")
    dropout: float = option("Dropout on embeddings and residual branches, in [0, 1).")
    attention_dropout: float = option(
        "Dropout on attention probabilities, in [0, 1); above 0 it leaves the fused kernel.", 0.0
    )
    architecture: str = option(
        " ".join(f"{name}: {family.summary}" for name, family in FAMILIES.items()),
        DEFAULT,
        metavar="[" + "|".join(FAMILIES) + "]",
    )
    settings: Any = None  # the family's own settings (its `Settings`); its defaults where None

    def __post_init__(self) -> None:
        if (
            self.settings is None
            and isinstance(self.architecture, str)
            and self.architecture in FAMILIES
        ):
            shape = {name: getattr(self, name) for name in COMMON}
            object.__setattr__(self, "settings", self.family.settings(shape, {}))

    @classmethod
    def of(cls, name: Callable[[str], str] = _flag, **values: Any) -> ModelConfig:
        """The configuration of flat values, as the command line, params.yaml and config.json give
        them: the common fields, `architecture` and the family's own settings (None: its default).
        A setting of another family is refused, naming it as `name` does."""
        architecture = values.pop("architecture", None)
        architecture = DEFAULT if architecture is None else architecture
        if not isinstance(architecture, str) or architecture not in FAMILIES:
            raise Refusal(f"{name('architecture')} is {architecture}; it is {listed()}")
        family = FAMILIES[architecture]
        own = {field.name for field in settings_fields(family)}
        given = {key: value for key, value in values.items() if key not in COMMON}
        for key, value in given.items():
            if key not in own and value is not None and value is not False:
                others = listed(families_with(key))
                raise Refusal(
                    f"{name(key)} is for {name('architecture')} {others}; a {architecture} model "
                    "has none"
                )
        shape = {key: value for key, value in values.items() if key in COMMON}
        settings = {key: value for key, value in given.items() if key in own and value is not None}
        return cls(**shape, architecture=architecture, settings=family.settings(shape, settings))

    @property
    def family(self) -> Family:
        return FAMILIES[self.architecture]

    @cached_property
    def parts(self) -> Parts:
        """The parts this configuration's decoder is built from."""
        return self.family.parts(self)

    @property
    def head_width(self) -> int:
        """An attention head's width: d_model over the heads, unless the family sets it apart."""
        return self.family.stated_head_width(self) or self.d_model // self.heads

    def flat(self) -> dict[str, Any]:
        """The common fields, the family and its settings, as `of` takes them."""
        common = {name: getattr(self, name) for name in COMMON}
        return {**common, "architecture": self.architecture, **dataclasses.asdict(self.settings)}

    def changed(self, **values: Any) -> ModelConfig:
        """This configuration with the flat `values` changed (a family's settings among them)."""
        return ModelConfig.of(**{**self.flat(), **values})

    def validate(self, name: Callable[[str], str] | None = None) -> None:
        """Refuse a configuration no model can be built from, naming each field as `name` does
        (the command-line flag by default)."""
        _check(self, name or _flag)

    def to_json(self) -> dict[str, Any]:
        """config.json: the common fields, then the family and its settings but those left unset
        (None), unless it is the default family at its default settings."""
        flat = self.flat()
        plain = self.architecture == DEFAULT and self.settings == self.family.settings(flat, {})
        if plain:
            return {name: flat[name] for name in COMMON}
        return {name: value for name, value in flat.items() if value is not None}

    @classmethod
    def from_json(cls, data: Any, path: str) -> ModelConfig:
        """Read a parsed config.json; anything missing, mistyped or out of range is refused."""

        def refuse(problem: str) -> Refusal:
            return Refusal(f"{path} does not load as a model configuration: {problem}")

        if not isinstance(data, dict):
            raise refuse(f"it holds {_json_kind(data)}, not an object of named values")
        architecture = data.get("architecture", DEFAULT)
        if not isinstance(architecture, str) or architecture not in FAMILIES:
            raise refuse(f"architecture is {architecture!r}; it is {listed()}")
        named = "architecture" in data
        wanted = [f for f in fields(cls) if f.name in COMMON]
        if architecture != DEFAULT or named:
            wanted += settings_fields(FAMILIES[architecture])
        values: dict[str, Any] = {"architecture": architecture}
        for field in wanted:
            if field.name in data:
                values[field.name] = _typed(field, data[field.name], refuse)
            elif field.name in COMMON:  # a setting left out is at its default, or unset
                raise refuse(f"it has no {field.name}")
        unknown = sorted(set(data) - set(values))
        if unknown:
            raise refuse(f"it holds {unknown[0]}, which no model configuration has")
        try:
            config = cls.of(lambda field: field, **values)
            _check(config, lambda field: field)
        except Refusal as refusal:
            raise refuse(refusal.sentence) from None
        return config


# Every option of a model's configuration, the command line's and the Python API's: the common
# ones and `architecture`, then each family's own settings.
DECLARATIONS = (ModelConfig, *(family.Settings for family in FAMILIES.values()))


def foreign_settings(architecture: str | None, values: dict[str, Any]) -> list[str]:
    """The keys of `values` that are set (not None, not False) and are settings of other families
    than `architecture` (the default where None) but not of it."""
    family = FAMILIES[DEFAULT if architecture is None else architecture]
    own = {field.name for field in settings_fields(family)}
    return [
        key
        for key, value in values.items()
        if key not in own and families_with(key) and value is not None and value is not False
    ]


def _typed(field: dataclasses.Field, value: Any, refuse: Callable[[str], Refusal]) -> Any:
    """A config.json value of the type its field declares (a whole number counts as a float)."""
    kind = str(field.type).removesuffix(" | None")
    if kind == "int" and not _is_int(value):
        raise refuse(f"{field.name} is {value!r}, not a whole number")
    if kind == "float" and not (_is_int(value) or isinstance(value, float)):
        raise refuse(f"{field.name} is {value!r}, not a number")
    if kind == "bool" and not isinstance(value, bool):
        raise refuse(f"{field.name} is {value!r}, not true or false")
    return float(value) if kind == "float" else value


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _json_kind(value: Any) -> str:
    kinds = {list: "a list", str: "a string", bool: "true or false", type(None): "null"}
    return kinds.get(type(value), "a number")


def _check(config: ModelConfig, name: Callable[[str], str]) -> None:
    """Raise the first refusal for `config`; `name(field)` says how the sentence names a field."""
    for field in ("vocab_size", "positions", "d_model", "layers", "heads", "d_ff"):
        value = getattr(config, field)
        if not _is_int(value) or value < 1:
            raise Refusal(f"{name(field)} is {value}; it must be a whole number of one or more")
    if config.family.stated_head_width(config) is None and config.d_model % config.heads != 0:
        raise Refusal(
            f"{name('heads')} {config.heads} does not divide {name('d_model')} {config.d_model}; "
            "each head takes an equal share of the model width"
        )
    config.family.check(config, name)
    for field in ("dropout", "attention_dropout"):
        value = getattr(config, field)
        # A NaN fails the comparison and is refused with the rest.
        if (_is_int(value) or isinstance(value, float)) and 0 <= value < 1:
            continue
        raise Refusal(f"{name(field)} is {value}; it must lie from 0 up to but not including 1")
    # The weights alone: a model that is read, scored, sampled or exported holds no gradients or
    # AdamW moments, and a run counts those for what it trains (`training.step`), every weight or
    # adapters alone, before it allocates anything.
    count, memory = parameter_count(config), machine_memory()
    if count * 4 > memory:
        raise Refusal(
            f"a model of {count:,} parameters needs {count * 4 / 2**30:,.1f} GiB for its float32 "
            f"weights, more than the {memory / 2**30:,.1f} GiB of memory this machine has"
        )


def machine_memory() -> int:
    """Bytes of physical memory this machine has (a GPU's own is `zrodlo.model.device`'s)."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")

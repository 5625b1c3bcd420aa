"""The settings of today's recipe for small models that llama's decoder takes (and the families
built on it, Qwen3's QK-norm among them): a ReLU-squared feed-forward without a gate, RMSNorms
without a learned scale, output projections that start at zero, a head drawn small, a tanh cap
on the logits (Gemma 3's cap, which gemma3 alone of them takes too), the x0 mix, each block
reading the residual stream and the embeddings' output weighted by two learned scalars, and value
embeddings, a table of values per token added to some layers' attention values.

What transformers computes of them: an unscaled RMSNorm is one whose scale is 1, so a model with
them exports exactly (`zrodlo.exchange.to_transformers.unit_scales`); no transformers llama, Qwen
or SmolLM class has a feed-forward without a gate, caps its logits, mixes x0 in or embeds values,
so the export of such a model is refused naming the setting (Gemma3ForCausalLM writes its cap).
The other two shape only the weights a fresh model is drawn with.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from zrodlo.model.families.base import is_number, is_whole
from zrodlo.storage.refusal import Refusal

if TYPE_CHECKING:
    from zrodlo.model.config import ModelConfig

# Each setting with the one value it takes besides None (its family's own part).
CHOICES = {"mlp": "relu2", "norm": "unscaled", "projection_init": "zero"}
RECIPE = (*CHOICES, "head_std")


def check_recipe(config: ModelConfig, name: Any) -> None:
    """Refuse a value a recipe setting does not take (a choice, or a positive finite number), and
    a head_std for a tied head."""
    settings = config.settings
    for field, choice in CHOICES.items():
        value = getattr(settings, field)
        if value is not None and value != choice:
            raise Refusal(f"{name(field)} is {value!r}; it takes {choice}, or none for the default")
    for field in ("head_std", "logit_cap"):
        value = getattr(settings, field)
        if value is not None and not (is_number(value) and 0 < value < float("inf")):
            raise Refusal(f"{name(field)} is {value}; it must be a positive finite number")
    mix = settings.x0_mix
    if mix is not None and not (is_number(mix) and abs(mix) < float("inf")):
        raise Refusal(f"{name('x0_mix')} is {mix}; it must be a finite number")
    every = settings.value_embeddings
    if every is not None and not (is_whole(every) and every >= 1):
        raise Refusal(
            f"{name('value_embeddings')} is {every}; it must be a whole number of 1 or more"
        )
    if settings.head_std is not None and settings.tie_embeddings:
        raise Refusal(
            f"{name('head_std')} draws a head of its own, and {name('tie_embeddings')} makes the "
            "head read the token embedding"
        )


def refuse_recipe(config: ModelConfig, name: Any, family: str) -> None:
    """Refuse every recipe setting for a family whose decoder has its own norms, feed-forward and
    blocks."""
    for field in RECIPE:
        if getattr(config.settings, field) is not None:
            raise Refusal(
                f"{name(field)} is set; a {family} model's norms and feed-forward are its own"
            )
    if config.settings.x0_mix is not None:
        raise Refusal(
            f"{name('x0_mix')} is set; a {family} model's blocks read the residual stream alone"
        )
    if config.settings.value_embeddings is not None:
        raise Refusal(
            f"{name('value_embeddings')} is set; a {family} model's attention values are its "
            "projection's alone"
        )


def exportable(config: ModelConfig, transformers_class: str) -> None:
    """Refuse the export of a setting `transformers_class` does not compute."""
    if config.settings.mlp is not None:
        raise Refusal(
            f"the model's feed-forward is relu2 without a gate (mlp), and {transformers_class} "
            "gates its feed-forward; no transformers class computes it, so it cannot be exported"
        )
    if config.settings.logit_cap is not None:
        raise Refusal(
            f"the model caps its logits (logit_cap), and {transformers_class} computes them "
            "uncapped; it cannot be exported"
        )
    if config.settings.x0_mix is not None:
        raise Refusal(
            f"the model mixes the embeddings' output into every block's input (x0_mix), and "
            f"{transformers_class} does not; it cannot be exported"
        )
    if config.settings.value_embeddings is not None:
        raise Refusal(
            f"the model adds value embeddings to its attention's values (value_embeddings), and "
            f"{transformers_class} does not; it cannot be exported"
        )


def value_embedding_layers(config: ModelConfig) -> tuple[int, ...]:
    """The layers with value embeddings: every `value_embeddings`-th, counting back from the last
    (which always has them), none where the setting is None."""
    every = config.settings.value_embeddings
    if every is None:
        return ()
    return tuple(
        layer for layer in range(config.layers) if (config.layers - 1 - layer) % every == 0
    )

"""A run's own models: the run context's `models`, a ladder named by model strings.

`graph.invoke(input, config, context={"models": ["cheap", "strong"]})` makes that run's
generator a ladder of those models, cheapest first, in place of the graph's generator
(see `_ladder`). The names are resolved like every model string (`resolve_chat_model`),
each with the deployment's generation cap (`REFINE_MAX_TOKENS`, or its default), and
built once per name: a served graph lives long and its runs name the same few models.

A deployment bounds what runs may spend with `REFINE_MODELS`, the model strings a run
may name (the served model, `REFINE_MODEL`, is always allowed), as `REFINE_JUDGE_MODELS`
bounds `judge_model`. Unset, any model the server can reach is allowed.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

from langgraph_refine._calls._models import (
    ModelStringError,
    max_tokens_setting,
    resolve_chat_model,
)
from langgraph_refine._calls._specs import check_allowed_model
from langgraph_refine._kinds import model_name

MODELS_ENV = "REFINE_MODELS"
"""Comma-separated model strings a run may name in its `models` (unset: any)."""


def check_run_models(value: object, environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """A run context's `models`, checked, allowed and resolved (before any model call).

    Raises:
        ValueError: For a value that is not a non-empty list of distinct model strings, a
            model the deployment does not allow, or one that cannot be built (each
            message names the value and what to do).
    """
    if isinstance(value, str):
        value = [value]
    if (
        not isinstance(value, list | tuple)
        or not value
        or not all(isinstance(name, str) and name.strip() for name in value)
    ):
        raise ValueError(
            "models must be a non-empty list of model strings ('provider:model' or a model "
            f"name), cheapest first, got {value!r:.120}"
        )
    names = tuple(name.strip() for name in value)
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise ValueError(
            f"models names {', '.join(map(repr, twice))} more than once; each rung of a "
            "ladder of models is a different model, cheapest first"
        )
    for name in names:
        check_allowed_model(name, option="models:", listed_in=MODELS_ENV, environ=environ)
    resolved = [model_name(model) for model in run_models(names)]  # a bad name fails now
    same = sorted({name for name in resolved if resolved.count(name) > 1})
    if same:  # one model spelled two ways ("smollm2", "openai:smollm2")
        raise ValueError(
            f"models {list(names)!r} name the model {same[0]!r} twice (spelled two ways); "
            "each rung of a ladder of models is a different model, cheapest first"
        )
    return names


def run_models(names: tuple[str, ...]) -> list[Any]:
    """The chat models of a run's `models`, cheapest first (each built once per name).

    Raises:
        ValueError: If a name cannot be resolved (unknown provider package, ...).
    """
    return [_model(name, max_tokens_setting()) for name in names]


def ladder_names(models: tuple[str, ...] | None, default: Sequence[str]) -> list[str]:
    """A run's rungs' model names: its `models`' (as `Attempt.model` names them), else `default`.

    `default` is the graph's own ladder (empty for a single generator); a run's single
    model is named, so its strategy record is keyed by it.
    """
    if models:
        return [model_name(model) for model in run_models(models)]
    return list(default)


def climbing(models: tuple[str, ...] | None, default: Sequence[str]) -> list[str]:
    """The run's ladder when it has more than one rung (a next rung is chosen), else []."""
    names = ladder_names(models, default)
    return names if len(names) > 1 else []


@functools.lru_cache(maxsize=32)
def _model(name: str, max_tokens: int) -> Any:
    try:
        return resolve_chat_model(name, option="models:", max_tokens=max_tokens)
    except ModelStringError as exc:
        raise exc.unusable() from None

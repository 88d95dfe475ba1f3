"""The loop's models, resolved once from what the user gave, for the graph and the agent.

`loop_models` turns the generator (a model, a `"provider:model"` string, another kind of
generator, or a ladder of them), the evaluator, `judge_model` and `comparer` into one
`LoopModels`: the rungs' adapters, the evaluator, the comparer and the model a run's
`judge` check uses. `create_refine_graph` and `RefineMiddleware` both call it; the only
difference is the model that answers when nothing else is named: the graph's first rung,
the agent's own model (known only when the agent runs, so None here).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.language_models import BaseChatModel

from langgraph_refine._calls._models import as_chat_model, resolve_generator
from langgraph_refine._kinds import kind_of, model_name
from langgraph_refine._loop._adapters import GeneratorAdapter, adapt_ladder
from langgraph_refine._loop._select import Comparer, as_comparer, judge_model_in
from langgraph_refine._state import ComparerLike
from langgraph_refine.evaluators import LLMJudge, llm_judge
from langgraph_refine.evaluators._base import BaseEvaluator, EvaluatorLike
from langgraph_refine.evaluators._combine import as_evaluator


@dataclass(frozen=True)
class LoopModels:
    """Who writes, judges and compares, resolved once.

    Attributes:
        rungs: The generator's adapters, cheapest first (one without a ladder; none for
            an agent without `models`: its own model answers).
        evaluator: The evaluator; None only when no model is known yet to judge with
            (an agent's own model judges, once it runs).
        comparer: Who compares with `select="pairwise"`; None when no chat model is
            known yet (the agent's own model compares, once it runs; a graph then
            refuses pairwise selection).
        judge_model: The model a run's `judge` check uses when its context names none.
    """

    rungs: list[GeneratorAdapter]
    evaluator: BaseEvaluator | None
    comparer: Comparer | None
    judge_model: BaseChatModel | None


def loop_models(
    generator: Any,
    evaluator: EvaluatorLike,
    *,
    judge_model: BaseChatModel | str | None = None,
    comparer: ComparerLike = None,
    own_model: bool = False,
    option: str = "generator",
) -> LoopModels:
    """Resolve what the user gave into the loop's models.

    Args:
        generator: One generator or a ladder (a list, cheapest first); model strings
            are resolved. None (an agent without `models`): no rungs.
        evaluator: The evaluator as given (None: an LLM judge).
        judge_model: The default LLM judge's model (a chat model or a model string).
        comparer: The pairwise comparer as given.
        own_model: True in an agent: without `judge_model`, its own model judges and
            compares, known when it runs; False in a graph: the first rung's.
        option: The option that named the generator, for error messages.

    Raises:
        ValueError: If both an evaluator and `judge_model` are given, or a generator is
            not one.
        ModelStringError: A `ValueError`: a model string names no usable chat model
            (resolved by `_calls._models`, the one place for every surface).
    """
    rungs = [] if generator is None else adapt_ladder(resolve_generator(generator, option), option)
    judge_chat = as_chat_model(judge_model, "judge_model")
    first = None if own_model or not rungs else as_chat_model(rungs[0].generator, option)
    judge: BaseEvaluator | None
    if evaluator is None:
        model = judge_chat or first
        judge = llm_judge(model) if model is not None else None
    elif judge_model is not None:
        raise ValueError("judge_model is only used when evaluator is None; pass one or the other")
    else:
        judge = as_evaluator(evaluator)
    return LoopModels(
        rungs=rungs,
        evaluator=judge,
        comparer=_comparer(comparer, judge, judge_chat, first),
        judge_model=judge_chat or first,
    )


def _comparer(
    comparer: ComparerLike,
    judge: BaseEvaluator | None,
    judge_model: BaseChatModel | None,
    first: BaseChatModel | None,
) -> Comparer | None:
    """The pairwise comparer, or None when no chat model is known to compare with.

    The one given, else the LLM judge's model, else `judge_model`, else the model of an
    LLM judge inside a panel or `combine`, else the first rung's.
    """
    if comparer is not None:
        return as_comparer(comparer)
    if isinstance(judge, LLMJudge):
        return as_comparer(judge.model)
    model = judge_model or judge_model_in(judge) or first
    return as_comparer(model) if model is not None else None


def chat_rungs(rungs: Sequence[GeneratorAdapter], option: str) -> list[BaseChatModel]:
    """The rungs' chat models, for a ladder that must be chat models (an agent's `models`).

    Raises:
        ValueError: Naming the first rung that is no chat model.
    """
    models = []
    for i, rung in enumerate(rungs):
        model = as_chat_model(rung.generator, option)
        if model is None:
            raise ValueError(
                f"{option}[{i}] must be a chat model or a 'provider:model' string, got "
                f"{type(rung.generator).__name__}"
            )
        models.append(model)
    return models


def check_binds(rungs: Sequence[BaseChatModel], tools: Sequence[Any]) -> None:
    """Refuse a ladder whose rung cannot call the agent's tools, before any model call.

    Raises:
        ValueError: Naming the rung and what failed.
    """
    if not tools:
        return
    for i, rung in enumerate(rungs):
        try:
            rung.bind_tools(list(tools))
        except Exception as exc:  # NotImplementedError, a provider's own refusal
            raise ValueError(
                f"models[{i}] ({model_name(rung)}) cannot bind the agent's tools: "
                f"{type(exc).__name__}: {exc}; use a chat model that supports tool calling "
                "for every rung, or an agent without tools"
            ) from exc


def agent_models(
    models: Sequence[BaseChatModel | str] | None,
    evaluator: EvaluatorLike,
    judge_model: BaseChatModel | str | None,
    comparer: ComparerLike,
) -> tuple[list[BaseChatModel], LoopModels]:
    """The agent's ladder (cheapest first, model strings resolved) and its loop's models.

    Resolved as the graph's are (`loop_models`), except that the agent's own model,
    known when it runs, judges and compares when nothing else is named.

    Raises:
        ValueError: If `models` is not a non-empty list of chat models or model strings,
            or names one model twice; if both an evaluator and `judge_model` are given.
    """
    one = isinstance(models, str) or kind_of(models) in ("chat", "runnable")
    if models is not None and (one or not isinstance(models, Sequence) or not models):
        raise ValueError(
            f"models must be a non-empty list of chat models or 'provider:model' strings, "
            f"cheapest first, got {models!r}"
        )
    resolved = loop_models(
        list(models) if models is not None else None,
        evaluator,
        judge_model=judge_model,
        comparer=comparer,
        own_model=True,
        option="models",
    )
    return chat_rungs(resolved.rungs, "models"), resolved

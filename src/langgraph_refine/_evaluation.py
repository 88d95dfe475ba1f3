"""The evaluator protocol: how callables, chat models and lists become evaluators.

An evaluator is anything that maps `(response, state)` to a score in [0, 1] or an
`Evaluation`. This module turns the accepted forms into one interface with a sync
and an async entry point, and checks what evaluators return.
"""

from __future__ import annotations

import inspect
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from typing import Any, TypeAlias

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables.config import run_in_executor

from langgraph_refine._state import Evaluation

EvaluatorLike: TypeAlias = Any
"""A callable `(response, state) -> float | Evaluation` (sync or async), a chat model
(used as an LLM judge), a `BaseEvaluator`, or a list of these (combined)."""


class BaseEvaluator(ABC):
    """Base class of the ready evaluators: one `evaluate`, with an async twin.

    Subclasses implement `evaluate`; `aevaluate` runs it in a worker thread unless
    overridden, so slow checks (subprocesses, HTTP) never block the event loop.

    Attributes:
        name: Label used in combined feedback and run names.
        calls_model: True if evaluating calls a model (counted against the budget).
    """

    name: str = "evaluator"
    calls_model: bool = False

    @abstractmethod
    def evaluate(self, response: str, state: Mapping[str, Any]) -> Evaluation:
        """Evaluate `response` for the loop in `state` (sync)."""

    async def aevaluate(self, response: str, state: Mapping[str, Any]) -> Evaluation:
        """Evaluate `response` for the loop in `state` (async)."""
        return await run_in_executor(None, self.evaluate, response, state)

    def __call__(self, response: str, state: Mapping[str, Any]) -> Evaluation:
        return self.evaluate(response, state)


def to_evaluation(value: Any, *, source: str) -> Evaluation:
    """Check and convert what an evaluator returned.

    Args:
        value: A float/int score in [0, 1] or an `Evaluation`.
        source: Names the evaluator in error messages.

    Raises:
        ValueError: If the score is NaN or outside [0, 1].
        TypeError: If the value is neither a number nor an `Evaluation`.
    """
    if isinstance(value, Evaluation):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        score = float(value)
        if math.isnan(score) or not 0.0 <= score <= 1.0:
            raise ValueError(
                f"{source} returned score {value!r}; scores must be numbers in [0, 1] "
                "(normalise other scales, e.g. divide a 0-10 score by 10)"
            )
        return Evaluation(score=score)
    raise TypeError(
        f"{source} returned {type(value).__name__} ({value!r:.80}); "
        "return a float in [0, 1] or an Evaluation"
    )


def is_async_callable(fn: object) -> bool:
    """True for async functions and objects whose `__call__` is async."""
    call = getattr(type(fn), "__call__", None)  # noqa: B004 - looking for an async __call__
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(call)


class CallableEvaluator(BaseEvaluator):
    """Adapts a user function `(response, state) -> float | Evaluation` (sync or async)."""

    def __init__(self, fn: Callable[..., Any], name: str | None = None) -> None:
        self.fn = fn
        self.name = name or getattr(fn, "__name__", None) or type(fn).__name__
        self.is_async = is_async_callable(fn)

    def evaluate(self, response: str, state: Mapping[str, Any]) -> Evaluation:
        if self.is_async:
            raise TypeError(
                f"evaluator {self.name!r} is async; run the loop with ainvoke() or arefine()"
            )
        value = self.fn(response, state)
        if inspect.isawaitable(value):
            if inspect.iscoroutine(value):
                value.close()
            raise TypeError(
                f"evaluator {self.name!r} returned an awaitable; "
                "run the loop with ainvoke() or arefine()"
            )
        return to_evaluation(value, source=f"evaluator {self.name!r}")

    async def aevaluate(self, response: str, state: Mapping[str, Any]) -> Evaluation:
        if self.is_async:
            value = await self.fn(response, state)
        else:
            value = await run_in_executor(None, self.fn, response, state)
            if inspect.isawaitable(value):
                value = await value
        return to_evaluation(value, source=f"evaluator {self.name!r}")


def as_evaluator(evaluator: EvaluatorLike, *, option: str = "evaluator") -> BaseEvaluator:
    """Turn any accepted evaluator form into a `BaseEvaluator`.

    Args:
        evaluator: See `EvaluatorLike`.
        option: The option name, for error messages.

    Raises:
        ValueError: If `evaluator` is not callable, or is an empty list.
    """
    from langgraph_refine.evaluators import combine, llm_judge

    if isinstance(evaluator, BaseEvaluator):
        return evaluator
    if isinstance(evaluator, BaseChatModel):
        return llm_judge(evaluator)
    if isinstance(evaluator, list | tuple):
        if not evaluator:
            raise ValueError(f"{option} must not be an empty list")
        return combine(*evaluator)
    if callable(evaluator):
        return CallableEvaluator(evaluator)
    raise ValueError(
        f"{option} must be callable (response, state) -> float | Evaluation, a chat model, "
        f"or a list of these; got {type(evaluator).__name__} ({evaluator!r:.80})"
    )

"""The evaluator protocol: the base class, the callable adapter, and calling maybe-async code.

An evaluator is anything that maps `(response, state)` to a score in [0, 1] or an
`Evaluation`. `BaseEvaluator` gives every evaluator one sync and one async entry point;
`CallableEvaluator` adapts a user's function; `to_evaluation` checks what evaluators
return. `acall` and `call_sync` are the one place that decides how to call a user
function that may be sync or async (evaluators, reward functions and generators use them).

This module imports nothing else from the package's evaluators, so every evaluator
module (and the loop's core) can build on it without an import cycle.
"""

from __future__ import annotations

import contextlib
import inspect
import math
import weakref
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeAlias

from langchain_core.runnables.config import run_in_executor

from langgraph_refine._state import Evaluation

EvaluatorLike: TypeAlias = Any
"""A callable `(response, state) -> float | Evaluation` (sync or async), a chat model
(used as an LLM judge), a `BaseEvaluator`, or a list of these (combined)."""


def is_async_callable(fn: object) -> bool:
    """True for async functions and objects whose `__call__` is async.

    Example:
        >>> async def judge(response, state): ...
        >>> is_async_callable(judge), is_async_callable(len)
        (True, False)
    """
    # Asked before every call a loop makes, so the answer is kept per function (weakly:
    # a loop's lambdas are not kept alive by it).
    try:
        return _ASYNC[fn]
    except (KeyError, TypeError):
        pass
    call = getattr(type(fn), "__call__", None)  # noqa: B004 - looking for an async __call__
    answer = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(call)
    with contextlib.suppress(TypeError):  # unhashable or not weak-referenceable
        _ASYNC[fn] = answer
    return answer


_ASYNC: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()


async def acall(fn: Callable[..., Any], *args: Any) -> Any:
    """Call `fn(*args)` from async code, whether `fn` is sync or async.

    An async `fn` is awaited; a sync one runs in a worker thread, so a slow check never
    blocks the event loop; an awaitable it returns (a sync wrapper around async code) is
    awaited too.

    Example:
        In a coroutine, `await acall(max, 2, 3)` gives 3, run in a worker thread.
    """
    if is_async_callable(fn):
        return await fn(*args)
    value = await run_in_executor(None, fn, *args)
    if inspect.isawaitable(value):
        value = await value
    return value


def call_sync(fn: Callable[..., Any], *args: Any, what: str) -> Any:
    """Call `fn(*args)` from sync code; refuse async functions with a clear error.

    Args:
        fn: The function to call.
        *args: Its arguments.
        what: Names `fn` in the error, after "the": `"generator"`, `"evaluator 'score'"`.

    Raises:
        TypeError: If `fn` is async or returns an awaitable (the awaitable is closed
            first, so no "never awaited" warning follows).

    Example:
        >>> call_sync(max, 2, 3, what="max function")
        3
    """
    if is_async_callable(fn):
        raise TypeError(f"the {what} is async; run the loop with ainvoke() or arefine()")
    value = fn(*args)
    if inspect.isawaitable(value):
        if inspect.iscoroutine(value):
            value.close()
        raise TypeError(
            f"the {what} returned an awaitable; run the loop with ainvoke() or arefine()"
        )
    return value


class BaseEvaluator(ABC):
    """Base class of the ready evaluators: one `evaluate`, with an async twin.

    Subclasses implement `evaluate`; `aevaluate` runs it in a worker thread unless
    overridden, so slow checks (subprocesses, HTTP) never block the event loop.
    Calling the evaluator directly, `ev(response, state)`, returns an `Evaluation`, or,
    for an evaluator built from an async function (`is_async`), an awaitable of one.

    Attributes:
        name: Label used in combined feedback and run names.
        calls_model: True if evaluating calls a model.
        is_async: True if evaluating needs the async path (`aevaluate`).
    """

    name: str = "evaluator"
    calls_model: bool = False
    is_async: bool = False

    @abstractmethod
    def evaluate(self, response: str, state: Mapping[str, Any]) -> Evaluation:
        """Evaluate `response` for the loop in `state` (sync)."""

    async def aevaluate(self, response: str, state: Mapping[str, Any]) -> Evaluation:
        """Evaluate `response` for the loop in `state` (async)."""
        return await run_in_executor(None, self.evaluate, response, state)

    def __call__(
        self, response: str, state: Mapping[str, Any]
    ) -> Evaluation | Awaitable[Evaluation]:
        """Evaluate directly: an `Evaluation`, or an awaitable of one when `is_async`."""
        if self.is_async:
            return self.aevaluate(response, state)
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


class CallableEvaluator(BaseEvaluator):
    """Adapts a user function `(response, state) -> float | Evaluation` (sync or async).

    Example:
        >>> CallableEvaluator(lambda response, state: 0.5)("text", {}).score
        0.5
    """

    def __init__(self, fn: Callable[..., Any], name: str | None = None) -> None:
        self.fn = fn
        self.name = name or getattr(fn, "__name__", None) or type(fn).__name__
        self.is_async = is_async_callable(fn)

    def evaluate(self, response: str, state: Mapping[str, Any]) -> Evaluation:
        value = call_sync(self.fn, response, state, what=f"evaluator {self.name!r}")
        return to_evaluation(value, source=f"evaluator {self.name!r}")

    async def aevaluate(self, response: str, state: Mapping[str, Any]) -> Evaluation:
        value = await acall(self.fn, response, state)
        return to_evaluation(value, source=f"evaluator {self.name!r}")

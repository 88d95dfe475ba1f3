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
import functools
import inspect
import math
import typing
import weakref
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeAlias

from langchain_core.runnables.config import run_in_executor
from pydantic import BaseModel

from langgraph_refine._calls._retry import describe_status, is_transient
from langgraph_refine._errors import Unjudged
from langgraph_refine._internal import mark_internal
from langgraph_refine._state import Evaluation, Judgment, NoJudgment
from langgraph_refine._typed import OutputSchema

EvaluatorLike: TypeAlias = Any
"""A callable `(response, state) -> float | Evaluation` (sync or async), an openevals-style
callable (`fn(*, inputs, outputs) -> {"key", "score", "comment"}`), a chat model (used as an
LLM judge), a `BaseEvaluator`, or a list of these (combined)."""


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


def unjudged_reason(exc: BaseException, evaluator: BaseEvaluator) -> str | None:
    """Why `exc` leaves a response unjudged, or None when it is an error to raise.

    An evaluator's `Unjudged`, and a transient provider error from an evaluator that
    calls a model (a connection error, a timeout, HTTP 408, 409, 429 or 5xx, still failing
    after the retries), mean no judgment could be made. Anything else is raised: a bug in
    the user's own evaluator, or a provider error no retry mends (a 401 for a wrong key,
    a 404 for a wrong model), which would leave every later attempt unjudged too.
    """
    if isinstance(exc, Unjudged):
        return str(exc) or "the evaluator could not judge the response"
    if evaluator.calls_model and is_transient(exc):
        return f"the judge model's call failed: {describe_error(exc)}"
    return None


def describe_error(exc: BaseException) -> str:
    """A provider's error in one line: its type, HTTP status and message.

    Example:
        >>> describe_error(ConnectionError("judge unreachable"))
        'ConnectionError: judge unreachable'
    """
    status = describe_status(exc)
    text = f"{type(exc).__name__}" + (f" ({status})" if status else "")
    message = str(exc).strip()
    return f"{text}: {message[:200]}" if message else text


def judge_once(evaluator: BaseEvaluator, response: str, state: Mapping[str, Any]) -> Judgment:
    """`evaluator.evaluate(response, state)`, or a `NoJudgment` when it could not judge.

    Raises:
        Exception: What the evaluator raised, when it is not a failure to judge.
    """
    try:
        return evaluator.evaluate(response, state)
    except Exception as exc:
        return _no_judgment(exc, evaluator)


async def ajudge_once(
    evaluator: BaseEvaluator, response: str, state: Mapping[str, Any]
) -> Judgment:
    """Async twin of `judge_once`."""
    try:
        return await evaluator.aevaluate(response, state)
    except Exception as exc:
        return _no_judgment(exc, evaluator)


def _no_judgment(exc: Exception, evaluator: BaseEvaluator) -> NoJudgment:
    reason = unjudged_reason(exc, evaluator)
    if reason is None:
        raise exc
    return NoJudgment(reason, exc)


def request_criteria(state: Mapping[str, Any] | None) -> list[str]:
    """The criteria a request adds for every judge of its run (`state["criteria"]`).

    A run names them in its input (`criteria`: a string or a list of strings); judges
    add them to the criteria they were built with.

    Example:
        >>> request_criteria({"criteria": ["Rhymes", " "]}), request_criteria({"criteria": "Short"})
        (['Rhymes'], ['Short'])
    """
    value = (state or {}).get("criteria") if isinstance(state, Mapping) else None
    if not value:
        return []
    items = [value] if isinstance(value, str) else list(value)
    return [str(item).strip() for item in items if str(item).strip()]


class BaseEvaluator(ABC):
    """Base class of the ready evaluators: one `evaluate`, with an async twin.

    Subclasses implement `evaluate`; `aevaluate` runs it in a worker thread unless
    overridden or `inline`, so slow checks (subprocesses, HTTP) never block the event
    loop. Calling the evaluator directly, `ev(response, state)`, returns an
    `Evaluation`, or, for an evaluator built from an async function (`is_async`), an
    awaitable of one.

    Attributes:
        name: Label used in combined feedback and run names.
        calls_model: True if evaluating calls a model.
        is_async: True if evaluating needs the async path (`aevaluate`).
        inline: True for a quick check that neither waits nor calls a model:
            `aevaluate` calls `evaluate` in the caller's thread. Pure-Python work in a
            worker thread holds the interpreter's lock all the same, so the thread
            would only add a hop to it and back for every evaluation.

    Every subclass's `evaluate` and `aevaluate` run as the loop's own calls: a model
    called in them (without a config of its own) is kept out of `messages` streams and
    still traced (see `langgraph_refine._internal`).
    """

    name: str = "evaluator"
    calls_model: bool = False
    is_async: bool = False
    inline: bool = False
    prompt_text: str = ""
    """The fixed text of the prompt a model-calling judge is sent (its system message and
    instructions), part of its identity for a calibration (`evaluators.calibrate`)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # A judge's reply is not the chat's: the one place evaluations are marked.
        mark_internal(cls, "evaluate", "aevaluate")

    @abstractmethod
    def evaluate(self, response: str, state: Mapping[str, Any]) -> Evaluation:
        """Evaluate `response` for the loop in `state` (sync)."""

    async def aevaluate(self, response: str, state: Mapping[str, Any]) -> Evaluation:
        """Evaluate `response` for the loop in `state` (async)."""
        if self.inline:
            return self.evaluate(response, state)
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


def member_feedback(evaluation: Evaluation) -> str:
    """A member's feedback as `combine` and `panel` show it to the generator.

    A member that gave no text is "no issues" only when it found none (a full score or a
    PASS); below that, the line says the score had no reason given, so the generator is
    not told that an attempt scored 0 has nothing to fix.
    """
    text = evaluation.feedback.strip()
    if text:
        return text
    if evaluation.verdict == "PASS" or evaluation.score >= 1.0:
        return "no issues"
    if evaluation.verdict == "FAIL":
        return "failed this check without saying why"
    return f"gave no reason for scoring {evaluation.score:.2f} (below 1.00)"


class CallableEvaluator(BaseEvaluator):
    """Adapts a user function `(response, state) -> float | Evaluation` (sync or async).

    Typed responses: when the function's first parameter is annotated with a pydantic
    model class (`def check(person: Person, state)`) or `dict`, it receives the response
    parsed into that type instead of the JSON text; a response that does not parse or
    validate is FAIL with score 0 and the errors as feedback, without calling it.

    Args:
        fn: The function.
        name: Label in combined feedback and run names (default: the function's name).
        calls_model: True for a judge that calls a model outside LangChain's callbacks
            (a provider's SDK client): each evaluation then counts as at least one model
            call against the budget, checked before it starts. Model calls made through
            LangChain are counted without it.

    Example:
        >>> CallableEvaluator(lambda response, state: 0.5)("text", {}).score
        0.5
        >>> def has_name(person: dict, state) -> float:
        ...     return 1.0 if person.get("name") else 0.0
        >>> CallableEvaluator(has_name)('{"name": "Ada"}', {}).score
        1.0
    """

    def __init__(
        self, fn: Callable[..., Any], name: str | None = None, *, calls_model: bool = False
    ) -> None:
        self.fn = fn
        self.name = name or getattr(fn, "__name__", None) or type(fn).__name__
        self.is_async = is_async_callable(fn)
        self.schema = _typed_parameter(fn)
        self.calls_model = calls_model

    def _argument(self, response: str, state: Mapping[str, Any]) -> tuple[Any, Evaluation | None]:
        """What the function gets: the response, or its typed object (or a FAIL).

        In a typed loop the pending attempt already holds the validated object: it is
        used as it is, not decoded and validated again from the response's text.
        """
        if self.schema is None:
            return response, None
        output = _pending_output(response, state)
        if isinstance(output, dict) and self.schema.model is None:
            return output, None  # a `dict` parameter: the plain object itself
        reply = self.schema.read(response if output is None else output)
        if reply.evaluation is not None:
            return None, reply.evaluation
        return self.schema.typed(reply.output), None

    def evaluate(self, response: str, state: Mapping[str, Any]) -> Evaluation:
        argument, failed = self._argument(response, state)
        if failed is not None:
            return failed
        value = call_sync(self.fn, argument, state, what=f"evaluator {self.name!r}")
        return to_evaluation(value, source=f"evaluator {self.name!r}")

    async def aevaluate(self, response: str, state: Mapping[str, Any]) -> Evaluation:
        argument, failed = self._argument(response, state)
        if failed is not None:
            return failed
        value = await acall(self.fn, argument, state)
        return to_evaluation(value, source=f"evaluator {self.name!r}")


def _pending_output(response: str, state: Mapping[str, Any]) -> Any:
    """The object the loop already read for `response` (its pending attempt's), else None."""
    pending = state.get("pending") if isinstance(state, Mapping) else None
    if pending is None:
        return None
    if getattr(pending, "response", None) == response:
        return pending.output
    for candidate in getattr(pending, "candidates", None) or ():
        if candidate.response == response:
            return candidate.output
    return None


_ANY_OBJECT = {"type": "object"}


def _typed_parameter(fn: Callable[..., Any]) -> OutputSchema | None:
    """The schema of the first parameter's annotation: a pydantic model, or `dict`."""
    try:
        first = next(iter(inspect.signature(fn).parameters.values()), None)
    except (TypeError, ValueError):
        return None
    if first is None or first.annotation is inspect.Parameter.empty:
        return None
    annotation = first.annotation
    if isinstance(annotation, str):  # postponed annotations: resolve them
        try:
            target = fn if inspect.isfunction(fn) or inspect.ismethod(fn) else type(fn).__call__
            annotation = typing.get_type_hints(target).get(first.name)
        except Exception:  # an unresolvable hint is no typed request
            return None
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return OutputSchema(annotation)
    if annotation is dict or typing.get_origin(annotation) in (dict, Mapping):
        return _dict_schema()
    return None


@functools.cache
def _dict_schema() -> OutputSchema:
    return OutputSchema(_ANY_OBJECT)

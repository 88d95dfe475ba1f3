"""openevals-style evaluators: `fn(*, inputs, outputs, ...) -> {"key", "score", "comment"}`.

LangChain's evaluator library, `openevals` (`exact_match`, `create_llm_as_judge`, the
code and JSON evaluators), and any function written the same way, take keyword-only
`inputs` and `outputs` and return one result dict or a list of them. `OpenEvalsEvaluator`
adapts such a function: it is called with `inputs` = the task and `outputs` = the
response, a boolean score counts as 1.0 or 0.0, `comment` becomes the feedback, and
several results are averaged with each comment labelled with its key.
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable, Mapping
from typing import Any

from langgraph_refine._state import Evaluation
from langgraph_refine.evaluators._base import BaseEvaluator, acall, call_sync, is_async_callable

_GIVEN = ("inputs", "outputs")


def _parameters(fn: Callable[..., Any]) -> Mapping[str, inspect.Parameter] | None:
    try:
        return inspect.signature(fn).parameters
    except (TypeError, ValueError):  # builtins and the like have no readable signature
        return None


def is_openevals_evaluator(fn: object) -> bool:
    """True for a callable that takes `outputs` as a keyword-only parameter (openevals' form).

    Example:
        >>> def exact(*, outputs, reference_outputs=None): ...
        >>> is_openevals_evaluator(exact), is_openevals_evaluator(lambda response, state: 1.0)
        (True, False)
    """
    if not callable(fn):
        return False
    parameters = _parameters(fn)
    outputs = parameters.get("outputs") if parameters else None
    return outputs is not None and outputs.kind is inspect.Parameter.KEYWORD_ONLY


class OpenEvalsEvaluator(BaseEvaluator):
    """Adapts an openevals-style evaluator (sync or async) to the loop.

    Args:
        fn: A callable taking keyword-only `outputs` (and `inputs`, if it names it or
            takes `**kwargs`), returning `{"key", "score", "comment"}` or a list of them.
        name: Label in combined feedback; the function's name by default.

    Raises:
        ValueError: If `fn` needs a keyword argument the loop cannot give (such as
            `reference_outputs`): bind it first with `functools.partial`.

    Example:
        >>> def shouts(*, inputs, outputs):
        ...     return {"key": "shouts", "score": outputs.isupper(), "comment": "caps?"}
        >>> evaluation = OpenEvalsEvaluator(shouts).evaluate("HI", {"task": "greet"})
        >>> evaluation.score, evaluation.feedback
        (1.0, 'caps?')
    """

    def __init__(self, fn: Callable[..., Any], name: str | None = None) -> None:
        parameters = _parameters(fn) or {}
        missing = [
            p.name
            for p in parameters.values()
            if p.kind is inspect.Parameter.KEYWORD_ONLY
            and p.default is inspect.Parameter.empty
            and p.name not in _GIVEN
        ]
        inner = fn.func if isinstance(fn, functools.partial) else fn  # a bound reference
        own = getattr(inner, "__name__", "")
        # openevals' factories return a private `_wrapped_evaluator`: name it by the library.
        self.name = name or (own if own and not own.startswith("_") else "openevals")
        if missing:
            raise ValueError(
                f"openevals evaluator {self.name!r} needs {', '.join(missing)}, which the loop "
                "cannot give (it passes inputs=the task and outputs=the response); bind "
                f"{missing[0]} first, e.g. functools.partial({self.name}, {missing[0]}=...)"
            )
        self.fn = fn
        self._takes_inputs = "inputs" in parameters or any(
            p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()
        )
        self.is_async = is_async_callable(fn)

    def _bound(self, response: str, state: Mapping[str, Any]) -> Callable[..., Any]:
        kwargs: dict[str, Any] = {"outputs": response}
        if self._takes_inputs:
            kwargs["inputs"] = str((state or {}).get("task", ""))
        return functools.partial(self.fn, **kwargs)

    def evaluate(self, response: str, state: Mapping[str, Any]) -> Evaluation:
        what = f"evaluator {self.name!r}"
        return from_results(call_sync(self._bound(response, state), what=what), source=what)

    async def aevaluate(self, response: str, state: Mapping[str, Any]) -> Evaluation:
        value = await acall(self._bound(response, state))
        return from_results(value, source=f"evaluator {self.name!r}")


def _score(result: Mapping[str, Any], source: str) -> float:
    score = result.get("score")
    if isinstance(score, bool):
        return 1.0 if score else 0.0
    if isinstance(score, int | float) and math.isfinite(score) and 0.0 <= score <= 1.0:
        return float(score)
    raise ValueError(
        f"{source} returned score {score!r} for key {result.get('key')!r}; an openevals "
        "score must be a boolean or a number in [0, 1]"
    )


def from_results(value: Any, *, source: str) -> Evaluation:
    """An `Evaluation` from one openevals result dict or a list of them.

    Args:
        value: `{"key", "score", "comment", ...}` or a non-empty list of such dicts.
        source: Names the evaluator in error messages.

    Raises:
        TypeError: If `value` is not such a dict or list.
        ValueError: If a score is not a boolean or a number in [0, 1].

    Example:
        >>> evaluation = from_results(
        ...     [{"key": "a", "score": True, "comment": "ok"},
        ...      {"key": "b", "score": 0.5, "comment": "vague"}], source="mine")
        >>> evaluation.score
        0.75
        >>> print(evaluation.feedback)
        [a] score 1.00: ok
        [b] score 0.50: vague
    """
    results = list(value) if isinstance(value, list | tuple) else [value]
    if not results or not all(isinstance(r, Mapping) and "score" in r for r in results):
        raise TypeError(
            f"{source} returned {value!r:.100}; an openevals evaluator returns "
            '{"key": ..., "score": ..., "comment": ...} or a list of them'
        )
    scores = [_score(r, source) for r in results]
    comments = [str(r.get("comment") or "").strip() for r in results]
    if len(results) == 1:
        feedback = comments[0]
    else:
        feedback = "\n".join(
            f"[{r.get('key', 'score')}] score {s:.2f}: {c or 'no comment'}"
            for r, s, c in zip(results, scores, comments, strict=True)
        )
    details = {
        "results": [
            {"key": r.get("key"), "score": s, "comment": c}
            for r, s, c in zip(results, scores, comments, strict=True)
        ]
    }
    return Evaluation(score=sum(scores) / len(scores), feedback=feedback, details=details)

"""`reward_model`: any reward function `(task, response) -> float`, rescaled onto [0, 1]."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from langgraph_refine._state import Evaluation
from langgraph_refine.evaluators._base import BaseEvaluator, acall, call_sync, is_async_callable


def _check_bound(name: str, value: object) -> float:
    if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
        raise ValueError(f"reward_model: {name} must be a finite number, got {value!r}")
    return float(value)


class RewardModel(BaseEvaluator):
    """Wraps a reward function and rescales its output. See `reward_model`.

    Example:
        >>> RewardModel(lambda task, response: 12.0, low=0, high=10).evaluate("r", {}).details
        {'reward': 12.0, 'low': 0.0, 'high': 10.0, 'clamped': True}
    """

    def __init__(
        self, fn: Callable[[str, str], Any], *, low: float = 0.0, high: float = 1.0
    ) -> None:
        if not callable(fn):
            raise ValueError(
                "reward_model: fn must be a callable (task, response) -> float, "
                f"got {type(fn).__name__} ({fn!r:.80})"
            )
        self.low = _check_bound("low", low)
        self.high = _check_bound("high", high)
        if self.low >= self.high:
            raise ValueError(
                f"reward_model: low ({low!r}) must be less than high ({high!r}); they are "
                "the rewards that map to scores 0 and 1"
            )
        self.fn = fn
        self.is_async = is_async_callable(fn)
        self.name = getattr(fn, "__name__", None) or type(fn).__name__

    def evaluate(self, response: str, state: Mapping[str, Any]) -> Evaluation:
        what = f"reward function {self.name!r}"
        return self._evaluation(call_sync(self.fn, _task(state), response, what=what))

    async def aevaluate(self, response: str, state: Mapping[str, Any]) -> Evaluation:
        return self._evaluation(await acall(self.fn, _task(state), response))

    def _evaluation(self, reward: object) -> Evaluation:
        if not isinstance(reward, int | float) or isinstance(reward, bool):
            raise TypeError(
                f"reward function {self.name!r} returned {type(reward).__name__} "
                f"({reward!r:.80}); return a number"
            )
        if math.isnan(reward):
            raise ValueError(f"reward function {self.name!r} returned NaN; return a number")
        scaled = (float(reward) - self.low) / (self.high - self.low)
        score = min(1.0, max(0.0, scaled))
        feedback = (
            f"The reward model gave {reward:g} on a scale from {self.low:g} to {self.high:g} "
            f"(score {score:.2f}). Improve the response's overall quality for the task."
        )
        return Evaluation(
            score=score,
            feedback=feedback,
            details={
                "reward": float(reward),
                "low": self.low,
                "high": self.high,
                "clamped": score != scaled,
            },
        )


def _task(state: Mapping[str, Any]) -> str:
    task = (state or {}).get("task", "")
    return task if isinstance(task, str) else str(task)


def reward_model(
    fn: Callable[[str, str], Any], *, low: float = 0.0, high: float = 1.0
) -> RewardModel:
    """Use a reward function, such as a reward model served elsewhere, as an evaluator.

    `fn(task, response)` returns a number (sync or async; an async function needs the
    async loop, `arefine`/`ainvoke`, and calling the evaluator directly returns an
    awaitable). The reward `low` maps to score 0 and `high` to 1,
    linearly; rewards outside `[low, high]` are clamped (`details["clamped"]` says so,
    and `details["reward"]` keeps the raw value). Calls to the reward function are not
    model calls of the loop: they do not count against the budget.

    Args:
        fn: The reward function `(task, response) -> float`.
        low: The reward that scores 0.
        high: The reward that scores 1 (greater than `low`).

    Returns:
        The evaluator, named after `fn`.

    Raises:
        ValueError: If `fn` is not callable, or `low >= high`, or a bound is not finite.

    Example:
        >>> def brevity(task: str, response: str) -> float:
        ...     return -len(response)  # shorter is better
        >>> ev = reward_model(brevity, low=-100, high=0)
        >>> ev.evaluate("x" * 25, {"task": "be brief"}).score
        0.75
    """
    return RewardModel(fn, low=low, high=high)

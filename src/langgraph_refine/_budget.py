"""Budgets: limits on model calls, tokens and seconds, and the meter that enforces them.

The meter is a LangChain callback handler. A node of the loop attaches it to the config
it runs with, so it sees every chat model (or LLM) that starts under the node, whoever
makes the call: the generator, the judge, a model inside a user's evaluator or inside a
graph generator, and every retry. It refuses a call by raising `BudgetStop` from the
start event (callbacks with `raise_error=True` abort the call before any request is
sent); the node turns that into the loop's budget stop.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.outputs import LLMResult
from langchain_core.runnables.config import ensure_config, merge_configs, var_child_runnable_config

from langgraph_refine._state import Usage


@dataclass(frozen=True)
class Budget:
    """Limits on what one loop may spend. `None` means no limit.

    Args:
        max_calls: Model calls: every chat model or LLM call made while a loop node
            runs (generator, judge, models inside evaluators and graph generators,
            retries included). A plain callable generator in which no model call is
            seen counts as one call.
        max_tokens: Total tokens, from the models' usage metadata.
        max_seconds: Seconds spent generating and evaluating; a hard ceiling: a model
            call still running when the time runs out is cut off. Time paused in a
            human review or between a crash and its resume does not count.

    Raises:
        ValueError: If a limit is a boolean, NaN, negative, or not a number.

    Example:
        >>> Budget(max_calls=6, max_tokens=20_000)
        Budget(max_calls=6, max_tokens=20000, max_seconds=None)
    """

    max_calls: int | None = None
    max_tokens: int | None = None
    max_seconds: float | None = None

    def __post_init__(self) -> None:
        for name, integral in (("max_calls", True), ("max_tokens", True), ("max_seconds", False)):
            value = getattr(self, name)
            if value is None:
                continue
            kind = int if integral else int | float
            if (
                isinstance(value, bool)
                or not isinstance(value, kind)
                or math.isnan(value)
                or value < 0
            ):
                expected = "an integer >= 0" if integral else "a number >= 0"
                raise ValueError(f"Budget.{name} must be {expected} or None, got {value!r}")

    @classmethod
    def coerce(
        cls, value: Budget | dict[str, Any] | None, *, option: str = "budget"
    ) -> Budget | None:
        """A `Budget` from a `Budget`, a dict of its fields (per-run context, JSON), or None.

        Raises:
            ValueError: If the value is of another type or names an unknown field.
        """
        if value is None or isinstance(value, Budget):
            return value
        if isinstance(value, dict):
            unknown = sorted(set(value) - {"max_calls", "max_tokens", "max_seconds"})
            if unknown:
                raise ValueError(
                    f"{option} has unknown field(s) {unknown}; use max_calls, max_tokens, "
                    "max_seconds"
                )
            return cls(**value)
        raise ValueError(f"{option} must be a Budget, a dict or None, got {type(value).__name__}")

    def exceeded(self, usage: Usage) -> str | None:
        """Name the first limit already reached by `usage`, or None if none is."""
        if self.max_calls is not None and usage.calls >= self.max_calls:
            return f"max_calls={self.max_calls} reached ({usage.calls} calls made)"
        if self.max_tokens is not None and usage.total_tokens >= self.max_tokens:
            return f"max_tokens={self.max_tokens} reached ({usage.total_tokens} tokens used)"
        if self.max_seconds is not None and usage.seconds >= self.max_seconds:
            return f"max_seconds={self.max_seconds} reached ({usage.seconds:.2f}s spent)"
        return None

    def seconds_left(self, usage: Usage) -> float | None:
        """Seconds left before `max_seconds` is reached, or None without a time limit."""
        if self.max_seconds is None:
            return None
        return max(0.0, self.max_seconds - usage.seconds)


class BudgetStop(Exception):
    """Raised inside a step when the budget forbids the next model call."""


class BudgetMeter(BaseCallbackHandler):
    """Counts the model calls and tokens of one node run and refuses calls past the budget.

    Attach it to the node's config (`callbacks=[meter]`): LangChain hands it every chat
    model and LLM start and end under that config. The meter starts from the usage
    already recorded in state, so limits apply to the whole loop, not to one step.

    Args:
        budget: The limits, or None to count only.
        spent_before: Usage recorded in state before this step.
        carried: Usage of earlier failed executions of this step (retries), which
            wrote nothing to state but whose calls were sent.
    """

    raise_error = True  # a refusal must abort the call, not be logged and ignored
    run_inline = True  # count in the caller's thread, in order, even under asyncio

    def __init__(
        self, budget: Budget | None, spent_before: Usage, *, carried: Usage | None = None
    ) -> None:
        carried = carried or Usage()
        self.budget = budget
        self.spent_before = spent_before
        self.calls = carried.calls
        self.input_tokens = carried.input_tokens
        self.output_tokens = carried.output_tokens
        self.total_tokens = carried.total_tokens
        self.started = time.perf_counter() - carried.seconds
        self._counted_runs: set[UUID] = set()

    def delta(self) -> Usage:
        """What this step spent so far."""
        return Usage(
            calls=self.calls,
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            total_tokens=self.total_tokens,
            seconds=time.perf_counter() - self.started,
        )

    def total(self) -> Usage:
        """The loop's usage including this step."""
        return self.spent_before + self.delta()

    def check(self) -> None:
        """Raise `BudgetStop` if any limit is already reached."""
        if self.budget is None:
            return
        reason = self.budget.exceeded(self.total())
        if reason is not None:
            raise BudgetStop(reason)

    def seconds_left(self) -> float | None:
        """Seconds before the time limit, or None without one."""
        return None if self.budget is None else self.budget.seconds_left(self.total())

    def count_call(self, message: Any = None) -> None:
        """Count one model call made outside LangChain's callbacks (a plain callable).

        Args:
            message: The reply; its `usage_metadata` tokens are counted when present.
        """
        self.calls += 1
        self._add_tokens(getattr(message, "usage_metadata", None) or {})

    def _start(self, run_id: UUID) -> None:
        if run_id in self._counted_runs:  # a handler attached twice sees a start twice
            return
        self.check()
        self._counted_runs.add(run_id)
        self.calls += 1

    def _add_tokens(self, metadata: Any) -> None:
        self.input_tokens += int(metadata.get("input_tokens", 0) or 0)
        self.output_tokens += int(metadata.get("output_tokens", 0) or 0)
        self.total_tokens += int(metadata.get("total_tokens", 0) or 0)

    def on_chat_model_start(
        self, serialized: dict[str, Any], messages: Any, *, run_id: UUID, **kwargs: Any
    ) -> None:
        """Refuse the call if a limit is reached; otherwise count it."""
        self._start(run_id)

    def on_llm_start(
        self, serialized: dict[str, Any], prompts: list[str], *, run_id: UUID, **kwargs: Any
    ) -> None:
        """Refuse the call if a limit is reached; otherwise count it."""
        self._start(run_id)

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        """Add the tokens a failed call reports (OpenAI-style `completion.usage`)."""
        self._counted_runs.discard(run_id)
        usage = getattr(getattr(error, "completion", None), "usage", None)
        if usage is not None:
            prompt = int(getattr(usage, "prompt_tokens", 0) or 0)
            completion = int(getattr(usage, "completion_tokens", 0) or 0)
            self._add_tokens(
                {
                    "input_tokens": prompt,
                    "output_tokens": completion,
                    "total_tokens": prompt + completion,
                }
            )

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        """Add the tokens the reply reports (chat usage metadata, else `llm_output`)."""
        if run_id not in self._counted_runs:
            return
        self._counted_runs.discard(run_id)
        seen = False
        for generations in response.generations:
            for generation in generations:
                metadata = getattr(getattr(generation, "message", None), "usage_metadata", None)
                if metadata:
                    self._add_tokens(metadata)
                    seen = True
        if not seen:
            usage = (response.llm_output or {}).get("token_usage") or {}
            self._add_tokens(
                {
                    "input_tokens": usage.get("prompt_tokens", 0),
                    "output_tokens": usage.get("completion_tokens", 0),
                    "total_tokens": usage.get("total_tokens", 0),
                }
            )


@contextlib.contextmanager
def metered(meter: BudgetMeter) -> Iterator[BudgetMeter]:
    """Attach `meter` to the current run's config for the block.

    Model calls made in the block without a config of their own inherit the current
    one (LangChain's context), so the meter sees and checks them. For code that runs
    outside a loop node's `Step`, such as `RefineMiddleware`'s hooks.
    """
    token = var_child_runnable_config.set(merge_configs(ensure_config(), {"callbacks": [meter]}))
    try:
        yield meter
    finally:
        var_child_runnable_config.reset(token)

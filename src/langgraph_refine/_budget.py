"""Budgets: limits on model calls, tokens and seconds, checked before every model call."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from langgraph_refine._state import Usage


@dataclass(frozen=True)
class Budget:
    """Limits on what one loop may spend. `None` means no limit.

    Args:
        max_calls: Model calls (generator invocations and LLM-judge calls).
        max_tokens: Total tokens, from the models' usage metadata.
        max_seconds: Seconds spent generating and evaluating. Time paused in a human
            review or between a crash and its resume does not count.

    Example:
        >>> Budget(max_calls=6, max_tokens=20_000)
        Budget(max_calls=6, max_tokens=20000, max_seconds=None)
    """

    max_calls: int | None = None
    max_tokens: int | None = None
    max_seconds: float | None = None

    def __post_init__(self) -> None:
        for name in ("max_calls", "max_tokens", "max_seconds"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int | float) or value < 0):
                raise ValueError(
                    f"Budget.{name} must be a non-negative number or None, got {value!r}"
                )

    def exceeded(self, usage: Usage) -> str | None:
        """Name the first limit already reached by `usage`, or None if none is."""
        if self.max_calls is not None and usage.calls >= self.max_calls:
            return f"max_calls={self.max_calls} reached ({usage.calls} calls made)"
        if self.max_tokens is not None and usage.total_tokens >= self.max_tokens:
            return f"max_tokens={self.max_tokens} reached ({usage.total_tokens} tokens used)"
        if self.max_seconds is not None and usage.seconds >= self.max_seconds:
            return f"max_seconds={self.max_seconds} reached ({usage.seconds:.2f}s spent)"
        return None


class BudgetStop(Exception):
    """Raised inside a step when the budget forbids the next model call."""


@dataclass
class UsageMeter:
    """Counts model calls and tokens within one step and enforces the budget before each call.

    The meter starts from the usage already recorded in state, so the limit applies to
    the whole loop, not to one step.
    """

    budget: Budget | None
    spent_before: Usage
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    started: float = field(default_factory=time.perf_counter)

    def delta(self) -> Usage:
        """What this step spent so far."""
        return Usage(
            calls=self.calls,
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            total_tokens=self.total_tokens,
            seconds=time.perf_counter() - self.started,
        )

    def before_call(self) -> None:
        """Check the budget; raise `BudgetStop` if any limit is already reached."""
        if self.budget is None:
            return
        reason = self.budget.exceeded(self.spent_before + self.delta())
        if reason is not None:
            raise BudgetStop(reason)

    def allowance(self, wanted: int) -> int:
        """How many of `wanted` calls may be made now (at least 1), checking every limit.

        Raises:
            BudgetStop: If a limit is already reached.
        """
        self.before_call()
        if self.budget is None or self.budget.max_calls is None:
            return wanted
        left = self.budget.max_calls - (self.spent_before.calls + self.calls)
        return max(1, min(wanted, left))

    def record(self, message: Any = None) -> None:
        """Count one model call and the tokens in `message.usage_metadata`, if any."""
        self.calls += 1
        metadata = getattr(message, "usage_metadata", None) or {}
        self.input_tokens += int(metadata.get("input_tokens", 0) or 0)
        self.output_tokens += int(metadata.get("output_tokens", 0) or 0)
        self.total_tokens += int(metadata.get("total_tokens", 0) or 0)


_CURRENT_METER: ContextVar[UsageMeter | None] = ContextVar("langgraph_refine_meter", default=None)


def current_meter() -> UsageMeter | None:
    """The meter of the step running now, for evaluators that call models (LLM judges)."""
    return _CURRENT_METER.get()


@contextlib.contextmanager
def metering(meter: UsageMeter) -> Iterator[UsageMeter]:
    """Make `meter` the current meter for the duration of the block."""
    token = _CURRENT_METER.set(meter)
    try:
        yield meter
    finally:
        _CURRENT_METER.reset(token)

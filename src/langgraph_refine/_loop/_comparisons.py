"""Each comparison of a pairwise selection as a LangGraph task: durable, metered, counted.

A task's result is checkpointed as soon as it finishes, so a run killed during the
selection resumes without repeating the comparisons that completed; only the one that was
cut off runs again. Each comparison runs under a `Step` of its own, started from the usage
so far (the loop's, plus the comparisons before it), so the budget checks and meters every
call. The task returns its verdict with what it spent, and `ComparisonLedger` adds that
up, for comparisons read back from a checkpoint too.

Outside a running graph (a finalize node called directly) the comparisons are plain
metered calls.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

from langgraph.config import get_config
from langgraph.func import task
from langgraph.runtime import get_runtime
from langgraph.types import RetryPolicy

from langgraph_refine._decisions._options import LoopOptions
from langgraph_refine._loop._step import Step
from langgraph_refine._state import Usage


class ComparisonLedger:
    """Runs the comparisons of one selection and adds up what they spent.

    Args:
        options: The run's options (budget, name).
        state: The loop's state (its `usage` so far, its attempts).
        retry_policy: The policy a failed comparison call is retried under.
    """

    def __init__(
        self,
        options: LoopOptions,
        state: Mapping[str, Any],
        retry_policy: RetryPolicy | Sequence[RetryPolicy] | None,
    ) -> None:
        self.options = options
        self.state = state
        self.retry_policy = retry_policy
        self.spent = Usage()
        attempts = state.get("attempts") or []
        self.index = attempts[-1].index if attempts else 0

    def step(self) -> Step:
        """A step for one comparison, metered from the usage so far."""
        usage = (self.state.get("usage") or Usage()) + self.spent
        try:
            config: Any = get_config()
        except RuntimeError:  # outside a graph
            config = None
        return Step(
            self.options,
            {**self.state, "usage": usage},
            config,
            node="finalize",
            index=self.index,
            retry_policy=self.retry_policy,
        )

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """One comparison `fn(*args)` (sync): a durable task inside a graph."""
        if not _in_graph():
            verdict, usage = _compare_now(self, fn, args)
        else:
            verdict, usage = _compare(self, fn, args).result()
        self.spent = self.spent + Usage.model_validate(usage)
        return verdict

    async def acall(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Async twin of `call`."""
        if not _in_graph():
            verdict, usage = await _acompare_now(self, fn, args)
        else:
            verdict, usage = await _acompare(self, fn, args)
        self.spent = self.spent + Usage.model_validate(usage)
        return verdict


def _compare_now(
    ledger: ComparisonLedger, fn: Callable[..., Any], args: tuple[Any, ...]
) -> tuple[Any, dict[str, Any]]:
    step = ledger.step()
    try:
        verdict = step.call(fn, *args)
    except Exception as exc:
        step.on_error(exc, "comparer")
        raise
    return verdict, step.meter.delta().model_dump()


async def _acompare_now(
    ledger: ComparisonLedger, fn: Callable[..., Any], args: tuple[Any, ...]
) -> tuple[Any, dict[str, Any]]:
    step = ledger.step()
    try:
        verdict = await step.acall(fn, *args)
    except Exception as exc:
        step.on_error(exc, "comparer")
        raise
    return verdict, step.meter.delta().model_dump()


# The task's name is what a resumed run matches its checkpointed results by (with the
# call's position in the step), so it stays fixed.
# (`task`'s typing cannot infer its parameters through the `name=` form.)
_compare: Any = task(name="langgraph_refine_compare")(cast(Any, _compare_now))
_acompare: Any = task(name="langgraph_refine_acompare")(cast(Any, _acompare_now))


def _in_graph() -> bool:
    try:
        get_runtime()
    except RuntimeError:
        return False
    return True

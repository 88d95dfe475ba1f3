"""What a finished loop returns, and the best-result rule that picks its value."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from langgraph.types import StateSnapshot
from pydantic import BaseModel, ConfigDict, Field

from langgraph_refine._state import (
    CONVERGED_REASONS,
    Attempt,
    RefineState,
    StopReason,
    Usage,
    Verdict,
    revive_state,
)
from langgraph_refine._stop_rules import stop_reason_of

if TYPE_CHECKING:
    from langgraph_refine._typed import OutputSchema

RESULT_KEYS = ["task", "attempts", "response", "pending", "stop_reason", "usage"]
"""The state keys `RefineResult.from_state` reads. Without a checkpointer there is no
state to read back, so runs ask `invoke`/`stream` for these channels (`output_keys=`)."""


def _rank(attempt: Attempt) -> tuple[bool, float]:
    evaluation = attempt.evaluation
    assert evaluation is not None
    return (evaluation.verdict == "PASS", evaluation.score)


def best_attempt(attempts: Sequence[Attempt]) -> Attempt | None:
    """Pick the best evaluated attempt.

    A `"PASS"` verdict outranks any other; otherwise the higher score wins; ties go to
    the earlier attempt, so a later regression (or an equal score) never replaces the best.

    Args:
        attempts: Attempts in the order they were generated.

    Returns:
        The best evaluated attempt, or None if none has been evaluated.
    """
    best: Attempt | None = None
    for attempt in attempts:
        if attempt.evaluation is None:
            continue
        if best is None or _rank(attempt) > _rank(best):
            best = attempt
    return best


class RefineResult(BaseModel):
    """The outcome of one refinement loop.

    Attributes:
        value: The best response (or the human-approved / edited one).
        score: The best attempt's score (None if nothing was evaluated).
        verdict: The best attempt's verdict, if its evaluator gave one.
        feedback: The best attempt's feedback.
        stop_reason: Why the loop stopped; None for a state that has not stopped (a
            paused review, a custom topology that never decided).
        iterations: Refinement rounds run (number of attempts - 1).
        converged: True when `stop_reason` is passed, target_reached or approved.
        score_history: One score per evaluated attempt, in order.
        attempts: Every attempt, in order.
        usage: Model calls, tokens and seconds spent.
        output: With `output_schema`, the best attempt's object: an instance of the
            pydantic model, or the dict for a JSON schema (None when no attempt was a
            valid object, and without `output_schema`). Read from a state without the
            schema (`from_state(state)`), it is the plain JSON value.
        metadata: `iterations`, `converged`, `score_history`, `stop_reason`, `best_index`
            and `usage` as plain values, for logging and serialisation.
    """

    model_config = ConfigDict(frozen=True)

    value: str
    score: float | None
    verdict: Verdict | None
    feedback: str
    stop_reason: StopReason | None
    iterations: int
    converged: bool
    score_history: list[float]
    attempts: list[Attempt]
    usage: Usage
    metadata: dict[str, Any] = Field(default_factory=dict)
    output: Any = None

    @classmethod
    def from_state(
        cls,
        state: RefineState | dict[str, Any] | StateSnapshot,
        *,
        output_schema: OutputSchema | None = None,
    ) -> RefineResult:
        """Build the result from a loop's state (final or, for budget errors, current).

        Args:
            state: The state's values, or a thread's `StateSnapshot`
                (`graph.get_state(config)`): a snapshot of a paused thread (a pending
                review) gives `stop_reason=None`, since the loop has not stopped yet.
            output_schema: The loop's `output_schema` (as an `OutputSchema`), to give
                `output` as the caller's type; without it `output` is plain JSON.
        """
        paused = False
        if isinstance(state, StateSnapshot):
            paused = bool(state.next)
            state = state.values
        state = revive_state(state)  # type: ignore[assignment]
        attempts = list(state.get("attempts") or [])
        pending = state.get("pending")
        usage = state.get("usage") or Usage()
        if pending is not None and all(a.index != pending.index for a in attempts):
            # Generated but not evaluated: its generation is not in the total yet.
            attempts.append(pending)
            usage = usage + pending.usage
        best = best_attempt(attempts)
        stop_reason = None if paused else stop_reason_of(state)
        value = state.get("response")
        if stop_reason not in ("approved", "edited") or value is None:
            # Every other stop returns the best evaluated attempt (the contract's rule).
            value = (
                best.response if best is not None else (attempts[-1].response if attempts else "")
            )
        output = _output(attempts, best, value, stop_reason, output_schema)
        evaluation = best.evaluation if best is not None else None
        score_history = [a.evaluation.score for a in attempts if a.evaluation is not None]
        iterations = max(len(attempts) - 1, 0)
        converged = stop_reason in CONVERGED_REASONS
        return cls(
            value=value,
            score=evaluation.score if evaluation else None,
            verdict=evaluation.verdict if evaluation else None,
            feedback=evaluation.feedback if evaluation else "",
            stop_reason=stop_reason,
            iterations=iterations,
            converged=converged,
            score_history=score_history,
            attempts=attempts,
            usage=usage,
            output=output_schema.typed(output) if output_schema is not None else output,
            metadata={
                "iterations": iterations,
                "converged": converged,
                "score_history": score_history,
                "stop_reason": stop_reason,
                "best_index": best.index if best is not None else None,
                "usage": usage.model_dump(),
            },
        )


def _output(
    attempts: Sequence[Attempt],
    best: Attempt | None,
    value: str,
    stop_reason: str | None,
    schema: OutputSchema | None,
) -> Any:
    """The plain object of the result's value: the best attempt's, or the reviewed one's."""
    if stop_reason not in ("approved", "edited"):
        return best.output if best is not None else None
    # A reviewer approved an attempt, or wrote the response: the object of that text.
    reviewed = next((a for a in reversed(attempts) if a.response == value), None)
    if reviewed is not None:
        return reviewed.output
    return schema.read(value).output if schema is not None else None

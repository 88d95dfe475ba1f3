"""The loop's state as the decisions around the round read it, whichever driver runs it.

The graph keeps the loop in its own state keys (`attempts`, `refine_from`,
`reviewer_feedback`, ...), the agent in `refine_*` keys beside its conversation. Each
driver hands the decisions one `LoopView` of its state (`graph_view`, or the agent's
`agent_view`), so the next move, a review's meaning and the end are decided once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from langchain_core.messages import AnyMessage, HumanMessage

from langgraph_refine._state import Attempt, MoveKind, StopReason


class LoopView(NamedTuple):
    """What the decisions before and after a round read of a loop's state.

    Attributes:
        task: The request being answered.
        attempts: Every attempt so far, in order.
        parent: The index of the attempt the next answer refines (None: a fresh one),
            as the strategy (or a reviewer) chose it.
        move: The strategy's kind of move for the next answer (`"guided"` matters for a
            fresh one), or None.
        request: A reviewer's request the next answer is to answer (`revise`), or None.
        stop_reason: Why the loop stopped, or None while it goes on.
    """

    task: str
    attempts: tuple[Attempt, ...]
    parent: int | None = None
    move: MoveKind | None = None
    request: str | None = None
    stop_reason: StopReason | None = None

    @property
    def latest(self) -> Attempt | None:
        """The latest attempt, or None before the first."""
        return self.attempts[-1] if self.attempts else None

    def attempt(self, index: int | None) -> Attempt | None:
        """The attempt with this index, or None."""
        if index is None:
            return None
        for attempt in reversed(self.attempts):  # mostly the latest
            if attempt.index == index:
                return attempt
        return None


def request_in(messages: Sequence[AnyMessage]) -> str | None:
    """The task a conversation asks: its last human message's text (None: it has none).

    The graph takes its task from `messages` this way, and the agent every run's.
    """
    for message in reversed(messages):
        if isinstance(message, HumanMessage):
            return message.text
    return None


def graph_view(state: Mapping[str, Any]) -> LoopView:
    """The graph's state (its models revived, see `revive_state`) as a `LoopView`.

    A state without `refine_from` (a custom topology that never chose) refines the latest
    attempt, as classic self-refine does.
    """
    attempts = tuple(state.get("attempts") or ())
    latest = attempts[-1].index if attempts else None
    return LoopView(
        task=state.get("task") or "",
        attempts=attempts,
        parent=state.get("refine_from", latest),
        move=state.get("next_move"),
        request=state.get("reviewer_feedback"),
        stop_reason=state.get("stop_reason") or None,
    )

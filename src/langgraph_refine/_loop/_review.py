"""The review step: pause with `interrupt()` for a human decision, then apply it.

Why a resumed review repeats no model call: the review is a node of its own, after the
evaluate step whose results are already checkpointed. Resuming re-runs only this node
(LangGraph re-executes the interrupted node from its start), which reads the saved
attempts and calls no model.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Literal, cast

from langgraph.config import get_config

from langgraph_refine._decisions._options import HumanReview, OnBudgetExhausted, check_choice
from langgraph_refine._errors import ReviewInputError
from langgraph_refine._events import ReviewPayload
from langgraph_refine._loop._review_schema import ask_review, from_decisions, hitl_request
from langgraph_refine._loop._router import route_after_evaluation
from langgraph_refine._result import best_attempt
from langgraph_refine._state import Attempt, RefineState, revive_state
from langgraph_refine._stop_rules import BUDGET_STOP, review_stop

logger = logging.getLogger("langgraph_refine")


class ReviewNode:
    """Pauses the loop with `interrupt()` for a human decision, then applies it.

    Resume with `Command(resume={"action": ...})`: `approve`, `edit` (with `response`),
    `reject`, `revise` (with `feedback`), or `continue` (every_round only). A malformed
    value leaves the review pending: the loop pauses again with the same payload plus an
    `error` key that says what was wrong.

    The payload is also a LangChain human-in-the-loop request (`action_requests`,
    `review_configs`, as `HumanInTheLoopMiddleware` sends), so chat clients render it,
    and their answer is accepted: `{"decisions": [{"type": "approve"}]}`, an `edit` with
    `edited_action["args"]["response"]`, a `reject` with a `message` (one more round,
    the message as feedback: the loop's `revise`) or without one (the loop's `reject`).

    Args:
        mode: `"final"` (review when the loop would stop) or `"every_round"`.
        on_budget_exhausted: With `"raise"`, a budget stop skips the review.
        name: The loop's name, included in the payload.
    """

    def __init__(
        self,
        mode: HumanReview,
        *,
        on_budget_exhausted: OnBudgetExhausted = "stop",
        name: str = "refine",
    ) -> None:
        self.mode: HumanReview = check_choice("human_review", mode, HumanReview)
        self.on_budget_exhausted = on_budget_exhausted
        self.loop_name = name
        self.actions = ["approve", "edit", "reject", "revise"] + (
            ["continue"] if mode == "every_round" else []
        )

    def payload(self, state: Mapping[str, Any]) -> ReviewPayload:
        """What the reviewer is shown: the best attempt (final) or the latest (every_round)."""
        attempts = list(state.get("attempts") or [])
        best = best_attempt(attempts)
        reviewed = attempts[-1] if self.mode == "every_round" and attempts else best
        evaluation = reviewed.evaluation if reviewed else None
        shown: dict[str, Any] = {
            "type": "review",
            "name": self.loop_name,
            "mode": self.mode,
            "task": state.get("task", ""),
            "response": reviewed.response if reviewed else "",
            "score": evaluation.score if evaluation else None,
            "verdict": evaluation.verdict if evaluation else None,
            "feedback": evaluation.feedback if evaluation else "",
            "iteration": attempts[-1].index if attempts else 0,
            "attempt": reviewed.index if reviewed else None,
            "best_score": best.score if best else None,
            "stop_reason": state.get("stop_reason"),
            "actions": list(self.actions),
        }
        return cast(ReviewPayload, shown | hitl_request(shown))

    def __call__(self, state: RefineState) -> dict[str, Any]:
        if state.get("stop_reason") == BUDGET_STOP and self.on_budget_exhausted == "raise":
            return {}
        if state.get("stop_reason") == "edited":
            return {}  # the reviewer's edit, now evaluated: the loop ends
        # The interrupt declares its answer's schema (LangGraph Studio shows a form); a
        # malformed answer pauses again with an `error` key (see `ask_review`).
        return ask_review(self.payload(revive_state(state)), self.apply, self.actions)

    def apply(self, payload: Mapping[str, Any], value: Any) -> dict[str, Any]:
        """Turn a resume value into a state update.

        Raises:
            ReviewInputError: If the value is not a dict with a known action and the
                fields that action needs.
        """
        value = from_decisions(value)  # a chat client's LangChain decision
        action = value.get("action") if isinstance(value, Mapping) else None
        if action not in self.actions:
            raise ReviewInputError(
                f"review resume value must be a dict with 'action' in {self.actions}, "
                f"got {value!r}; resume again with Command(resume={{'action': ...}})"
            )
        assert isinstance(value, Mapping)
        if action == "continue":
            return {}  # the stop rules' decision stands
        update: dict[str, Any] = {"stop_reason": review_stop(action, payload.get("stop_reason"))}
        if action == "approve":
            update["response"] = payload["response"]
        elif action == "edit":
            # The edited text is an attempt of its own (`move="edit"`), evaluated next
            # (`route_after_review`) so the result's score is that text's; its evaluation
            # ends the loop with `"edited"`. Until then the loop has not stopped.
            text = _required_text(value, "response", action)
            update["stop_reason"] = None
            update["response"] = text
            update["pending"] = edited_attempt(payload, text)
        elif action == "revise":
            update["reviewer_feedback"] = _required_text(value, "feedback", action)
            update["refine_from"] = payload.get("attempt")  # the reviewed attempt
        return update


def require_checkpointer() -> None:
    """Fail before any model call when a run with human review has no checkpointer.

    The review's pause is a saved checkpoint: without a checkpointer LangGraph only
    refuses the answer (`Command(resume=...)`), after the loop's model calls were spent.

    Raises:
        ValueError: If the running graph has no checkpointer (its own or a parent's).
    """
    try:
        from langgraph.constants import CONFIG_KEY_CHECKPOINTER
    except ImportError:  # a LangGraph without the key: the check is skipped
        return
    try:
        configurable = get_config().get("configurable") or {}
    except RuntimeError:  # called outside a graph run
        return
    if configurable.get(CONFIG_KEY_CHECKPOINTER) is None:
        raise ValueError(
            "human_review needs a checkpointer (the review's pause is a saved checkpoint), "
            "and this run has none: compile with one, e.g. "
            "create_refine_graph(..., human_review='final').compile(checkpointer=InMemorySaver()) "
            "(or SqliteSaver / PostgresSaver, or create_agent(..., checkpointer=...)), and run "
            "with a thread_id in config['configurable']"
        )


def edited_attempt(payload: Mapping[str, Any], text: str) -> dict[str, Any]:
    """The attempt a reviewer's `edit` makes, as plain data (it is a state write).

    Args:
        payload: The review's payload (`iteration` is the latest attempt's index,
            `attempt` the reviewed one's).
        text: The reviewer's text.
    """
    attempt = Attempt(
        index=int(payload.get("iteration") or 0) + 1,
        response=text,
        parent=payload.get("attempt"),
        move="edit",
    )
    return attempt.model_dump()


def route_after_review(state: Mapping[str, Any]) -> Literal["refine", "stop", "evaluate"]:
    """Where the loop goes after a review: `"evaluate"` an edit, else as after an evaluation.

    Example:
        >>> route_after_review({"stop_reason": None, "pending": {"index": 3, "move": "edit"}})
        'evaluate'
        >>> route_after_review({"stop_reason": "approved", "pending": None})
        'stop'
    """
    if state.get("pending") is not None:
        return "evaluate"
    return route_after_evaluation(state)


def _required_text(value: Mapping[str, Any], key: str, action: str) -> str:
    text = value.get(key)
    if not isinstance(text, str) or not text.strip():
        raise ReviewInputError(
            f"review action {action!r} needs a non-empty string {key!r}, got {text!r}; "
            "resume again with the field filled in"
        )
    return text

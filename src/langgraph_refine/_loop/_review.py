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
from langgraph_refine._decisions._reviewed import ReviewAnswer, read_answer, review_due, reviewed
from langgraph_refine._events import ReviewPayload
from langgraph_refine._loop._review_schema import (
    ask_review,
    from_decisions,
    from_text,
    hitl_request,
)
from langgraph_refine._loop._router import route_after_evaluation
from langgraph_refine._loop._thread import current_run
from langgraph_refine._records._reviews import record_review
from langgraph_refine._result import best_attempt
from langgraph_refine._state import RefineState, revive_state
from langgraph_refine.evaluators._base import BaseEvaluator, request_criteria
from langgraph_refine.evaluators._identity import judge_identity

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
        records_run: The state has `ended_in` (`ServedKeys`): the run whose answer the
            review applies is written there (the loop's end is decided there again).
        judge: The loop's evaluator, whose identity each recorded review carries (None:
            known only per run).
    """

    def __init__(
        self,
        mode: HumanReview,
        *,
        on_budget_exhausted: OnBudgetExhausted = "stop",
        name: str = "refine",
        records_run: bool = False,
        judge: Any = None,
    ) -> None:
        self.mode: HumanReview = check_choice("human_review", mode, HumanReview)
        self.on_budget_exhausted = on_budget_exhausted
        self.loop_name = name
        self.records_run = records_run
        self.judge = judge
        self.actions = ["approve", "edit", "reject", "revise"] + (
            ["continue"] if mode == "every_round" else []
        )

    def payload(self, state: Mapping[str, Any]) -> ReviewPayload:
        """What the reviewer is shown (see `_reviewed.reviewed`), with the best beside it."""
        attempts = list(state.get("attempts") or [])
        best = best_attempt(attempts)
        shown_attempt = reviewed(attempts, self.mode)
        evaluation = shown_attempt.evaluation if shown_attempt else None
        shown: dict[str, Any] = {
            "type": "review",
            "name": self.loop_name,
            "mode": self.mode,
            "task": state.get("task", ""),
            "response": shown_attempt.response if shown_attempt else "",
            "score": evaluation.score if evaluation else None,
            "verdict": evaluation.verdict if evaluation else None,
            "feedback": evaluation.feedback if evaluation else "",
            "iteration": attempts[-1].index if attempts else 0,
            "attempt": shown_attempt.index if shown_attempt else None,
            "best_attempt": best.index if best else None,
            "best_score": best.score if best else None,
            "stop_reason": state.get("stop_reason"),
            "actions": list(self.actions),
        }
        return cast(ReviewPayload, shown | hitl_request(shown))

    def __call__(self, state: RefineState) -> dict[str, Any]:
        if not review_due(state.get("stop_reason"), self.on_budget_exhausted):
            return {}
        # The interrupt declares its answer's schema (LangGraph Studio shows a form); a
        # malformed answer pauses again with an `error` key (see `ask_review`).
        payload = self.payload(revive_state(state))
        answer = ask_review(payload, self.answer, self.actions)
        # A graph's sync node runs in a worker thread under ainvoke: a sync put is safe.
        record_review(payload, answer.action, judge=self.identity(state))
        update = graph_update(answer)
        return update | {"ended_in": current_run()} if self.records_run else update

    def identity(self, state: Mapping[str, Any], judge: Any = None) -> dict[str, Any] | None:
        """The identity of the judge that scored the attempt shown, for its label.

        Args:
            state: The run's state (its `criteria` are the judge's too).
            judge: The run's judge, when only the run knows it (an agent's own model).
        """
        judge = judge if judge is not None else self.judge
        if not isinstance(judge, BaseEvaluator):
            return None
        return judge_identity(judge, criteria=request_criteria(state))

    def answer(self, payload: Mapping[str, Any], value: Any) -> ReviewAnswer:
        """What a resume value means (a chat client's LangChain decision, or text, too).

        The one place both the graph and the agent read an answer; each then keeps a
        well-formed one in the run's store as a person's verdict on the attempt shown
        (see `_records._reviews`), the labels `evaluators.store_labels` reads.

        Raises:
            ReviewInputError: If the value is not a dict with a known action and the
                fields that action needs.
        """
        value = from_decisions(from_text(value, self.actions))
        return read_answer(payload, value, self.actions)

    def apply(self, payload: Mapping[str, Any], value: Any) -> dict[str, Any]:
        """Turn a resume value into the graph's state update.

        Raises:
            ReviewInputError: If the value is not a dict with a known action and the
                fields that action needs.
        """
        return graph_update(self.answer(payload, value))


def graph_update(answer: ReviewAnswer) -> dict[str, Any]:
    """A review's answer written to the graph's state."""
    if answer.action == "continue":
        return {}  # the stop rules' decision stands
    update: dict[str, Any] = {"stop_reason": answer.stop_reason}
    if answer.response is not None:
        update["response"] = answer.response
    if answer.edit is not None:  # evaluated next (`route_after_review`)
        update["pending"] = answer.edit.model_dump()  # plain data: a state write
    if answer.request is not None:
        update["reviewer_feedback"] = answer.request
        update["refine_from"] = answer.parent
    return update


def has_checkpointer() -> bool:
    """Whether the running graph has a checkpointer (its own or a parent's).

    True outside a graph run, or on a LangGraph that does not say (nothing to refuse).
    """
    try:
        from langgraph.constants import CONFIG_KEY_CHECKPOINTER
    except ImportError:  # a LangGraph without the key: the check is skipped
        return True
    try:
        configurable = get_config().get("configurable") or {}
    except RuntimeError:  # called outside a graph run
        return True
    return configurable.get(CONFIG_KEY_CHECKPOINTER) is not None


def require_checkpointer() -> None:
    """Fail before any model call when a run with human review has no checkpointer.

    The review's pause is a saved checkpoint: without a checkpointer LangGraph only
    refuses the answer (`Command(resume=...)`), after the loop's model calls were spent.

    Raises:
        ValueError: If the running graph has no checkpointer (its own or a parent's).
    """
    if not has_checkpointer():
        raise ValueError(
            "human_review needs a checkpointer (the review's pause is a saved checkpoint), "
            "and this run has none: compile with one, e.g. "
            "create_refine_graph(..., human_review='final').compile(checkpointer=InMemorySaver()) "
            "(or SqliteSaver / PostgresSaver, or create_agent(..., checkpointer=...)), and run "
            "with a thread_id in config['configurable']"
        )


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

"""The loop's two ends: `prepare` (take the task, reset loop state) and `FinalizeNode`."""

from __future__ import annotations

import logging
import uuid
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.types import Overwrite

from langgraph_refine._errors import BudgetExhaustedError
from langgraph_refine._options import LoopOptions
from langgraph_refine._result import RefineResult
from langgraph_refine._review import require_checkpointer
from langgraph_refine._state import RefineState, Usage
from langgraph_refine._step import emit, run_options, stop_event
from langgraph_refine._stop_rules import BUDGET_STOP
from langgraph_refine._typed import plain

logger = logging.getLogger("langgraph_refine")


class Prepare:
    """Starts a loop: checks the run's options, takes the task, resets loop state.

    Args:
        options: The loop's options; a run's `context` is applied and validated here,
            so an invalid per-run option fails before any model call.
        review: True when the loop has a human review, which needs a checkpointer.

    Raises:
        ValueError: If there is no task (empty or whitespace), the run's context
            holds an invalid option, or a reviewed loop runs without a checkpointer.
    """

    def __init__(self, options: LoopOptions, *, review: bool = False) -> None:
        self.options = options
        self.review = review
        self.name = "prepare"

    def __call__(self, state: RefineState) -> dict[str, Any]:
        run_options(self.options)
        if self.review:
            require_checkpointer()
        return prepare(state)


def prepare(state: RefineState) -> dict[str, Any]:
    """Take the task (or the last human message) and reset loop state.

    Raises:
        ValueError: If there is no task, or it is empty or whitespace.
    """
    task = state.get("task")
    messages: list[AnyMessage] = list(state.get("messages") or [])
    from_messages = False
    # A finished loop on the same thread that took its task from messages takes the
    # next one from messages too; otherwise an explicit task wins.
    if (not isinstance(task, str) or not task.strip() or state.get("from_messages")) and messages:
        human = [m for m in messages if isinstance(m, HumanMessage)]
        if human:
            task, from_messages = human[-1].text, True
    if not isinstance(task, str) or not task.strip():
        raise ValueError(
            f"task must be a non-empty string, got {task!r}; pass {{'task': '...'}} "
            "or messages ending with a human message"
        )
    return {
        "task": task,
        "attempts": Overwrite([]),
        "usage": Overwrite(Usage().model_dump()),  # plain data: see `plain_writes`
        "pending": None,
        "stop_reason": None,
        "reviewer_feedback": None,
        "refine_from": None,
        "next_move": None,
        "from_messages": from_messages,
        # A new id per run: the strategy record counts each run's rounds under it.
        "loop_id": uuid.uuid4().hex,
    }


class FinalizeNode:
    """Ends the loop: sets `response`, answers in `messages` when asked there, emits the stop event.

    Args:
        options: The loop's options (`on_budget_exhausted`, `name`).

    Raises:
        BudgetExhaustedError: On a budget stop with `on_budget_exhausted="raise"`.
    """

    def __init__(self, options: LoopOptions) -> None:
        self.options = options
        self.name = "finalize"

    def __call__(self, state: RefineState) -> dict[str, Any]:
        schema = run_options(self.options).output_schema  # a run's context may set it
        result = RefineResult.from_state(state, output_schema=schema)
        name = self.options.name
        if result.stop_reason == BUDGET_STOP and self.options.on_budget_exhausted == "raise":
            raise BudgetExhaustedError(
                f"budget exhausted after {len(result.attempts)} attempt(s); best score "
                f"{result.score}; the best result so far is in this error's .result",
                result,
            )
        update: dict[str, Any] = {"response": result.value, "stop_reason": result.stop_reason}
        if schema is not None:
            update["output"] = plain(result.output)  # plain JSON: checkpoint-safe
        if state.get("from_messages"):
            update["messages"] = [AIMessage(result.value)]
        logger.info(
            "%s stopped: %s after %d attempt(s), best score %s",
            name,
            result.stop_reason,
            len(result.attempts),
            result.score,
        )
        emit(stop_event(name, result))
        return update

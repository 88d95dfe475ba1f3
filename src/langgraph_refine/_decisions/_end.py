"""The loop's end, decided once for the graph and the agent: what is raised, how it chooses.

`end_flow` is the end of every run, driven by the graph's finalize step and by the
agent's model step alike (`_flows.drive`/`adrive`): a budget stop with
`on_budget_exhausted="raise"` raises, with the best result so far (`budget_error`),
before any comparison is paid; whether the end compares attempts at all
(`compares_at_end`); when it would, the choice may still be made by score
(`by_score_note`): the reviewer stopped the loop on the attempt they were shown, or the
budget cannot pay for the comparisons; else it asks its driver for the comparisons
and ends with their record (`end_of_run`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Generator, Mapping
from typing import Any, NamedTuple, Protocol, TypeVar

from langgraph_refine._decisions._options import LoopOptions
from langgraph_refine._errors import BudgetExhaustedError
from langgraph_refine._events import StopEvent, stop_event
from langgraph_refine._result import REVIEWED_REASONS, RefineResult
from langgraph_refine._state import StopReason, Usage
from langgraph_refine._stop_rules import BUDGET_STOP

logger = logging.getLogger("langgraph_refine")

REJECTED_NOTE = (
    "the reviewer rejected further refinement of the attempt they were shown; chosen by "
    "score, not compared"
)
"""`metadata["selection"]["note"]` of a pairwise run stopped by a reviewer's reject."""


def regenerates(ended_by: str | None, run: str | None) -> bool:
    """Whether a run reaching a loop's end that `ended_by` reached first answers again.

    A chat regenerates an answer by running the thread again, without input, from the
    state before the answer first appeared (agent-chat-ui's Refresh: `useStream`'s
    `firstSeenState.parent_checkpoint`); for a loop's answer that state is at the loop's
    end, reached by an earlier run (`ended_by`). Another run there starts the loop
    again on the same request. A resume after a crash has no run id (LangGraph Server's
    retry of a run, from its second attempt, and a script's `invoke(None, config)` give
    none) or is the same run: it ends the loop as it was, paying nothing again.

    Example:
        >>> regenerates("run-1", "run-2"), regenerates("run-1", None), regenerates(None, "r")
        (True, False, False)
    """
    return ended_by is not None and run is not None and run != ended_by


def budget_error(result: RefineResult, on_budget_exhausted: str) -> BudgetExhaustedError | None:
    """The error a budget stop raises under `on_budget_exhausted="raise"`, else None."""
    if result.stop_reason != BUDGET_STOP or on_budget_exhausted != "raise":
        return None
    best = "none scored" if result.score is None else f"best score {result.score:.2f}"
    return BudgetExhaustedError(
        f"budget exhausted after {len(result.attempts)} attempt(s) ({best}); the best "
        "result so far is in this error's .result",
        result,
    )


class Ended(NamedTuple):
    """A finished run: its result, the stop event its driver sends, what the end added.

    Attributes:
        result: The run's result.
        event: The stop event its driver sends.
        selection: The pairwise selection's record, when the end made one (by
            comparisons or by score), else None.
        spent: What the end's comparisons spent (None when it made none).
    """

    result: RefineResult
    event: StopEvent
    selection: dict[str, Any] | None = None
    spent: Usage | None = None


class Comparisons(Protocol):
    """A pairwise selection still to make (`_select.Selection`), as the end reads it."""

    def budget_note(self, calls_left: int | None) -> str | None: ...

    def record(self, *, note: str | None = None) -> dict[str, Any]: ...


S = TypeVar("S", bound=Comparisons)

EndFlow = Generator[S, tuple[dict[str, Any], Usage], Ended]
"""The end's flow: it may yield the comparisons to make, and is sent `(record, spent)`."""


def raise_on_budget_stop(state: Mapping[str, Any], options: LoopOptions) -> None:
    """Raise on a budget stop under `on_budget_exhausted="raise"`, with the best result so far.

    The end's first check (`end_flow`); the agent makes it before handing the end's
    comparisons to its model step, so nothing is paid for a run that raises.

    Raises:
        BudgetExhaustedError: On such a stop.
    """
    if state.get("stop_reason") == BUDGET_STOP and options.on_budget_exhausted == "raise":
        end_of_run(state, options)


def end_flow(
    state: Mapping[str, Any],
    options: LoopOptions,
    selection: S | None,
    calls_left: Callable[[], int | None],
) -> EndFlow[S]:
    """The end of every run, graph or agent: raise, choose by score, or compare, then end.

    Args:
        state: The loop's state in the graph's terms (attempts, stop reason, usage, ...).
        options: The run's options.
        selection: The pairwise selection the end makes (`_select.selection_for`), or
            None: the best-attempt rule chooses.
        calls_left: The model calls the budget has left (None: no call limit), asked
            only when there are comparisons to pay for.

    Raises:
        BudgetExhaustedError: On a budget stop with `on_budget_exhausted="raise"`,
            before any comparison is paid.
    """
    raise_on_budget_stop(state, options)
    if selection is None:
        return end_of_run(state, options)
    note = by_score_note(state.get("stop_reason"), selection.budget_note(calls_left()))
    if note is not None:  # the budget cannot pay for every comparison: by score
        record = selection.record(note=note)
        return end_of_run({**state, "selection": record}, options)._replace(selection=record)
    record, spent = yield selection
    usage = (state.get("usage") or Usage()) + spent
    ended = end_of_run({**state, "selection": record, "usage": usage}, options)
    return ended._replace(selection=record, spent=spent)


def end_of_run(state: Mapping[str, Any], options: LoopOptions) -> Ended:
    """The one end of every run, graph or agent: the loop's final state as its result.

    `state` is the loop's state in the graph's terms (its attempts, stop reason, the
    response a reviewer chose, the selection's record, the usage). The result, its stop
    event and what is raised are decided here only.

    Raises:
        BudgetExhaustedError: On a budget stop with `on_budget_exhausted="raise"` (the
            best result so far in its `.result`).
    """
    result = RefineResult.from_state(dict(state), output_schema=options.output_schema)
    error = budget_error(result, options.on_budget_exhausted)
    if error is not None:
        raise error
    logger.info(
        "%s stopped: %s after %d attempt(s), result attempt %s, score %s",
        options.name,
        result.stop_reason,
        len(result.attempts),
        result.best_index,
        result.score,
    )
    return Ended(result, stop_event(options.name, result))


def compares_at_end(select: str, stop_reason: str | None) -> bool:
    """Whether the end compares attempts (`select="pairwise"`) rather than take the best score.

    Not when a reviewer chose the result (approved or edited).
    """
    return select == "pairwise" and stop_reason not in REVIEWED_REASONS


def by_score_note(stop_reason: StopReason | None, budget_note: str | None) -> str | None:
    """Why a pairwise end chooses by score without comparing, or None: it compares.

    Args:
        stop_reason: Why the loop stopped.
        budget_note: The selection's note when the budget left cannot pay for its
            comparisons (`Selection.budget_note`), else None.
    """
    if stop_reason == "rejected":
        # The reviewer was shown an attempt and stopped the loop on it: a pairwise
        # winner they never saw must not replace it.
        return REJECTED_NOTE
    return budget_note

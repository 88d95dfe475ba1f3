"""The loop's two ends: `prepare` (take the task, reset loop state) and `FinalizeNode`.

Neither needs a step of its own in most runs. The generate step prepares the run it
starts (`Prepare.start`, `starts_run`); a run enters through a `prepare` step only on a
thread holding an unfinished earlier run (`route_start`). The step that decides the
stop ends the run itself (`FinalizeNode.end_in_step`) unless the end compares attempts
(each comparison a durable task), raises a budget error, or restarts for a chat's
Refresh: then the `finalize` step ends it.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY, dataclass
from typing import Any, Literal, cast, get_type_hints

from langchain_core.messages import AIMessage, AnyMessage
from langchain_core.runnables import Runnable, RunnableConfig
from langgraph.types import Command, Overwrite, RetryPolicy

from langgraph_refine._decisions._end import Ended, EndFlow, end_flow, regenerates
from langgraph_refine._decisions._flows import adrive, drive
from langgraph_refine._decisions._options import CONTEXT_KEYS, LoopOptions, criteria_list
from langgraph_refine._decisions._round import with_criteria
from langgraph_refine._decisions._view import request_in
from langgraph_refine._errors import BudgetExhaustedError
from langgraph_refine._loop._comparisons import ComparisonLedger
from langgraph_refine._loop._review import require_checkpointer
from langgraph_refine._loop._select import (
    NO_COMPARER,
    Comparer,
    Selection,
    calls_left,
    selection_for,
)
from langgraph_refine._loop._step import Step, emit, run_options
from langgraph_refine._loop._thread import current_run
from langgraph_refine._state import RefineInput, RefineState, Usage, revive_state
from langgraph_refine._stop_rules import stop_reason_of
from langgraph_refine._typed import plain
from langgraph_refine.evaluators._calibrate import refuse_to_start

logger = logging.getLogger("langgraph_refine")


@dataclass
class Prepare:
    """Starts a loop: checks the run's options, takes the task, resets loop state.

    Attributes:
        options: The loop's options; a run's `context` is applied and validated here,
            so an invalid per-run option fails before any model call.
        review: True when the loop has a human review, which needs a checkpointer.
        can_compare: True when the loop has a comparer for `select="pairwise"`.
        keeps_input_options: True when the state has `input_options` (`ServedKeys`): the
            options the input gave are kept there for the run's later steps.

    Raises:
        ValueError: If there is no task (empty or whitespace), the run's context (or
            its input) holds an invalid option, a run asks for pairwise selection without a
            comparer, or a reviewed loop runs without a checkpointer.
    """

    options: LoopOptions
    _: KW_ONLY
    review: bool = False
    can_compare: bool = True
    keeps_input_options: bool = False
    judge: Any = None
    name: str = "prepare"

    def __call__(self, state: RefineState) -> dict[str, Any]:
        given = input_options(state)
        options = run_options(self.options, {"input_options": given})
        if options.select == "pairwise" and not self.can_compare:
            raise ValueError(NO_COMPARER)
        # A calibration that passes nothing under require_calibration: no call is paid.
        refuse_to_start(
            self.judge,
            require_calibration=options.require_calibration,
            state=with_criteria(state, options),
        )
        if self.review:
            require_checkpointer()
        if not self.keeps_input_options:  # a state without option keys: nothing to keep
            return prepare(state)
        return {**prepare(state), "input_options": given}

    def start(self, state: Mapping[str, Any]) -> tuple[dict[str, Any], Mapping[str, Any]]:
        """Prepare the run a step starts: the update, and the state the step then reads.

        The step that starts a run (the generate step) prepares it itself, so a run
        needs no step of its own for it; an invalid input still fails here, before any
        model call.

        Raises:
            ValueError: As `Prepare` does.
        """
        update = self(cast(RefineState, state))  # a state extending `RefineState`
        # `usage` and `attempts` are written as `Overwrite`s: what they leave is read here.
        return update, {**state, **update, "attempts": [], "usage": Usage()}


def starts_run(state: Mapping[str, Any]) -> bool:
    """Whether a generate step reading `state` starts a run (and so prepares it).

    Within a run, the loop reaches the generate step with the run's `loop_id` set and
    no stop reason (the evaluate or review step going on, or `FinalizeNode.again` having
    prepared the run again). A run starts on a thread without a loop (no `loop_id`) or
    at the end of an earlier run (its stop reason set).

    Example:
        >>> starts_run({"task": "t"}), starts_run({"loop_id": "a", "stop_reason": None})
        (True, False)
    """
    return state.get("loop_id") is None or state.get("stop_reason") is not None


def route_start(state: Mapping[str, Any]) -> Literal["generate", "prepare"]:
    """Where a run enters the loop: the generate step, which prepares the run itself.

    A thread holding an unfinished earlier run (stopped by an error, or left at an
    every-round review) looks like a run in progress to the generate step
    (`starts_run`), so a new run there enters through a `prepare` step of its own.

    Example:
        >>> route_start({"task": "t"}), route_start({"task": "t", "loop_id": "a"})
        ('generate', 'prepare')
    """
    return "generate" if starts_run(state) else "prepare"


INPUT_OPTION_KEYS = CONTEXT_KEYS - get_type_hints(RefineInput).keys()
"""The run-context keys a state may hold as options its input gave (`criteria` has its
own meaning in the input: added to the context's)."""


def input_options(state: Mapping[str, Any]) -> dict[str, Any]:
    """The options the run's input gave: the state's run-context keys that are set.

    A state has them when its schema declares them (the served graphs' does, each kept
    for the step that reads the input only); the library's own state does not.
    """
    return {key: state[key] for key in sorted(INPUT_OPTION_KEYS) if state.get(key) is not None}


def prepare(state: RefineState) -> dict[str, Any]:
    """Take the task (or the last human message) and reset loop state.

    Raises:
        ValueError: If there is no task, or it is empty or whitespace, or the input's
            `criteria` is neither a string nor a list of strings.
    """
    task = state.get("task")
    messages: list[AnyMessage] = list(state.get("messages") or [])
    from_messages = False
    # A finished loop on the same thread that took its task from messages takes the
    # next one from messages too; otherwise an explicit task wins.
    if (not isinstance(task, str) or not task.strip() or state.get("from_messages")) and messages:
        asked = request_in(messages)
        if asked is not None:
            task, from_messages = asked, True
    if not isinstance(task, str) or not task.strip():
        raise ValueError(
            f"task must be a non-empty string, got {task!r}; pass {{'task': '...'}} "
            "or messages ending with a human message"
        )
    criteria_list(state.get("criteria"), option="the input's criteria")  # fails early
    update: dict[str, Any] = {
        "task": task,
        "usage": Overwrite(Usage().model_dump()),  # plain data: see `plain_writes`
        "from_messages": from_messages,
        # A new id per run: the strategy record counts each run's rounds under it.
        "loop_id": uuid.uuid4().hex,
    }
    if state.get("attempts"):  # an earlier run's on this thread
        update["attempts"] = Overwrite([])
    # An earlier run's loop state goes; a key never set costs no write (each is a step's
    # work for LangGraph, and a fresh thread has none of them).
    update |= {key: None for key in _RESET if state.get(key) is not None}
    return update


_RESET = ("pending", "stop_reason", "reviewer_feedback", "refine_from", "next_move", "selection")
"""The loop's per-run keys a new run on the same thread starts without."""


class FinalizeNode(Runnable[Any, Any]):
    """Ends the loop: chooses the result, sets `response` (and `messages`), emits the stop event.

    What it writes completes the state the result is built from (`RefineResult.from_state`):
    the driver builds the same result from the final state.

    With `select="pairwise"` the result is chosen by comparing the best attempts in pairs
    (see `_select`); the comparisons run here, each a durable task under a `Step` of its
    own (see `_comparisons`), so they count against the budget and a resumed run does not
    repeat those that completed; their record is written to `selection`
    (`metadata["selection"]`).

    Args:
        options: The loop's options (`on_budget_exhausted`, `name`, `select`, ...).
        comparer: Who compares attempts with `select="pairwise"` (None: no comparer, and
            then a run asking for pairwise selection is refused at its start).
        retry_policy: The policy a failed comparison call is retried under (inside
            its step, see `Step.call`).
        keeps_result: True when the state has `score` and `verdict` (`ServedKeys`): the
            result's are written there too.
        regenerates: True when the state has `ended_in` (`ServedKeys`): another run
            reaching the end starts the loop again on the same request, as a chat's
            Refresh asks (`_end.regenerates`), instead of ending it.

    Raises:
        BudgetExhaustedError: On a budget stop with `on_budget_exhausted="raise"`.
    """

    def __init__(
        self,
        options: LoopOptions,
        comparer: Comparer | None = None,
        *,
        retry_policy: RetryPolicy | Sequence[RetryPolicy] | None = None,
        keeps_result: bool = False,
        regenerates: bool = False,
    ) -> None:
        self.options, self.comparer, self.retry_policy = options, comparer, retry_policy
        self.keeps_result, self.regenerates = keeps_result, regenerates
        self.name = "finalize"

    def __call__(self, state: Mapping[str, Any]) -> dict[str, Any]:  # the graph's whole state
        update: dict[str, Any] = self.invoke(state)
        return update

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        """Finish the loop (sync), or start it again (`again`)."""
        if (restart := self.again(input)) is not None:
            return restart
        state, options, flow = self._flow(input, config)
        ledger = ComparisonLedger(options, state, self.retry_policy)

        def compare(selection: Selection) -> tuple[dict[str, Any], Usage]:
            return selection.run(ledger.call), ledger.spent

        return self._finish(state, options, drive(flow, compare))

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        """Finish the loop (async): comparisons run concurrently when no budget is set."""
        if (restart := self.again(input)) is not None:
            return restart
        state, options, flow = self._flow(input, config)
        ledger = ComparisonLedger(options, state, self.retry_policy)

        async def compare(selection: Selection) -> tuple[dict[str, Any], Usage]:
            record = await selection.arun(ledger.acall, concurrent=options.budget is None)
            return record, ledger.spent

        return self._finish(state, options, await adrive(flow, compare))

    def end_in_step(
        self, state: Mapping[str, Any], config: RunnableConfig | None
    ) -> dict[str, Any] | None:
        """The update that ends the run in the step that decided its end, or None.

        The same end (`_end.end_flow`) as `invoke`'s, made where the stop was decided:
        a run then takes no step more than the loop's rounds. None when the end needs a
        step of its own: comparisons to pay (each a durable task, after the round is
        checkpointed), a budget error to raise (a resumed run raises it again without
        judging the round again), or `regenerates` (a chat's Refresh reruns that step).

        Args:
            state: The loop's state once the deciding step's update is applied.
            config: The deciding step's config.
        """
        if self.regenerates:
            return None
        state, options, flow = self._flow(state, config)
        try:
            return self._finish(state, options, drive(flow, _needs_step))
        except (_NeedsStep, BudgetExhaustedError):
            return None

    def again(self, state: Any) -> Command[str] | None:
        """With `regenerates`, when another run reaches the end: the loop again, else None.

        The new loop answers the same request from its first attempt (`prepare`'s reset),
        every call paid; the old answer never joins the conversation.
        """
        if not self.regenerates or not regenerates(state.get("ended_in"), current_run()):
            return None
        return Command(update=prepare(state) | {"ended_in": None}, goto="generate")

    def _flow(
        self, input: Any, config: RunnableConfig | None
    ) -> tuple[Mapping[str, Any], LoopOptions, EndFlow[Selection]]:
        """The state, the run's options and the end's flow (`_end.end_flow`)."""
        state = revive_state(input)
        options = run_options(self.options, state)  # a run's context may set the schema, select
        attempts = list(state.get("attempts") or [])
        selection = selection_for(
            options, stop_reason_of(state), state["task"], attempts, self.comparer
        )

        def left() -> int | None:
            step = self._step(state, options, config)
            return calls_left(step.budget, step.meter.total())

        return state, options, end_flow(state, options, selection, left)

    def _step(
        self, state: Mapping[str, Any], options: LoopOptions, config: RunnableConfig | None
    ) -> Step:
        attempts = state.get("attempts") or []
        return Step(
            options,
            state,
            config,
            node="finalize",
            index=attempts[-1].index if attempts else 0,
            retry_policy=self.retry_policy,
        )

    def _finish(
        self, state: Mapping[str, Any], options: LoopOptions, ended: Ended
    ) -> dict[str, Any]:
        """The update that ends the loop, its stop event sent."""
        result = ended.result
        update: dict[str, Any] = {"response": result.value, "stop_reason": result.stop_reason}
        if self.keeps_result:
            update |= {"score": result.score, "verdict": result.verdict}
        if ended.selection is not None:
            update["selection"] = ended.selection
        if ended.spent is not None:
            update["usage"] = ended.spent.model_dump()  # plain data: see `plain_writes`
        if options.output_schema is not None:
            update["output"] = plain(result.output)  # plain JSON: checkpoint-safe
        if state.get("from_messages"):
            update["messages"] = [AIMessage(result.value)]
        emit(ended.event)
        return update


class _NeedsStep(Exception):
    """The end asked for comparisons: it is made in a step of its own."""


def _needs_step(selection: Selection) -> Any:
    raise _NeedsStep

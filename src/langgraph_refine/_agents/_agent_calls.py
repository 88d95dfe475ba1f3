"""The calls `RefineMiddleware` makes for the loop, each through the loop's one executor.

The decisions are the graph's (`_round.evaluate_round`, `_decisions`); this carries out
their calls inside the agent exactly as the graph's steps do, under a `Step`: the agent's
model call while the loop runs, the judgments (`_judging.RoundCalls`, the graph's own)
and the end's comparisons (`_comparisons.ComparisonLedger`, durable tasks). So every
call is metered and checked against the budget, retried under the retry policy
(`Retry-After` honoured), cut off at the time budget's deadline, and an error leaving
it carries the best result so far (`.result`). Who judges and compares is resolved for
each model call (`judges_for`): the middleware's own evaluator and comparer, else the
model of the agent being run, which only the model step sees. Nothing resolved is kept
on the middleware, so one instance shared by two agents judges each with its own model.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, NamedTuple, TypeVar

from langchain_core.language_models import BaseChatModel
from langgraph.config import get_config
from langgraph.runtime import Runtime
from langgraph.store.base import BaseStore

from langgraph_refine._agents._agent_loop import LOOP_NAME, AgentLoop, loop_view
from langgraph_refine._agents._transcript import judged_state
from langgraph_refine._calls._budget import BudgetMeter
from langgraph_refine._decisions._flows import adrive, drive
from langgraph_refine._decisions._options import LoopOptions
from langgraph_refine._decisions._round import Exchange, Flow, evaluate_round, with_criteria
from langgraph_refine._loop._comparisons import ComparisonLedger
from langgraph_refine._loop._judging import RoundCalls
from langgraph_refine._loop._select import Comparer, Selection, as_comparer
from langgraph_refine._loop._step import Step
from langgraph_refine._records._record import RecordUpdate, record_store
from langgraph_refine._state import Attempt
from langgraph_refine.evaluators import llm_judge
from langgraph_refine.evaluators._base import BaseEvaluator

R = TypeVar("R")


class Judges(NamedTuple):
    """Who judges and compares in this run."""

    evaluator: BaseEvaluator
    comparer: Comparer


class Judging(NamedTuple):
    """A round for the model step's driver to carry out: its flow and who answers its calls."""

    calls: AgentCalls
    flow: Flow


class Comparing(NamedTuple):
    """The end's comparisons for the model step's driver to make, each a durable task."""

    selection: Selection
    ledger: ComparisonLedger


def judges_for(loop: AgentLoop, model: BaseChatModel) -> Judges:
    """The run's judges: the middleware's own, else an LLM judge on the agent's `model`."""
    evaluator = loop.evaluator if loop.evaluator is not None else llm_judge(model)
    comparer = loop.comparer if loop.comparer is not None else as_comparer(model)
    return Judges(evaluator, comparer)


def agent_step(
    options: LoopOptions,
    state: Mapping[str, Any],
    *,
    node: str,
    index: int,
    pending: Attempt | None = None,
    reserved_calls: int = 0,
) -> Step:
    """The executor of one of the loop's calls in the agent, as a graph node's `Step`.

    Its meter starts from what the loop spent so far (`refine_usage`); the result an
    error carries is built from the agent's attempts (and `pending`, the answer being
    judged). The config is the agent's model node's, so an enclosing loop's meter (a
    nested loop) is this one's parent, and the node's stream handlers see the call.
    """
    view = loop_view(state)
    if pending is not None:
        view["pending"] = pending
    try:
        config: Any = get_config()
    except RuntimeError:  # a hook called outside a graph run
        config = None
    return Step(
        options,
        view,
        config,
        node=node,
        index=index,
        retry_policy=options.retry_policy,
        reserved_calls=reserved_calls,
    )


def comparing(options: LoopOptions, view: dict[str, Any], selection: Selection) -> Comparing:
    """The end's comparisons, each a durable task under a step of its own (as the graph's)."""
    return Comparing(selection, ComparisonLedger(options, view, options.retry_policy))


def carry_out(ask: Judging | Comparing) -> Any:
    """Carry out what the model step's judging asks (sync): a round, or the comparisons."""
    if isinstance(ask, Judging):
        return drive(ask.flow, ask.calls.answer)
    return ask.selection.run(ask.ledger.call)


async def acarry_out(options: LoopOptions, ask: Judging | Comparing) -> Any:
    """Async twin of `carry_out`: comparisons run concurrently unless a budget is set."""
    if isinstance(ask, Judging):
        return await adrive(ask.flow, ask.calls.aanswer)
    return await ask.selection.arun(ask.ledger.acall, concurrent=options.budget is None)


class FailedReply(Exception):
    """A failed model call a middleware turned into a reply; the provider's error is its cause.

    Retried as that error would be (the transient rule reads the cause); when it still
    fails, the loop ends with its best answer (`model_error`): the middleware asked for
    failures to go on as replies, and the reply is never an attempt.
    """


def asked(handler: Callable[[Any], R], request: Any, meter: BudgetMeter) -> R:
    """The agent's model call: `handler(request)`, a failure hidden in a reply raised.

    A middleware between the loop and the model may turn a failed call into a reply
    (`ModelRetryMiddleware(on_failure="continue")` answers with the error's text). The
    meter saw the call fail and no call succeed after it: the failure is raised here
    (`FailedReply`, from the provider's error), so it is retried and counted like any
    failed call, and is never an attempt. A fallback model's answer after a failure is a
    reply like any other.
    """
    meter.failure = None
    reply = handler(request)
    if meter.failure is not None:
        raise FailedReply(str(meter.failure)) from meter.failure
    return reply


async def aasked(handler: Callable[[Any], Awaitable[R]], request: Any, meter: BudgetMeter) -> R:
    """Async twin of `asked`."""
    meter.failure = None
    reply = await handler(request)
    if meter.failure is not None:
        raise FailedReply(str(meter.failure)) from meter.failure
    return reply


class AgentCalls(RoundCalls):
    """A round's calls inside the agent: the graph's (`RoundCalls`), the record in its store.

    Args:
        loop: What the middleware's hooks write.
        state: The agent's state.
        view: The loop's state in the graph's terms (`loop_view`).
        step: The executor of the round's calls.
        runtime: The agent's runtime (its store keeps the strategy record).
        evaluator: The run's judge.
    """

    def __init__(
        self,
        loop: AgentLoop,
        state: Mapping[str, Any],
        view: dict[str, Any],
        step: Step,
        runtime: Runtime[Any] | None,
        evaluator: BaseEvaluator,
    ) -> None:
        self.loop, self.agent_state = loop, state
        self.view = dict(with_criteria(view, loop.options))
        self.store = record_store(loop.options.strategy, getattr(runtime, "store", None))
        # The evaluator's state: the evidence (tool results) too.
        super().__init__(step, judged_state(state, self.view), evaluator, LOOP_NAME)

    def flow(self, pending: Attempt) -> Flow:
        """The round of `pending` (the graph's)."""
        return evaluate_round(self.view, pending, self.loop.options, self.loop.ladder)

    def record(self, request: Exchange) -> tuple[BaseStore, RecordUpdate] | None:
        """The agent's store and this round's record update, when the loop keeps a record."""
        if self.store is None:
            return None
        key = self.loop.record_key(self.agent_state, self.evaluator)
        if key is None:
            return None
        return self.store, RecordUpdate(
            key, request.loop_id, request.attempts, self.loop.options.target_score
        )

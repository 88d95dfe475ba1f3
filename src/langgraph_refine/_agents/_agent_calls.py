"""The calls `RefineMiddleware` makes for the loop: judgments, comparisons, the record.

The decisions are the graph's (`_round.evaluate_round`, `_decisions`); this carries out
their calls inside the agent, each under the loop's meter (a call the budget refuses is
not made). Who judges and compares is resolved for each model call (`judges_for`): the
middleware's own evaluator and comparer, else the model of the agent being run, which
only the model step sees. Nothing resolved is kept on the middleware, so one instance
shared by two agents judges each with its own model.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from contextlib import suppress
from typing import Any, NamedTuple

from langchain_core.language_models import BaseChatModel
from langgraph.runtime import Runtime
from langgraph.store.base import BaseStore

from langgraph_refine._agents._agent_loop import LOOP_NAME, AgentLoop
from langgraph_refine._agents._transcript import judged_state
from langgraph_refine._calls._budget import BudgetMeter, BudgetStop, metered
from langgraph_refine._decisions._round import (
    Confirm,
    Exchange,
    Flow,
    Outcome,
    Request,
    evaluate_round,
    report,
    with_criteria,
)
from langgraph_refine._loop._select import Comparer, as_comparer
from langgraph_refine._loop._step import emit
from langgraph_refine._records._record import RecordUpdate, aexchange, exchange, record_store
from langgraph_refine._state import Attempt, Judgment
from langgraph_refine.evaluators import llm_judge
from langgraph_refine.evaluators._base import BaseEvaluator, ajudge_once, judge_once


class Judges(NamedTuple):
    """Who judges and compares in this run."""

    evaluator: BaseEvaluator
    comparer: Comparer


class Judging(NamedTuple):
    """A round for the model step's driver to carry out: its flow and who answers its calls."""

    calls: AgentCalls
    flow: Flow


def judges_for(loop: AgentLoop, model: BaseChatModel) -> Judges:
    """The run's judges: the middleware's own, else an LLM judge on the agent's `model`."""
    evaluator = loop.evaluator if loop.evaluator is not None else llm_judge(model)
    comparer = loop.comparer if loop.comparer is not None else as_comparer(model)
    return Judges(evaluator, comparer)


def metered_call(meter: BudgetMeter) -> Callable[..., Any]:
    """`call(fn, *args)` under the loop's meter: a comparison counted, refused past the budget."""

    def call(fn: Callable[..., Any], *args: Any) -> Any:
        with metered(meter):
            return fn(*args)

    return call


def ametered_call(meter: BudgetMeter) -> Callable[..., Awaitable[Any]]:
    """Async twin of `metered_call`."""

    async def call(fn: Callable[..., Awaitable[Any]], *args: Any) -> Any:
        with metered(meter):
            return await fn(*args)

    return call


class AgentCalls:
    """A hook's answers to the round's requests (see `_round.evaluate_round`).

    Carries out the round's calls inside the agent: the evaluator's judgments under the
    loop's meter (a judgment the budget refuses is not made), the meter's reading, and
    the strategy record in the agent's store.
    """

    def __init__(
        self,
        loop: AgentLoop,
        state: Mapping[str, Any],
        view: dict[str, Any],
        meter: BudgetMeter,
        runtime: Runtime[Any] | None,
        evaluator: BaseEvaluator,
    ) -> None:
        self.loop, self.state, self.meter = loop, state, meter
        self.view = dict(with_criteria(view, loop.options))
        self.judged = judged_state(state, self.view)  # the evaluator's state: the evidence too
        self.evaluator = evaluator
        self.store = record_store(loop.options.strategy, getattr(runtime, "store", None))

    def flow(self, pending: Attempt) -> Flow:
        return evaluate_round(self.view, pending, self.loop.options, self.loop.ladder)

    def sent(self, outcome: Outcome) -> Outcome:
        """The outcome, its round events sent to the custom stream."""
        for event in report(LOOP_NAME, outcome):
            emit(event)
        return outcome

    def _update(self, request: Exchange) -> tuple[BaseStore, RecordUpdate] | None:
        """The agent's store and this round's record update, when the loop keeps a record."""
        if self.store is None:
            return None
        key = self.loop.record_key(self.state, self.evaluator)
        if key is None:
            return None
        return self.store, RecordUpdate(key, request.loop_id, request.attempts)

    def answer(self, request: Request) -> Any:
        if isinstance(request, Exchange):
            found = self._update(request)
            return exchange(*found) if found is not None else None
        responses = (request.response,) if isinstance(request, Confirm) else request.responses
        made: list[Judgment] = []
        with metered(self.meter), suppress(BudgetStop):  # a refused judgment is not made
            for response in responses:
                made.append(judge_once(self.evaluator, response, self.judged))
        return self._answered(request, made)

    async def aanswer(self, request: Request) -> Any:
        if isinstance(request, Exchange):
            found = self._update(request)
            return await aexchange(*found) if found is not None else None
        responses = (request.response,) if isinstance(request, Confirm) else request.responses
        made: list[Judgment] = []
        with metered(self.meter), suppress(BudgetStop):
            for response in responses:
                made.append(await ajudge_once(self.evaluator, response, self.judged))
        return self._answered(request, made)

    def _answered(self, request: Request, made: list[Judgment]) -> Any:
        """The reply a judging request expects: one judgment (or None) for `Confirm`."""
        if isinstance(request, Confirm):
            return (made[0] if made else None), self.meter.delta()
        return made, self.meter.delta()

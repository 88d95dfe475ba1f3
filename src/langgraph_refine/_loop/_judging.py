"""A round's calls, carried out under a `Step`: the judgments and the strategy record.

The round's decisions are in its flow (`_round.evaluate_round`); this answers the flow's
requests, on the graph's evaluate step and in the agent's model step alike. Every
judgment goes through the step (`Step.call`): metered and checked against the budget,
retried under the retry policy, cut off at the time budget's deadline. A judgment that
could not be made (an evaluator's `Unjudged`, a judge model's transient failure after
its retries) is a `NoJudgment`; any other error leaves the step noted and carrying the
best result so far (`Step.on_error`). Each response's judgment sends at most the retry
policy's tries in all (`judgment_tries`): its transport retries, the judge's own re-asks
and the round's re-judgments share them, so retries never multiply.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Generator, Iterator, Mapping
from typing import Any, NamedTuple

from langchain_core.runnables import Runnable, RunnableLambda

from langgraph_refine._calls._budget import BudgetStop, judgment_tries
from langgraph_refine._calls._retry import policy_tries
from langgraph_refine._decisions._flows import adrive, drive
from langgraph_refine._decisions._round import (
    Confirm,
    Exchange,
    Flow,
    Outcome,
    Request,
    report,
)
from langgraph_refine._errors import Unjudged
from langgraph_refine._loop._step import Step, emit
from langgraph_refine._records._record import RecordUpdate, aexchange, exchange
from langgraph_refine._state import Evaluation, Judgment, NoJudgment
from langgraph_refine.evaluators._base import BaseEvaluator, unjudged_reason

logger = logging.getLogger("langgraph_refine")


def traced_evaluation(
    state: Mapping[str, Any], step: Step, evaluator: BaseEvaluator
) -> Runnable[str, Evaluation] | None:
    """The evaluation as a child run `<loop>:evaluate`, when a callback handler listens.

    Handlers (LangSmith, ...) then see one run per evaluation with the iteration and best
    score in its metadata and the `Evaluation` as output; a judge's model call nests
    under it. Without listeners the evaluator is called directly (cheaper).
    """
    if not step.listened:
        return None

    async def aevaluate(response: str) -> Evaluation:
        return await evaluator.aevaluate(response, state)

    return RunnableLambda(lambda response: evaluator.evaluate(response, state), aevaluate)


class _Call(NamedTuple):
    """A judge's call: its sync and async forms and their arguments."""

    sync: Callable[..., Any]
    async_: Callable[..., Any]
    args: tuple[Any, ...]


class RoundCalls:
    """The answers to one round's requests, every call under `step`.

    A driver's subclass says where the strategy record lives (`record`).

    Args:
        step: The step the round's calls run under (meter, retries, deadline).
        state: The state the evaluator reads (the request's criteria applied).
        evaluator: Who judges.
        name: The loop's name, in the round's stream events.
    """

    def __init__(
        self, step: Step, state: Mapping[str, Any], evaluator: BaseEvaluator, name: str
    ) -> None:
        # No bound method is kept on the instance: a reference cycle would leave every
        # round's objects to the cyclic garbage collector (measured: 5% of a run).
        self.step, self.state, self.evaluator, self.name = step, state, evaluator, name
        self.traced = traced_evaluation(state, step, evaluator)
        # A judge's invocation is a model call, counted even if no callback sees one.
        self.judge = evaluator.calls_model
        # Each response's judgment may send the retry policy's tries, all causes together.
        self.tries = policy_tries(step.retry_policy)
        self._left: dict[str, int] = {}
        self._unmade: dict[str, NoJudgment] = {}

    def record(self, request: Exchange) -> tuple[Any, RecordUpdate] | None:
        """The store and this round's record update, when the run keeps a record."""
        return None

    def run_round(self, flow: Flow) -> Outcome:
        """The round `flow`, its requests answered (sync); an error leaving it carries `.result`.

        Raises:
            Unjudged: With `on_evaluator_error="raise"`, carrying the best result so far.
        """
        try:
            return drive(flow, self.answer)
        except Unjudged as exc:  # the paid work goes with the error
            self.step.on_error(exc, "evaluator")
            raise

    async def arun_round(self, flow: Flow) -> Outcome:
        """Async twin of `run_round`."""
        try:
            return await adrive(flow, self.aanswer)
        except Unjudged as exc:
            self.step.on_error(exc, "evaluator")
            raise

    def sent(self, outcome: Outcome) -> Outcome:
        """The round's outcome, its events sent to the custom stream."""
        for event in report(self.name, outcome):
            emit(event)
        return outcome

    # -- sync ------------------------------------------------------------------------------

    def answer(self, request: Request) -> Any:
        """The reply the round's `request` expects (sync)."""
        if isinstance(request, Exchange):
            found = self.record(request)
            return exchange(*found) if found else None
        if isinstance(request, Confirm):
            return self._judge(request.response), self.step.meter.delta()
        made: list[Judgment] = []
        for response in request.responses:
            evaluation = self._judge(response)
            if evaluation is None:  # the budget ran out
                break
            made.append(evaluation)
        return made, self.step.meter.delta()

    def _judge(self, response: str) -> Judgment | None:
        """One judgment (or why none was made), or None when the budget refuses it (sync)."""
        return drive(self._judgment(response), self._call)

    def _call(self, call: _Call) -> Any:
        return self.step.call(call.sync, *call.args, model_call=self.judge)

    def _judgment(self, response: str) -> Generator[_Call, Any, Judgment | None]:
        """One judgment as a flow: it yields the judge's call, whichever driver makes it."""
        spent = self._spent(response)
        if spent is not None:
            return spent
        with self._tries(response):
            try:
                judged: Judgment = yield self._judge_call(response)
                return judged
            except BudgetStop:
                return None
            except Exception as exc:
                return self._unjudged(response, exc)

    def _judge_call(self, response: str) -> _Call:
        """The judge's call for `response`: the evaluator's, or its traced runnable's."""
        if self.traced is None:
            evaluator = self.evaluator
            return _Call(evaluator.evaluate, evaluator.aevaluate, (response, self.state))
        return _Call(self.traced.invoke, self.traced.ainvoke, (response, self.step.config))

    def _spent(self, response: str) -> NoJudgment | None:
        """Why `response` stays unjudged when its judgment has no try left, else None."""
        if not self.judge or self._left.get(response, self.tries) > 0:
            return None
        return self._unmade.get(response) or NoJudgment("the judge's tries are spent", None)

    @contextlib.contextmanager
    def _tries(self, response: str) -> Iterator[None]:
        """The judgment's requests counted against its tries (a judge's only)."""
        if not self.judge:
            yield
            return
        with judgment_tries(self._left.get(response, self.tries)) as left:
            try:
                yield
            finally:
                self._left[response] = left[0]

    def _unjudged(self, response: str, exc: Exception) -> NoJudgment:
        """A judgment that could not be made; any other error leaves the step, with context."""
        reason = unjudged_reason(exc, self.evaluator)
        if reason is None:
            self.step.on_error(exc, "evaluator")
            raise exc
        logger.info("attempt %d left unjudged: %s", self.step.index, reason)
        self._unmade[response] = NoJudgment(reason, exc)
        return self._unmade[response]

    # -- async -----------------------------------------------------------------------------

    async def aanswer(self, request: Request) -> Any:
        """The reply the round's `request` expects (async)."""
        if isinstance(request, Exchange):
            found = self.record(request)
            return await aexchange(*found) if found else None
        if isinstance(request, Confirm):
            return await self._ajudge(request.response), self.step.meter.delta()
        if len(request.responses) > 1 and self.step.budget is None:
            # Candidates are judged concurrently unless a budget must be checked between
            # the judge calls (without one, none is refused).
            judged = await asyncio.gather(*(self._ajudge(r) for r in request.responses))
            return [e for e in judged if e is not None], self.step.meter.delta()
        made: list[Judgment] = []
        for response in request.responses:
            evaluation = await self._ajudge(response)
            if evaluation is None:  # the budget ran out
                break
            made.append(evaluation)
        return made, self.step.meter.delta()

    async def _ajudge(self, response: str) -> Judgment | None:
        """Async twin of `_judge`."""
        return await adrive(self._judgment(response), self._acall)

    async def _acall(self, call: _Call) -> Any:
        return await self.step.acall(call.async_, *call.args, model_call=self.judge)

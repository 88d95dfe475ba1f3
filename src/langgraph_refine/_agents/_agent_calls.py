"""The calls `RefineMiddleware` makes for the loop, each through the loop's one executor.

The decisions are the graph's (`_round.evaluate_round`, `_decisions`); this carries out
their calls inside the agent exactly as the graph's steps do, under a `Step`: the agent's
model call while the loop runs (`Draft`), the judgments (`Round`: `_judging.RoundCalls`,
the graph's own) and the end's comparisons (`Compare`: `_comparisons.ComparisonLedger`,
durable tasks), done by `fulfil`/`afulfil` for the model step's one flow. So every call
is metered and checked against the budget, retried under the retry policy (`Retry-After`
honoured), cut off at the time budget's deadline, and an error leaving it carries the
best result so far (`.result`). A judging step (`judge_step`) judges the answer the
model gave, or makes the end the loop handed it. Who judges and compares is resolved for
each step (`judge_for`, `comparer_for`): the middleware's own evaluator and comparer,
else the model of the agent being run, which only the model step sees. Nothing resolved
is kept on the middleware, so one instance shared by two agents judges each with its own
model.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, NamedTuple, TypeVar

from langchain.agents.middleware import ExtendedModelResponse, ModelRequest
from langchain_core.language_models import BaseChatModel
from langgraph.config import get_config
from langgraph.runtime import Runtime
from langgraph.store.base import BaseStore

from langgraph_refine._agents._agent_loop import (
    LOOP_NAME,
    AgentLoop,
    judged,
    regenerating,
    restarted,
)
from langgraph_refine._agents._agent_state import (
    Comparing,
    JudgingAnswer,
    JudgingEdit,
    LoopState,
    attempts_of,
    loop_state,
    loop_view,
)
from langgraph_refine._agents._evidence import judged_state
from langgraph_refine._agents._progress import Card
from langgraph_refine._calls._budget import BudgetMeter
from langgraph_refine._decisions._end import end_flow
from langgraph_refine._decisions._flows import CallFlow
from langgraph_refine._decisions._options import LoopOptions
from langgraph_refine._decisions._round import (
    Exchange,
    Flow,
    Outcome,
    evaluate_round,
    with_criteria,
)
from langgraph_refine._events import StopEvent
from langgraph_refine._loop._comparisons import ComparisonLedger
from langgraph_refine._loop._judging import RoundCalls
from langgraph_refine._loop._select import (
    Comparer,
    Selection,
    as_comparer,
    calls_left,
    selection_for,
)
from langgraph_refine._loop._step import Step
from langgraph_refine._loop._thread import run_of
from langgraph_refine._records._record import RecordUpdate, record_store
from langgraph_refine._state import Attempt, Usage
from langgraph_refine.evaluators import llm_judge
from langgraph_refine.evaluators._base import BaseEvaluator

R = TypeVar("R")


class Round(NamedTuple):
    """A round for the model step's driver to carry out: its flow and who answers its calls."""

    calls: AgentCalls
    flow: Flow


class Compare(NamedTuple):
    """The end's comparisons for the model step's driver to make, each a durable task.

    The end's flow (`_end.end_flow`) reads it as the selection it makes.
    """

    selection: Selection
    ledger: ComparisonLedger

    def budget_note(self, calls_left: int | None) -> str | None:
        """The selection's (`Selection.budget_note`)."""
        return self.selection.budget_note(calls_left)

    def record(self, *, note: str | None = None) -> dict[str, Any]:
        """The selection's (`Selection.record`)."""
        return self.selection.record(note=note)


def judge_for(loop: AgentLoop, model: BaseChatModel) -> BaseEvaluator:
    """The run's judge: the middleware's own, else an LLM judge on the agent's `model`."""
    return loop.evaluator if loop.evaluator is not None else llm_judge(model)


def comparer_for(loop: AgentLoop, model: BaseChatModel) -> Comparer:
    """The run's comparer: the middleware's own, else the agent's `model`."""
    return loop.comparer if loop.comparer is not None else as_comparer(model)


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

    Its meter starts from what the loop spent so far (the record's usage); the result an
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


def compare(
    options: LoopOptions, view: dict[str, Any], selection: Selection | None
) -> Compare | None:
    """The end's comparisons, each a durable task under a step of its own (as the graph's)."""
    if selection is None:
        return None
    return Compare(selection, ComparisonLedger(options, view, options.retry_policy))


class Draft(NamedTuple):
    """The agent's model call for the next answer, under its step (`draft_step`)."""

    step: Step
    handler: Callable[[Any], Any]
    request: ModelRequest[Any]


def fulfil(ask: Draft | Round | Compare) -> Any:
    """Do what the model step's flow asks (sync): the model call, a round, or comparisons."""
    if isinstance(ask, Draft):
        return ask.step.run(asked, ask.handler, ask.request, ask.step.meter, what="generator")
    if isinstance(ask, Round):
        return ask.calls.run_round(ask.flow)
    return ask.selection.run(ask.ledger.call), ask.ledger.spent


async def afulfil(options: LoopOptions, ask: Draft | Round | Compare) -> Any:
    """Async twin of `fulfil`: comparisons run concurrently unless a budget is set."""
    if isinstance(ask, Draft):
        meter = ask.step.meter
        return await ask.step.arun(aasked, ask.handler, ask.request, meter, what="generator")
    if isinstance(ask, Round):
        return await ask.calls.arun_round(ask.flow)
    concurrent = options.budget is None
    return await ask.selection.arun(ask.ledger.acall, concurrent=concurrent), ask.ledger.spent


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
        self.loop, self.loop_record = loop, loop_state(state)
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
        key = self.loop.record_key(self.loop_record, self.evaluator)
        if key is None:
            return None
        return self.store, RecordUpdate(
            key, request.loop_id, request.attempts, self.loop.options.target_score
        )


def agent_calls(
    loop: AgentLoop, request: ModelRequest[Any], view: dict[str, Any], pending: Attempt
) -> AgentCalls:
    """The calls of the round judging `pending` (an answer or a reviewer's edit).

    The judge is the run's (`judge_for`): nothing resolved is kept.
    """
    state = request.state
    step = agent_step(loop.options, state, node="evaluate", index=pending.index, pending=pending)
    return AgentCalls(loop, state, view, step, request.runtime, judge_for(loop, request.model))


def judged_round(calls: AgentCalls, pending: Attempt) -> CallFlow[Round, Outcome]:
    """The round of `pending`, carried out by its driver (`run_round`); its events sent."""
    return calls.sent((yield Round(calls, calls.flow(pending))))


def draft_step(loop: AgentLoop, request: ModelRequest[Any]) -> Step:
    """The executor of the agent's model call: a generate step for the next attempt.

    The calls judging its answer stay payable: the call is refused when the budget could
    not also pay the judgment of what it answers. Its tokens reach a chat as the graph's
    generate step's do (`Step`: tagged with the attempt, or kept out, by `stream_drafts`).
    """
    state = request.state
    index = len(attempts_of(state))
    return agent_step(
        loop.options, state, node="generate", index=index, reserved_calls=loop.judge_calls
    )


class Unsaved:
    """What model steps spent that no state update may carry, by the message they answered.

    A model step whose call failed leaves with its error; a middleware around it that
    turns the failure into a reply (`ModelRetryMiddleware(on_failure="continue")`) ends
    the step without the loop's update, so what the failed calls spent would be lost.
    `after_model` takes it back (`take`) for the loop's end. Keyed by the id of the
    conversation's last message the step answered; at most `size` are kept.
    """

    def __init__(self, size: int = 1024) -> None:
        self._size = size
        self._spent: dict[str, Usage] = {}

    def keep(self, request: ModelRequest[Any], spent: Usage) -> None:
        """Keep what the step of `request` spent, its loop's total."""
        messages = request.state.get("messages") or []
        if messages and messages[-1].id:
            self._spent[messages[-1].id] = spent
            while len(self._spent) > self._size:
                self._spent.pop(next(iter(self._spent)))

    def take(self, state: Mapping[str, Any]) -> Usage | None:
        """What the model step before `state` spent, if it was kept (then forgotten)."""
        found = None
        for message in (state.get("messages") or [])[-2:]:
            found = self._spent.pop(message.id, None) or found
        return found


StepDone = tuple[ExtendedModelResponse[Any], Card | None, StopEvent | None]
"""A judging step's reply, the progress card it shows and the stop event it sends."""


def judge_step(loop: AgentLoop, request: ModelRequest[Any]) -> CallFlow[Round | Compare, StepDone]:
    """A model step without a model call, as a flow written once for sync and async.

    It judges the answer the last model step gave (its round), a reviewer's edit, or
    makes the end's comparisons: it yields the round to carry out (`Round`) or the
    comparisons (`Compare`), and is sent what they gave.
    """
    state = request.state
    if regenerating(state, run_of(request.runtime)):  # an answer a model step wrote, refreshed
        update, card = restarted(state, loop.progress)
        return judged(update), card, None
    record = loop_state(state)
    if isinstance(record.job, JudgingAnswer):
        return (yield from judge_answer(loop, request, record, record.job))
    return (yield from judge_end(loop, request, record))


def judge_answer(
    loop: AgentLoop, request: ModelRequest[Any], record: LoopState, job: JudgingAnswer
) -> CallFlow[Round, StepDone]:
    """The round of the answer the last model step gave: the loop goes on, or stops."""
    state = request.state
    turn = loop.answer(job)
    pending = loop.pending(state, record, turn)
    calls = agent_calls(loop, request, loop_view(state, record), pending)
    outcome = yield from judged_round(calls, pending)
    usage, run = calls.step.meter.total(), run_of(request.runtime)
    update, card = loop.after_round(state, turn, outcome, usage, run)
    return judged(update), card, None


def judge_end(
    loop: AgentLoop, request: ModelRequest[Any], record: LoopState
) -> CallFlow[Round | Compare, StepDone]:
    """The end the loop handed to the model step: a reviewer's edit judged, or comparisons."""
    state, options, job = request.state, loop.options, record.job
    view, attempts, selection = loop_view(state, record), None, None
    if isinstance(job, JudgingEdit):
        calls = agent_calls(loop, request, view, job.attempt)
        outcome = yield from judged_round(calls, job.attempt)
        attempts, usage = outcome.attempts, calls.step.meter.total()
        view |= {"attempts": attempts, "usage": usage, "stop_reason": outcome.stop_reason}
        view["response"] = job.attempt.response
    elif isinstance(job, Comparing):
        view |= {"stop_reason": job.stop_reason, "response": job.response}
        comparer = comparer_for(loop, request.model)
        chosen = selection_for(options, job.stop_reason, view["task"], view["attempts"], comparer)
        selection = compare(options, view, chosen)
    ended = yield from end_flow(
        view, options, selection, lambda: calls_left(options.budget, record.usage)
    )
    update, card = loop.finish(state, ended, attempts)
    return judged(update), card, ended.event

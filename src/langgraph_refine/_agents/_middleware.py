"""`RefineMiddleware`: the refine loop inside a LangChain agent built with `create_agent`.

The agent keeps its own loop (model, tools, model, ...). When it gives a final answer (an
AI message without tool calls), this middleware evaluates it and either sends the agent
back to its model with the feedback or ends the run with the best answer as the last
message. The round, the options, the stop rules, the budget, the record, the prompts,
selection, the review and the end are the graph's (`_decisions`); the loop's record is
`_agent_state.LoopState`, what each step writes `_agent_loop`, the steps' calls
`_agent_calls`, the loop's turns beside the conversation `_transcript`.

The hooks, in the agent's graph, each doing one job:

- `before_agent`: starts a loop for this run (the task is the last human message);
- `wrap_model_call`: the model step, one flow for sync and async (`model_step`): while
  the loop's job is `Answering`, the round's rung answers through the loop's one
  executor (budget, retries, deadline, `.result`), on the conversation with the loop's
  turns woven in, and a final answer is kept aside; otherwise it judges, with no model
  call (its own step, so a resume judges the same answer again) and the run's judge (the
  middleware's evaluator, else the agent's own model, which only this step sees): the
  answer's round, a reviewer's edit, or the end's comparisons;
- `after_model`: goes where the loop's job says (judge, answer again, or end); a final
  message the loop never saw (a middleware outside turned a failed call into one) ends it;
- `after_agent`: the human review (its own step, so resuming it repeats no model call)
  and the end (`_end.end_flow`), its result written and its stop event sent here.

Only the hooks push progress cards and send stop events (`shown`). The middleware holds
configuration only: nothing a run resolves is kept on it, so one instance serves several
agents, and a review resumes in a fresh agent.

Needs the `agents` extra: `pip install 'langgraph-refine[agents]'`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from functools import partial
from typing import Any, TypeVar, Unpack

try:
    from langchain.agents.middleware import (
        AgentMiddleware,
        ExtendedModelResponse,
        ModelRequest,
        ModelResponse,
        hook_config,
    )
    from langchain.agents.middleware.internal_call_transformer import InternalCallTransformer
except ImportError as exc:  # the optional dependency is missing
    raise ImportError(
        "RefineMiddleware needs LangChain's agents (langchain>=1.5), which is not installed: "
        "pip install 'langgraph-refine[agents]'"
    ) from exc

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage
from langgraph.graph.ui import delete_ui_message, push_ui_message
from langgraph.runtime import Runtime

from langgraph_refine._agents._agent_calls import (
    Compare,
    Draft,
    FailedReply,
    Round,
    Unsaved,
    afulfil,
    draft_step,
    fulfil,
    judge_step,
)
from langgraph_refine._agents._agent_loop import (
    LOOP_NAME,
    AgentLoop,
    counted_usage,
    failed_reply,
    fresh_start,
    model_of,
    refused,
    regenerating,
    restarted,
)
from langgraph_refine._agents._agent_state import (
    Answering,
    Comparing,
    Deciding,
    Done,
    RefineAgentState,
    RefineProgressState,
    conversation,
    loop_state,
    loop_view,
)
from langgraph_refine._agents._progress import Card, ProgressUI
from langgraph_refine._agents._transcript import woven_request
from langgraph_refine._calls._budget import BudgetStop, check_rungs_priced
from langgraph_refine._calls._clients import held
from langgraph_refine._decisions._end import compares_at_end, end_flow, raise_on_budget_stop
from langgraph_refine._decisions._flows import CallFlow, adrive, drive
from langgraph_refine._decisions._options import AGENT, AGENT_DEFAULTS, AgentOptions, LoopOptions
from langgraph_refine._decisions._reviewed import ReviewAnswer
from langgraph_refine._decisions._round import with_criteria
from langgraph_refine._events import ReviewPayload, StopEvent
from langgraph_refine._kinds import model_name
from langgraph_refine._loop._resolve import agent_models, check_binds
from langgraph_refine._loop._review import ReviewNode, require_checkpointer
from langgraph_refine._loop._review_schema import aresolve_requested, ask_review
from langgraph_refine._loop._step import emit
from langgraph_refine._loop._thread import run_of
from langgraph_refine._records._reviews import arecord_review, record_review
from langgraph_refine._result import RefineResult
from langgraph_refine._stop_rules import StopRules
from langgraph_refine.evaluators._base import EvaluatorLike
from langgraph_refine.evaluators._calibrate import refuse_to_start, warn_at_build

R = TypeVar("R")


class RefineMiddleware(AgentMiddleware[RefineAgentState, Any, Any]):
    """The evaluator-optimizer loop as middleware for `langchain.agents.create_agent`.

    Each final answer of the agent (an AI message without tool calls) is kept aside and
    evaluated (the graph's round). If no stop rule holds, the agent runs its model again
    with the feedback, tools still available. When the loop stops, the best answer (a
    `PASS` verdict outranks any score; ties go to the earlier answer) joins the
    conversation once, as its last message: the answers the loop rejected and its own
    turns never join it (`keep_evaluation_turns=True` weaves them in at the end).
    `result(state)` turns the agent's final state into a `RefineResult`.

    Args:
        evaluator: A callable `(response, state) -> float | Evaluation` (sync or async;
            `state` holds `task`, `attempts` and the agent's `messages`), a chat model
            (LLM judge), an evaluator from `langgraph_refine.evaluators`, a list of these
            (combined), or None: an LLM judge on `judge_model`, else on the agent's own
            model.
        options: The loop's options, built once (`LoopOptions`), e.g. the same object
            handed to `create_refine_graph`; keywords override it. Its fields give every
            option (its `strategy`, `memory` and `stream_drafts` too); those an agent
            does not take (`candidates`, `prompt_form`, ...) must keep their defaults.
        models: A ladder of the agent's models, cheapest first (chat models or
            `"provider:model"` strings): every model call of a round, tool turns
            included, is made by that round's rung. None: the agent's own model.
        keep_evaluation_turns: False (default): the conversation ends as the request,
            the tool calls and the best answer. True rewrites it at the end with every
            answer and the loop's turns woven in (the best answer last).
        progress_ui: The name of a generative-UI component that shows the loop's progress
            in a chat (`ProgressCard` props, state key `ui`; see `_progress` and
            `examples/chat_server`); None (default): no card.
        **settings: The options an agent takes (`AgentOptions`): the fields of
            `LoopOptions`, with their meaning and defaults, overriding `options`. Without
            `options`, three defaults suit a chat: `strategy="chain"` (the agent goes on
            from its last answer), `memory="all"` (it sees all its answers, as a
            conversation would) and `stream_drafts=False` (no draft reaches a `messages`
            stream: the best answer arrives once, whole; `True` streams every draft,
            each chunk's metadata naming its `refine_attempt`).

    Raises:
        ValueError: If an option is outside its allowed range, or one an agent does not
            take is given (the message names it and says why).

    Example:
        >>> from langgraph_refine import RefineMiddleware
        >>> from langgraph_refine.evaluators import contains_all
        >>> refine = RefineMiddleware(contains_all(["1889", "330"]), max_iterations=2)
        >>> refine.stop_rules.max_iterations
        2

        Then `refine.result(create_agent(model, tools, middleware=[refine]).invoke(...))`.
    """

    state_schema = RefineAgentState
    # Keeps the loop's own calls (internal-call metadata) out of `run.messages`.
    transformers = (InternalCallTransformer,)

    def __init__(
        self,
        evaluator: EvaluatorLike = None,
        *,
        options: LoopOptions | None = None,
        models: Sequence[BaseChatModel | str] | None = None,
        keep_evaluation_turns: bool = False,
        progress_ui: str | None = None,
        **settings: Unpack[AgentOptions],
    ) -> None:
        super().__init__()
        if options is None:
            settings = {**AGENT_DEFAULTS, **settings}
        built = LoopOptions.build(options, surface=AGENT, **settings)
        review = (
            None
            if built.human_review is None
            else ReviewNode(
                built.human_review, on_budget_exhausted=built.on_budget_exhausted, name=LOOP_NAME
            )
        )
        # The evaluator and comparer stay None when the agent's own model is to judge
        # and compare: each run resolves them (`judge_for`), nothing is kept here.
        self.rungs, resolved = agent_models(models, evaluator, built.judge_model, built.comparer)
        check_rungs_priced(built.budget, self.rungs, "models")  # before any call is paid
        warn_at_build(resolved.evaluator, require_calibration=built.require_calibration)
        self.loop = AgentLoop(
            replace(built, name=LOOP_NAME),
            resolved.evaluator,
            review,
            bool(keep_evaluation_turns),
            ladder=[model_name(rung) for rung in self.rungs],
            comparer=resolved.comparer,
            progress=progress_for(progress_ui),
        )
        self.state_schema = RefineProgressState if self.loop.progress else RefineAgentState
        self.unsaved = Unsaved()

    @property
    def stop_rules(self) -> StopRules:
        """The loop's stop rules (from its options)."""
        return self.loop.options.rules

    # -- before_agent: a new loop per run ---------------------------------------------------

    def before_agent(self, state: RefineAgentState, runtime: Runtime[Any]) -> dict[str, Any]:
        """Start a loop: the task is the last human message; earlier runs' attempts go.

        Raises:
            ValueError: With `human_review`, if the agent has no checkpointer (before
                any model call).
        """
        if self.loop.review is not None:
            require_checkpointer()
        options = self.loop.options
        refuse_to_start(
            self.loop.evaluator,
            require_calibration=options.require_calibration,
            state=with_criteria(state, options),
        )
        return fresh_start(state)

    # -- wrap_model_call: the model step: the call, counted; or a judging step -------------

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ExtendedModelResponse[Any]:
        """The model step: the agent's model call, or, in a step of its own, its judging.

        The model call runs through the loop's executor, as a graph's generate step
        (`agent_step`: budget, prices, retries, deadline, `.result`), on the conversation
        with the loop's turns woven in (`_transcript`), by the round's rung (`models`). A
        final answer is judged in the next model step, where the run's judge is known.
        """
        return drive(model_step(self, request, handler), fulfil)

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ExtendedModelResponse[Any]:
        """Async twin of `wrap_model_call`: the same flow, its calls awaited."""
        return await adrive(model_step(self, request, handler), partial(afulfil, self.loop.options))

    def request_for(self, request: ModelRequest[Any]) -> ModelRequest[Any]:
        """The round's request: its rung's model, the loop's turns woven in.

        Raises:
            ValueError: If a rung cannot bind the agent's tools (at the loop's first call).
        """
        if self.rungs:
            record = loop_state(request.state)
            if record.usage.calls == 0:
                check_binds(self.rungs, list(request.tools))
            request = request.override(model=self.rungs[min(record.rung, len(self.rungs) - 1)])
        request = request.override(model=held(request.model))  # its retries off (`held`)
        return woven_request(request, self.loop.options.memory)

    # -- after_model and after_agent: where the round goes, review and the end -------------

    @hook_config(can_jump_to=["model", "end"])
    def after_model(self, state: RefineAgentState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Go where the model step left the loop: judge, answer again, or end.

        A final message the loop never saw (a middleware outside turned a failed call
        into one) ends the loop; what the failed calls spent is kept.
        """
        record = loop_state(state)
        job = record.job
        if isinstance(job, Deciding | Done):
            return {"jump_to": "end"}
        if not isinstance(job, Answering):  # the next model step judges
            return {"jump_to": "model"}
        messages = conversation(state.get("messages") or [], record)
        last = messages[-1] if messages else None
        if not isinstance(last, AIMessage):  # a judging step sent the agent on
            return {"jump_to": "model"}
        if last.tool_calls:
            return None
        return failed_reply(state, run_of(runtime), self.unsaved.take(state))

    @hook_config(can_jump_to=["model"])
    def after_agent(self, state: RefineAgentState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Ask the human reviewer (if any), then refine again or end with the best answer.

        A reviewer's edit is evaluated (one more evaluator call, within the budget) and
        ends the loop with the edited text; it and a pairwise end's comparisons are made
        in the model step (see `wrap_model_call`), where the run's judge is known.

        Raises:
            BudgetExhaustedError: On a budget stop with `on_budget_exhausted="raise"`.
        """
        payload, answer, restart = review_of(self.loop, state, runtime)
        if restart is not None:
            return restart
        if payload is not None and answer is not None:
            record_review(payload, answer.action, judge=judge_identity(self.loop, state))
        return after_review(self.loop, state, runtime, answer)

    @hook_config(can_jump_to=["model"])
    async def aafter_agent(
        self, state: RefineAgentState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Async twin of `after_agent`: the review's answer is kept with the store's `aput`.

        An async agent runs this hook on its event loop, where a server's store refuses
        sync calls (`langgraph dev`'s "Synchronous calls to BatchedStore").
        """
        resolve = await aresolve_requested() if self.loop.review_asked(state) else None
        payload, answer, restart = review_of(self.loop, state, runtime, resolve)
        if restart is not None:
            return restart
        if payload is not None and answer is not None:
            await arecord_review(payload, answer.action, judge=judge_identity(self.loop, state))
        return after_review(self.loop, state, runtime, answer)

    def result(self, state: Mapping[str, Any]) -> RefineResult:
        """The loop's `RefineResult` from the agent's state (what `invoke` returned).

        Args:
            state: The agent's output state, or `agent.get_state(config).values`.
        """
        return RefineResult.from_state(loop_view(state))


def model_step(
    middleware: RefineMiddleware, request: ModelRequest[Any], handler: Any
) -> CallFlow[Draft | Round | Compare, ExtendedModelResponse[Any]]:
    """The model step as a flow written once for sync and async: it yields its calls.

    The loop's next job says what it does: ask the model (`Draft`, its answer counted
    and kept aside, see `AgentLoop.drafted`), or judge (`judge_step`).
    """
    loop = middleware.loop
    if not isinstance(loop_state(request.state).job, Answering):
        return shown(loop, *(yield from judge_step(loop, request)))
    called, step = middleware.request_for(request), draft_step(loop, request)
    run = run_of(request.runtime)
    try:
        response = yield Draft(step, handler, called)
    except BudgetStop:
        return refused(request.state, step.meter, run)
    except FailedReply:  # a middleware inside turned the failure into a reply
        return refused(request.state, step.meter, run, "model_error")
    finally:  # what the call spent, for a retry around this step
        middleware.unsaved.keep(request, counted_usage(request, step.meter))
    return shown(loop, *loop.drafted(request.state, response, step.meter, model_of(called)))


def shown(loop: AgentLoop, reply: R, card: Card | None, event: StopEvent | None = None) -> R:
    """`reply`, after the progress card is pushed and the stop event sent (the hooks' I/O)."""
    if card is not None and loop.progress is not None:
        if card.props is None:
            delete_ui_message(card.id)
        else:  # the same id every time: a chat (and `ui_message_reducer`) replaces it in place
            push_ui_message(
                loop.progress.component, dict(card.props), id=card.id, message=card.message
            )
    if event is not None:
        emit(event)
    return reply


def review_of(
    loop: AgentLoop, state: RefineAgentState, runtime: Runtime[Any], resolve: bool | None = None
) -> tuple[ReviewPayload | None, ReviewAnswer | None, dict[str, Any] | None]:
    """The review asked and its answer (the run pauses for it), or a Refresh's restart.

    `resolve`: whether a client resolved the thread (`Command(goto=END)`), read by an
    async hook (`aresolve_requested`); None: `ask_review` reads it.
    """
    payload = loop.review_asked(state)
    if payload is None and regenerating(state, run_of(runtime)):  # a chat's Refresh
        update, card = restarted(state, loop.progress)
        return None, None, shown(loop, update | {"jump_to": "model"}, card)
    return payload, reviewed(loop, payload, resolve), None


def after_review(
    loop: AgentLoop, state: RefineAgentState, runtime: Runtime[Any], answer: ReviewAnswer | None
) -> dict[str, Any] | None:
    """Refine again or end, after the review (or without one).

    Raises:
        BudgetExhaustedError: On a budget stop with `on_budget_exhausted="raise"`.
    """
    run = run_of(runtime)
    outcome = loop.review_outcome(state, answer, run)
    if not isinstance(outcome, Comparing):
        return outcome
    record = loop_state(state)
    view = loop_view(state, record) | {
        "stop_reason": outcome.stop_reason,
        "response": outcome.response,
    }
    raise_on_budget_stop(view, loop.options)  # before a comparison is paid
    if compares_at_end(loop.options.select, outcome.stop_reason):  # the model step compares
        return record.update(job=outcome, ended_by=run) | {"jump_to": "model"}
    ended = drive(end_flow(view, loop.options, None, lambda: None), fulfil)
    update, card = loop.finish(state, ended)
    return shown(loop, update, card, ended.event)


def judge_identity(loop: AgentLoop, state: Mapping[str, Any]) -> dict[str, Any] | None:
    """The identity of the middleware's judge, for a review's label (None: per run)."""
    review = loop.review
    return review.identity(state, loop.evaluator) if review is not None else None


def reviewed(
    loop: AgentLoop, payload: ReviewPayload | None, resolve: bool | None = None
) -> ReviewAnswer | None:
    """The reviewer's answer to `payload` (the run pauses until there is one), or None."""
    if payload is None or loop.review is None:
        return None
    return ask_review(payload, loop.review.answer, loop.review.actions, resolve=resolve)


def progress_for(component: object) -> ProgressUI | None:
    """The progress card named `component` (`progress_ui=`), or None.

    Raises:
        ValueError: If `component` is neither None nor a non-empty string.
    """
    if component is None:
        return None
    if not isinstance(component, str) or not component.strip():
        raise ValueError(
            f"progress_ui must be the name of a UI component (a non-empty string, e.g. "
            f"'refine_progress'), or None for no progress card; got {component!r}"
        )
    return ProgressUI(component.strip())


__all__ = ["RefineAgentState", "RefineMiddleware"]

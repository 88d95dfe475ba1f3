"""`RefineMiddleware`: the refine loop inside a LangChain agent built with `create_agent`.

The agent keeps its own loop (model, tools, model, ...). When it gives a final answer (an
AI message without tool calls), this middleware evaluates it and either sends the agent
back to its model with the feedback, as a human message, or ends the run with the best
answer as the last message. Stop rules, the best-attempt rule, the budget and the human
review are the graph's own code (`StopRules`, `best_attempt`, `Budget`, `ReviewNode`).

The hooks, in the agent's graph:

- `before_agent`: starts a loop for this run (the task is the last human message);
- `before_model`: checks the budget before every model call;
- `wrap_model_call`: counts the call and its tokens;
- `after_model`: evaluates a final answer and decides (refine, or stop);
- `after_agent`: the human review (its own step, so resuming it repeats no model call)
  and the end of the loop.

Needs the `agents` extra: `pip install 'langgraph-refine[agents]'`.
"""

from __future__ import annotations

import uuid
import weakref
from collections.abc import Awaitable, Callable, Mapping
from typing import Annotated, Any, Literal, NamedTuple

try:
    from langchain.agents.middleware import (
        AgentMiddleware,
        AgentState,
        ExtendedModelResponse,
        ModelRequest,
        ModelResponse,
        hook_config,
    )
    from langchain.agents.middleware.types import OmitFromInput, PrivateStateAttr
except ImportError as exc:  # the optional dependency is missing
    raise ImportError(
        "RefineMiddleware needs LangChain's agents (langchain>=1.0), which is not installed: "
        "pip install 'langgraph-refine[agents]'"
    ) from exc

from typing import NotRequired

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, RemoveMessage
from langgraph.runtime import Runtime
from langgraph.store.base import BaseStore
from langgraph.types import Command

from langgraph_refine._budget import Budget, BudgetMeter, BudgetStop, active_meter, metered
from langgraph_refine._errors import BudgetExhaustedError
from langgraph_refine._options import HumanReview, check_choice
from langgraph_refine._prompts import guided_request
from langgraph_refine._reasoning import split_reasoning
from langgraph_refine._record import RecordUpdate, aexchange, evaluator_kind, exchange, model_name
from langgraph_refine._result import RefineResult, best_attempt
from langgraph_refine._review import ReviewNode, require_checkpointer
from langgraph_refine._review_schema import ask_review
from langgraph_refine._state import (
    Attempt,
    Evaluation,
    MoveKind,
    PlainDataChannel,
    StopReason,
    Strategy,
    Usage,
    keep_latest,
    revive_state,
    to_plain,
)
from langgraph_refine._step import emit as _emit
from langgraph_refine._step import round_event, stop_event
from langgraph_refine._stop_rules import StopRules
from langgraph_refine._strategy import Choice, MoveStats, choose_next
from langgraph_refine.evaluators import llm_judge
from langgraph_refine.evaluators._base import BaseEvaluator, EvaluatorLike
from langgraph_refine.evaluators._combine import as_evaluator

LOOP_NAME = "refine"
"""The loop's name in stream events and review payloads."""

Phase = Literal["running", "deciding", "done"]

FEEDBACK_PROMPT = (
    "Your answer was evaluated{score}.\nFeedback:\n{feedback}\n\n"
    "Write a new, improved final answer to the original request. Fix every problem the "
    "feedback names and keep what was already good; use the tools again if you need more "
    "information. Reply with the complete answer only."
)
REVIEW_PROMPT = (
    "A reviewer asked for changes:\n{feedback}\n\n"
    "Write a new, improved final answer to the original request that does what the "
    "reviewer asks; use the tools again if you need more information. Reply with the "
    "complete answer only."
)
REFINE_EARLIER_PROMPT = (
    "Here is an earlier answer of yours to the request above:\n"
    "<answer>\n{answer}\n</answer>\n\n"
    "It was evaluated{score}.\nFeedback:\n{feedback}\n\n"
    "Write a new, improved final answer to the request. Fix every problem the feedback "
    "names and keep what was already good; use the tools again if you need more "
    "information. Reply with the complete answer only."
)
NO_FEEDBACK = "(no specific feedback: the answer is not good enough yet)"


class RefineAgentState(AgentState[Any]):
    """The agent state keys `RefineMiddleware` adds (all prefixed `refine_`).

    Attributes:
        refine_task: The request being answered: the last human message of the run's input.
        refine_attempts: Every final answer of this run, in order, with its evaluation
            (models in the state, plain data in checkpoints: see `PlainDataChannel`).
        refine_usage: Model calls (the agent's and the judge's), tokens and seconds spent.
        refine_stop_reason: Why the loop stopped (None while it runs).
        refine_response: The loop's answer, set when it stops.
        refine_phase: `running`, `deciding` (an answer awaits review or the end), `done`.
        refine_instruction: A reviewer's request, recorded on the next attempt.
        refine_base: How many messages came before this run's loop (its conversation).
        refine_hidden_to: With `strategy="explore"`: the model does not see the messages
            from `refine_base` up to this index (earlier answers, for a fresh sample or
            a refinement of an earlier answer); None: it sees the whole conversation.
        refine_next: The next answer's move and the attempt it refines (`[move, parent]`).
        refine_loop_id: Identifies this run's loop in the strategy record.
        refine_model: The agent's model as the strategy record's key names it.
    """

    refine_task: NotRequired[Annotated[str, OmitFromInput]]
    refine_attempts: NotRequired[
        Annotated[list[Attempt], OmitFromInput, PlainDataChannel(list[Attempt], keep_latest)]
    ]
    refine_usage: NotRequired[Annotated[Usage, OmitFromInput, PlainDataChannel(Usage, keep_latest)]]
    refine_stop_reason: NotRequired[Annotated[StopReason | None, OmitFromInput]]
    refine_response: NotRequired[Annotated[str | None, OmitFromInput]]
    refine_phase: NotRequired[Annotated[Phase, PrivateStateAttr]]
    refine_instruction: NotRequired[Annotated[str | None, PrivateStateAttr]]
    refine_base: NotRequired[Annotated[int, PrivateStateAttr]]
    refine_hidden_to: NotRequired[Annotated[int | None, PrivateStateAttr]]
    refine_next: NotRequired[Annotated[list[Any] | None, PrivateStateAttr]]
    refine_loop_id: NotRequired[Annotated[str, PrivateStateAttr]]
    refine_model: NotRequired[Annotated[str | None, PrivateStateAttr]]


class RefineMiddleware(AgentMiddleware[RefineAgentState, Any, Any]):
    """The evaluator-optimizer loop as middleware for `langchain.agents.create_agent`.

    Each final answer of the agent (an AI message without tool calls) is evaluated. If no
    stop rule holds, the feedback goes back to the agent as a human message and the agent
    runs its model again, tools still available. When the loop stops, the agent's last
    message is the best answer (a `PASS` verdict outranks any score; ties go to the
    earlier answer), once: the other answers and the feedback turns are removed from the
    conversation (`keep_evaluation_turns=True` keeps them).
    `result(state)` turns the agent's final state into a `RefineResult`.

    Args:
        evaluator: A callable `(response, state) -> float | Evaluation` (sync or async;
            `state` holds `task`, `attempts` and the agent's `messages`), a chat model
            (LLM judge), an evaluator from `langgraph_refine.evaluators`, a list of these
            (combined), or None for an LLM judge on `judge_model`.
        judge_model: The model of the default LLM judge (a chat model or a
            `"provider:model"` string). Required when `evaluator` is None: hooks that run
            after the model cannot see the agent's model, so there is no fallback.
        target_score: Stop once an answer scores at least this, in [0, 1].
        max_iterations: Refinement rounds after the first answer (>= 0).
        patience: Stop after this many rounds without raising the best score by more than
            `min_delta` (>= 1); None disables the rule.
        min_delta: Improvement that counts as progress (>= 0).
        budget: Limits on model calls (the agent's, tool-calling turns included, and the
            judge's), tokens and seconds, checked before every call.
        on_budget_exhausted: `"stop"` ends with the best answer so far; `"raise"` raises
            `BudgetExhaustedError` carrying it in `.result`.
        human_review: None, `"final"` (pause when the loop would stop) or `"every_round"`
            (pause after every evaluation). Same payload and actions as the graph's review;
            the agent needs a checkpointer.
        strategy: What each round after the first does. `"chain"` (default): the agent
            continues its conversation with the feedback. `"explore"`: the graph's rule
            (see `create_refine_graph`), where a fresh sample answers the request again
            without seeing the earlier answers; with the agent's store
            (`create_agent(..., store=...)`) it keeps the strategy record there, so later
            runs start from what earlier ones learned. `"sample"`: every round answers
            afresh (best-of-N).
        record_key: The strategy record's key; by default the agent's model and the
            evaluator's kind, as in the graph.
        keep_evaluation_turns: False (default): when the loop stops, the run's answers
            and the feedback turns the loop added are removed from the conversation and
            the best answer is appended once, so the agent's history reads as the request,
            the tool calls, and the answer. True keeps every answer and feedback turn
            (the best answer is appended unless it is already the last message).

    Raises:
        ValueError: If an option is outside its allowed range (the message names it).

    Example:
        >>> from langgraph_refine import RefineMiddleware
        >>> from langgraph_refine.evaluators import contains_all
        >>> refine = RefineMiddleware(contains_all(["1889", "330"]), max_iterations=2)
        >>> refine.stop_rules.max_iterations
        2

        Then `agent = create_agent(model, tools, middleware=[refine])`, and
        `refine.result(agent.invoke(...))` for the loop's `RefineResult`.
    """

    state_schema = RefineAgentState

    def __init__(
        self,
        evaluator: EvaluatorLike = None,
        *,
        judge_model: BaseChatModel | str | None = None,
        target_score: float = 0.9,
        max_iterations: int = 4,
        patience: int | None = 2,
        min_delta: float = 0.0,
        budget: Budget | None = None,
        on_budget_exhausted: Literal["stop", "raise"] = "stop",
        human_review: HumanReview | None = None,
        strategy: Strategy = "chain",
        record_key: str | None = None,
        keep_evaluation_turns: bool = False,
    ) -> None:
        super().__init__()
        self.keep_evaluation_turns = bool(keep_evaluation_turns)
        self.strategy: Strategy = check_choice("strategy", strategy, Strategy)
        if record_key is not None and (not isinstance(record_key, str) or not record_key.strip()):
            raise ValueError(f"record_key must be a non-empty string or None, got {record_key!r}")
        self.record_key = record_key
        self.stop_rules = StopRules(target_score, max_iterations, patience, min_delta)
        if on_budget_exhausted not in ("stop", "raise"):
            raise ValueError(
                f"on_budget_exhausted must be 'stop' or 'raise', got {on_budget_exhausted!r}"
            )
        if budget is not None and not isinstance(budget, Budget):
            raise ValueError(f"budget must be a Budget or None, got {type(budget).__name__}")
        self.evaluator = _resolve_evaluator(evaluator, judge_model)
        self.budget = budget
        self.on_budget_exhausted = on_budget_exhausted
        self.review = (
            None
            if human_review is None
            else ReviewNode(human_review, on_budget_exhausted=on_budget_exhausted, name=LOOP_NAME)
        )

    # -- before_agent: a new loop per run -------------------------------------------------

    def before_agent(self, state: RefineAgentState, runtime: Runtime[Any]) -> dict[str, Any]:
        """Start a loop: the task is the last human message; earlier runs' attempts go.

        Raises:
            ValueError: With `human_review`, if the agent has no checkpointer (before
                any model call).
        """
        if self.review is not None:
            require_checkpointer()
        human = [m for m in state["messages"] if isinstance(m, HumanMessage)]
        return {
            "refine_task": human[-1].text if human else "",
            "refine_attempts": [],
            "refine_usage": to_plain(Usage()),
            "refine_stop_reason": None,
            "refine_response": None,
            "refine_phase": "running",
            "refine_instruction": None,
            "refine_base": len(state["messages"]),
            "refine_hidden_to": None,
            "refine_next": None,
            "refine_loop_id": uuid.uuid4().hex,
        }

    async def abefore_agent(self, state: RefineAgentState, runtime: Runtime[Any]) -> dict[str, Any]:
        """Async twin of `before_agent`."""
        return self.before_agent(state, runtime)

    # -- before_model: the budget ----------------------------------------------------------

    @hook_config(can_jump_to=["end"])
    def before_model(self, state: RefineAgentState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Stop the loop (no model call) when a budget limit is already reached."""
        if self.budget is None or self.budget.exceeded(_spent(state)) is None:
            return None
        return {
            "refine_stop_reason": "budget_exhausted",
            "refine_phase": "deciding",
            "jump_to": "end",
        }

    @hook_config(can_jump_to=["end"])
    async def abefore_model(
        self, state: RefineAgentState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Async twin of `before_model`."""
        return self.before_model(state, runtime)

    # -- wrap_model_call: counting ---------------------------------------------------------

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ExtendedModelResponse[Any]:
        """Call the model and count the call, its tokens, cost and time in `refine_usage`.

        The model call runs under the loop's meter, like the graph's steps: it is checked
        and priced before it is sent (an unpriced model under `max_cost` is refused), and
        counted once even if the model bypasses LangChain's callbacks.

        A fresh sample (or a refinement of an earlier answer) does not show the model the
        answers it sets aside (see `refine_hidden_to`).
        """
        meter = self._meter(request.state, carried=_FAILED_CALLS.pop(id(request), None))
        try:
            with metered(meter), meter.invocation() as done:
                response = done(handler(_shown(request)))
        except BudgetStop:
            return _refused(meter)
        except Exception:
            _carry(request, meter.delta())
            raise
        return _counted(response, meter, _model_name(request))

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ExtendedModelResponse[Any]:
        """Async twin of `wrap_model_call`."""
        meter = self._meter(request.state, carried=_FAILED_CALLS.pop(id(request), None))
        try:
            with metered(meter), meter.invocation() as done:
                response = done(await handler(_shown(request)))
        except BudgetStop:
            return _refused(meter)
        except Exception:
            _carry(request, meter.delta())
            raise
        return _counted(response, meter, _model_name(request))

    def _meter(
        self, state: Mapping[str, Any], carried: Usage | None = None, what: str = "agent"
    ) -> BudgetMeter:
        """The one place that counts: a meter over what the loop has spent so far.

        Both the agent's model calls and the judge's go through it; it refuses a call
        (`BudgetStop`) once a limit is reached. `carried` is what failed calls of the same
        model step spent (a retry middleware calls the model again within the step).
        In an agent run inside a loop's step, that step's meter is its parent (a nested
        loop spends from the outer budget too).
        """
        parent = active_meter()
        return BudgetMeter(self.budget, _spent(state), carried=carried, what=what, parent=parent)

    # -- after_model: evaluate a final answer ----------------------------------------------

    @hook_config(can_jump_to=["model"])
    def after_model(self, state: RefineAgentState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Evaluate the agent's final answer; refine (back to the model) or stop."""
        answer = self._final_answer(state)
        if answer is None:
            return None
        view, meter = self._view(state), self._meter(state, what="evaluator")
        evaluation: Evaluation | None = None
        try:
            with metered(meter):
                evaluation = self.evaluator.evaluate(answer, view)
        except BudgetStop:
            pass
        update, attempts = self._record_answer(state, answer, evaluation, meter)
        kept = self._record(state, runtime, attempts)
        record = exchange(*kept) if kept else None
        return self._decide(state, update, attempts, record)

    @hook_config(can_jump_to=["model"])
    async def aafter_model(
        self, state: RefineAgentState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Async twin of `after_model`."""
        answer = self._final_answer(state)
        if answer is None:
            return None
        view, meter = self._view(state), self._meter(state, what="evaluator")
        evaluation: Evaluation | None = None
        try:
            with metered(meter):
                evaluation = await self.evaluator.aevaluate(answer, view)
        except BudgetStop:
            pass
        update, attempts = self._record_answer(state, answer, evaluation, meter)
        kept = self._record(state, runtime, attempts)
        record = await aexchange(*kept) if kept else None
        return self._decide(state, update, attempts, record)

    def _final_answer(self, state: RefineAgentState) -> str | None:
        """The text of the agent's final answer, or None if it is not one (tool calls)."""
        if state.get("refine_phase", "running") != "running" or not state["messages"]:
            return None
        last = state["messages"][-1]
        if not isinstance(last, AIMessage) or last.tool_calls:
            return None
        return split_reasoning(last)[0]  # the answer only: its reasoning is never judged

    def _view(self, state: Mapping[str, Any]) -> dict[str, Any]:
        """The loop's state in the graph's terms, for evaluators, stop rules and review."""
        view = {
            "task": state.get("refine_task", ""),
            "attempts": list(state.get("refine_attempts") or []),
            "usage": state.get("refine_usage"),
            "stop_reason": state.get("refine_stop_reason"),
            "response": state.get("refine_response"),
            "messages": state.get("messages") or [],
        }
        return dict(revive_state(view))

    def _record_answer(
        self,
        state: RefineAgentState,
        answer: str,
        evaluation: Evaluation | None,
        meter: BudgetMeter,
    ) -> tuple[dict[str, Any], list[Attempt]]:
        """The answer as the loop's next attempt: the state update, and the attempts with it."""
        view = self._view(state)
        attempts: list[Attempt] = list(view["attempts"])
        spent = meter.spent_before + meter.delta()
        move, parent = _next_move(state, attempts)
        attempts.append(
            Attempt(
                index=len(attempts),
                response=answer,
                evaluation=evaluation,
                reasoning=split_reasoning(state["messages"][-1])[1],
                instruction=state.get("refine_instruction"),
                parent=parent,
                move=move,
                usage=_minus(spent, sum((a.usage for a in attempts), Usage())),
            )
        )
        # Plain data in the agent's state: its checkpoints never hold the loop's models
        # (see `PlainDataChannel`).
        update: dict[str, Any] = {
            "refine_attempts": to_plain(attempts),
            "refine_usage": to_plain(spent),
            "refine_instruction": None,
            "refine_next": None,
        }
        return update, attempts

    def _record(
        self, state: RefineAgentState, runtime: Runtime[Any], attempts: list[Attempt]
    ) -> tuple[BaseStore, RecordUpdate] | None:
        """The agent's store and this round's record update, when explore keeps a record."""
        store = getattr(runtime, "store", None)
        if self.strategy != "explore" or store is None or attempts[-1].evaluation is None:
            return None
        key = self.record_key
        if key is None:
            model = state.get("refine_model")
            if not model:
                return None
            key = f"{model}|{evaluator_kind(self.evaluator)}"
        return store, RecordUpdate(key, state.get("refine_loop_id"), attempts)

    def _decide(
        self,
        state: RefineAgentState,
        update: dict[str, Any],
        attempts: list[Attempt],
        record: Mapping[str, MoveStats] | None,
    ) -> dict[str, Any]:
        attempt = attempts[-1]
        evaluation = attempt.evaluation
        if evaluation is None:  # the budget ran out before the judge's call
            return update | {"refine_stop_reason": "budget_exhausted", "refine_phase": "deciding"}
        stop_reason = self.stop_rules.decide(attempts)
        _emit(round_event(LOOP_NAME, attempt, best_attempt(attempts)))
        if stop_reason is None and (self.review is None or self.review.mode == "final"):
            task = str(state.get("refine_task") or "")
            choice = choose_next(self.strategy, attempts, task, record=record)
            return update | _move(state, choice, attempts)
        # Stop, or an every-round review: the agent ends its turn and after_agent decides.
        return update | {"refine_stop_reason": stop_reason, "refine_phase": "deciding"}

    # -- after_agent: review and the end ---------------------------------------------------

    @hook_config(can_jump_to=["model"])
    def after_agent(self, state: RefineAgentState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Ask the human reviewer (if any), then refine again or end with the best answer.

        A reviewer's edit is evaluated (one more evaluator call, within the budget) and
        ends the loop with the edited text.

        Raises:
            BudgetExhaustedError: On a budget stop with `on_budget_exhausted="raise"`.
        """
        outcome = self._review(state)
        if not isinstance(outcome, _Edit):
            return outcome
        evaluation: Evaluation | None = None
        try:
            with metered(outcome.meter):
                evaluation = self.evaluator.evaluate(outcome.attempt.response, outcome.view)
        except BudgetStop:
            pass
        return self._end_with_edit(state, outcome, evaluation)

    @hook_config(can_jump_to=["model"])
    async def aafter_agent(
        self, state: RefineAgentState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Async twin of `after_agent`."""
        outcome = self._review(state)
        if not isinstance(outcome, _Edit):
            return outcome
        evaluation: Evaluation | None = None
        try:
            with metered(outcome.meter):
                evaluation = await self.evaluator.aevaluate(outcome.attempt.response, outcome.view)
        except BudgetStop:
            pass
        return self._end_with_edit(state, outcome, evaluation)

    def _review(self, state: RefineAgentState) -> dict[str, Any] | _Edit | None:
        """The review and its decision: an update, or an edit still to evaluate."""
        if state.get("refine_phase") != "deciding":
            return None  # the agent ended for another reason (e.g. another middleware)
        view = self._view(state)
        stop_reason: StopReason | None = view["stop_reason"]
        response: str | None = None
        raising = stop_reason == "budget_exhausted" and self.on_budget_exhausted == "raise"
        if self.review is not None and not raising:
            decision = ask_review(self.review.payload(view), self.review.apply, self.review.actions)
            if decision.get("reviewer_feedback"):
                feedback = decision["reviewer_feedback"]
                return _refine_again(REVIEW_PROMPT, Evaluation(score=0.0, feedback=feedback)) | {
                    "refine_stop_reason": None,
                    "refine_instruction": feedback,
                }
            if decision.get("pending") is not None:  # an edit: evaluated, as in the graph
                return _Edit(view, Attempt.model_validate(decision["pending"]), self._meter(state))
            stop_reason = decision.get("stop_reason", stop_reason)
            response = decision.get("response")
        if stop_reason is None:  # an every-round review said "continue" mid-loop
            latest = view["attempts"][-1].evaluation
            return _refine_again(FEEDBACK_PROMPT, latest)
        return self._finish(state, view | {"stop_reason": stop_reason, "response": response})

    def _end_with_edit(
        self, state: RefineAgentState, edit: _Edit, evaluation: Evaluation | None
    ) -> dict[str, Any]:
        """End the loop with the reviewer's text, its evaluation (None past the budget)."""
        attempt = edit.attempt.model_copy(
            update={"evaluation": evaluation, "usage": edit.meter.delta()}
        )
        attempts = [*edit.view["attempts"], attempt]
        if evaluation is not None:
            _emit(round_event(LOOP_NAME, attempt, best_attempt(attempts)))
        spent = edit.meter.spent_before + edit.meter.delta()
        view = edit.view | {
            "attempts": attempts,
            "usage": spent,
            "stop_reason": "edited",
            "response": attempt.response,
        }
        return self._finish(state, view) | {
            "refine_attempts": to_plain(attempts),
            "refine_usage": to_plain(spent),
        }

    def _finish(self, state: RefineAgentState, view: dict[str, Any]) -> dict[str, Any]:
        result = RefineResult.from_state(view)
        if result.stop_reason == "budget_exhausted" and self.on_budget_exhausted == "raise":
            raise BudgetExhaustedError(
                f"budget exhausted after {len(result.attempts)} answer(s); best score "
                f"{result.score}; the best result so far is in this error's .result",
                result,
            )
        _emit(stop_event(LOOP_NAME, result))
        update: dict[str, Any] = {
            "refine_stop_reason": result.stop_reason,
            "refine_response": result.value,
            "refine_phase": "done",
        }
        if self.keep_evaluation_turns:
            last = state["messages"][-1] if state["messages"] else None
            already_last = (
                isinstance(last, AIMessage) and not last.tool_calls and (last.text == result.value)
            )
            if result.value and not already_last:
                update["messages"] = [AIMessage(result.value)]
            return update
        return update | {"messages": _clean_turns(state, result.value)}

    # -- reading the outcome ---------------------------------------------------------------

    def result(self, state: Mapping[str, Any]) -> RefineResult:
        """The loop's outcome from the agent's final state (what `invoke` returned).

        Args:
            state: The agent's output state, or `agent.get_state(config).values`.

        Returns:
            The `RefineResult` of the run's loop: value, score, stop reason, attempts, usage.
        """
        return RefineResult.from_state(self._view(state))


class _Edit(NamedTuple):
    """A reviewer's edit, still to evaluate: the loop's view, the attempt, the meter."""

    view: dict[str, Any]
    attempt: Attempt
    meter: BudgetMeter


def _resolve_evaluator(
    evaluator: EvaluatorLike, judge_model: BaseChatModel | str | None
) -> BaseEvaluator:
    if evaluator is None:
        if judge_model is None:
            raise ValueError(
                "RefineMiddleware(evaluator=None) uses an LLM judge, which needs a model: pass "
                "judge_model=... (a chat model or 'provider:model'), or an evaluator"
            )
        return llm_judge(judge_model)
    if judge_model is not None:
        raise ValueError("judge_model is only used when evaluator is None; pass one or the other")
    return as_evaluator(evaluator)


def _spent(state: Mapping[str, Any]) -> Usage:
    usage = state.get("refine_usage")
    if usage is None:
        return Usage()
    return usage if isinstance(usage, Usage) else Usage.model_validate(usage)


def _minus(total: Usage, earlier: Usage) -> Usage:
    return Usage(
        calls=total.calls - earlier.calls,
        input_tokens=total.input_tokens - earlier.input_tokens,
        output_tokens=total.output_tokens - earlier.output_tokens,
        total_tokens=total.total_tokens - earlier.total_tokens,
        seconds=max(total.seconds - earlier.seconds, 0.0),
        cost=None if total.cost is None or earlier.cost is None else total.cost - earlier.cost,
    )


def _counted(
    response: ModelResponse[Any], meter: BudgetMeter, model: str | None
) -> ExtendedModelResponse[Any]:
    spent = meter.spent_before + meter.delta()
    update: dict[str, Any] = {"refine_usage": to_plain(spent)}
    if model is not None:
        update["refine_model"] = model
    return ExtendedModelResponse(model_response=response, command=Command(update=update))


_FAILED_CALLS: dict[int, Usage] = {}
"""What a failed agent model call spent, by its request's id, until a retry of the request.

A retry middleware (`ModelRetryMiddleware`) calls the model again with the same request
within the model step (in another copy of the context, so a context variable would not
do). The entry goes when the request does."""


def _carry(request: ModelRequest[Any], spent: Usage) -> None:
    """Keep what a failed call of `request` spent for its retry (see `_FAILED_CALLS`)."""
    key = id(request)
    if key not in _FAILED_CALLS:
        weakref.finalize(request, _FAILED_CALLS.pop, key, None)
    _FAILED_CALLS[key] = spent


def _refused(meter: BudgetMeter) -> ExtendedModelResponse[Any]:
    """The model call the budget refused (a limit reached since `before_model` checked).

    The agent ends its turn on an empty answer, which is not evaluated; the loop stops
    with `budget_exhausted` and its best answer.
    """
    update = {
        "refine_usage": to_plain(meter.spent_before + meter.delta()),
        "refine_stop_reason": "budget_exhausted",
        "refine_phase": "deciding",
    }
    empty = ModelResponse(result=[AIMessage("")])
    return ExtendedModelResponse(model_response=empty, command=Command(update=update))


def _model_name(request: ModelRequest[Any]) -> str | None:
    """The agent's model as the record key names it (the hooks after the model cannot see it)."""
    model = getattr(request, "model", None)
    return model_name(model) if model is not None else None


def _shown(request: ModelRequest[Any]) -> ModelRequest[Any]:
    """The request without the messages a fresh start sets aside (see `refine_hidden_to`)."""
    state = request.state
    hidden_to = state.get("refine_hidden_to")
    if hidden_to is None:
        return request
    base = int(state.get("refine_base") or 0)  # type: ignore[call-overload]
    set_aside = state["messages"][base : int(hidden_to)]  # type: ignore[call-overload]
    hidden_ids = {m.id for m in set_aside if m.id}
    shown = [m for m in request.messages if m.id is None or m.id not in hidden_ids]
    return request.override(messages=shown)


def _next_move(state: Mapping[str, Any], attempts: list[Attempt]) -> tuple[MoveKind, int | None]:
    """The move and parent of the answer just given: what was chosen for it, else the chain's."""
    chosen = state.get("refine_next")
    if chosen:
        return chosen[0], chosen[1]
    if not attempts:
        return "sample", None
    return "refine", attempts[-1].index


def _move(state: Mapping[str, Any], choice: Choice, attempts: list[Attempt]) -> dict[str, Any]:
    """The update that sends the agent back to its model for the chosen move.

    Refining the latest answer continues the conversation with the feedback (what the
    chain strategy always does). A fresh sample hides this loop's turns so far from the
    model, which then answers the request as if first asked. Refining an earlier answer
    hides them too, and shows that answer with its feedback in one new message.
    """
    latest = attempts[-1]
    chosen: dict[str, Any] = {"refine_next": [choice.move, choice.parent]}
    if choice.parent == latest.index:
        return _refine_again(FEEDBACK_PROMPT, latest.evaluation) | chosen
    chosen["refine_hidden_to"] = len(state["messages"])
    again: dict[str, Any] = {"refine_phase": "running", "jump_to": "model"}
    if choice.parent is None:
        if choice.move == "guided":  # a fresh answer told what the best one's feedback asked
            best = best_attempt(attempts)
            feedback = best.evaluation.feedback if best and best.evaluation else ""
            if feedback.strip():
                return again | chosen | {"messages": [HumanMessage(guided_request(feedback))]}
        return again | chosen
    refined = next(a for a in attempts if a.index == choice.parent)
    evaluation = refined.evaluation
    text = REFINE_EARLIER_PROMPT.format(
        answer=refined.response,
        score=_score_note(evaluation),
        feedback=(evaluation.feedback.strip() if evaluation else "") or NO_FEEDBACK,
    )
    return again | chosen | {"messages": [HumanMessage(text)]}


def _clean_turns(state: Mapping[str, Any], best: str) -> list[AnyMessage]:
    """Messages that leave this run's conversation with its tool calls and the best answer.

    The run's answers (AI messages without tool calls) and the turns the loop added
    (human messages after the request: feedback, a reviewer's request) are removed; the
    tool calls and their results stay, and the best answer is appended once.
    """
    run = list(state["messages"])[int(state.get("refine_base") or 0) :]
    removed: list[AnyMessage] = [
        RemoveMessage(id=m.id)  # type: ignore[misc]  # a message add_messages understands
        for m in run
        if m.id and (isinstance(m, HumanMessage) or (isinstance(m, AIMessage) and not m.tool_calls))
    ]
    return [*removed, AIMessage(best)] if best else removed


def _refine_again(template: str, evaluation: Evaluation | None) -> dict[str, Any]:
    """The update that sends the agent back to its model with feedback."""
    feedback = (evaluation.feedback.strip() if evaluation else "") or NO_FEEDBACK
    score = _score_note(evaluation) if template is FEEDBACK_PROMPT else ""
    text = template.format(score=score, feedback=feedback)
    return {"messages": [HumanMessage(text)], "refine_phase": "running", "jump_to": "model"}


def _score_note(evaluation: Evaluation | None) -> str:
    if evaluation is None:
        return ""
    verdict = f", verdict {evaluation.verdict}" if evaluation.verdict else ""
    return f" (score {evaluation.score:.2f}{verdict})"


__all__ = ["RefineAgentState", "RefineMiddleware"]

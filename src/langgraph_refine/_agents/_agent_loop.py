"""The loop inside an agent, without I/O: `RefineMiddleware`'s state keys, turns and decisions.

`AgentLoop` decides what the middleware's hooks write: the attempt an answer becomes, the
record update, the stop rules' decision and the next move, the review's outcome, the end.
The functions below it read the agent's state (and a model request or response): what
the middleware writes back, which messages the model is shown, and how a round's choice
becomes a turn. The hooks themselves, with the evaluator's and the store's calls, are in
`_middleware`.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Annotated, Any, Literal, NamedTuple, NotRequired

from langchain.agents.middleware import (
    AgentState,
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
)
from langchain.agents.middleware.types import OmitFromInput, PrivateStateAttr
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, RemoveMessage
from langgraph.types import Command

from langgraph_refine._calls._budget import BudgetMeter, active_meter
from langgraph_refine._decisions._options import LoopOptions
from langgraph_refine._decisions._prompts import (
    agent_feedback,
    agent_refine_earlier,
    agent_review,
    guided_request,
)
from langgraph_refine._decisions._round import Outcome
from langgraph_refine._decisions._strategy import Choice
from langgraph_refine._errors import BudgetExhaustedError
from langgraph_refine._events import stop_event
from langgraph_refine._kinds import model_name
from langgraph_refine._loop._review import ReviewNode
from langgraph_refine._loop._review_schema import ask_review
from langgraph_refine._loop._step import emit
from langgraph_refine._reasoning import split_reasoning
from langgraph_refine._records._record import compose_key
from langgraph_refine._result import RefineResult, best_feedback
from langgraph_refine._state import (
    Attempt,
    MoveKind,
    PlainDataChannel,
    StopReason,
    Usage,
    keep_latest,
    revive_state,
    to_plain,
)
from langgraph_refine.evaluators import llm_judge
from langgraph_refine.evaluators._base import BaseEvaluator, EvaluatorLike
from langgraph_refine.evaluators._combine import as_evaluator

LOOP_NAME = "refine"
"""The loop's name in stream events and review payloads."""

Phase = Literal["running", "deciding", "done"]


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


def loop_view(state: Mapping[str, Any]) -> dict[str, Any]:
    """The loop's state in the graph's terms, for evaluators, stop rules and review."""
    return dict(
        revive_state(
            {
                "task": state.get("refine_task", ""),
                "attempts": list(state.get("refine_attempts") or []),
                "usage": state.get("refine_usage"),
                "stop_reason": state.get("refine_stop_reason"),
                "response": state.get("refine_response"),
                "messages": state.get("messages") or [],
                "loop_id": state.get("refine_loop_id"),
            }
        )
    )


def spent(state: Mapping[str, Any]) -> Usage:
    usage = state.get("refine_usage")
    if usage is None:
        return Usage()
    return usage if isinstance(usage, Usage) else Usage.model_validate(usage)


def minus(total: Usage, earlier: Usage) -> Usage:
    return Usage(
        calls=total.calls - earlier.calls,
        input_tokens=total.input_tokens - earlier.input_tokens,
        output_tokens=total.output_tokens - earlier.output_tokens,
        total_tokens=total.total_tokens - earlier.total_tokens,
        seconds=max(total.seconds - earlier.seconds, 0.0),
        cost=None if total.cost is None or earlier.cost is None else total.cost - earlier.cost,
    )


def counted(
    response: ModelResponse[Any], meter: BudgetMeter, model: str | None
) -> ExtendedModelResponse[Any]:
    spent = meter.spent_before + meter.delta()
    update: dict[str, Any] = {"refine_usage": to_plain(spent)}
    if model is not None:
        update["refine_model"] = model
    return ExtendedModelResponse(model_response=response, command=Command(update=update))


def carry(request: ModelRequest[Any], meter: BudgetMeter) -> None:
    """Keep what a failed call of `request` spent in the request's state, for its retry.

    A retry middleware (`ModelRetryMiddleware`) calls the model again with the same
    request within the model step; the retry's meter starts from `refine_usage`, so the
    failed call's usage is counted (and budgeted) with it. The step's own update, when
    the retry succeeds, writes the total.
    """
    request.state["refine_usage"] = to_plain(meter.spent_before + meter.delta())


def refused(meter: BudgetMeter) -> ExtendedModelResponse[Any]:
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


def model_of(request: ModelRequest[Any]) -> str | None:
    """The agent's model as the record key names it (the hooks after the model cannot see it)."""
    model = getattr(request, "model", None)
    return model_name(model) if model is not None else None


def shown(request: ModelRequest[Any]) -> ModelRequest[Any]:
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


def next_move(state: Mapping[str, Any], attempts: list[Attempt]) -> tuple[MoveKind, int | None]:
    """The move and parent of the answer just given: what was chosen for it, else the chain's."""
    chosen = state.get("refine_next")
    if chosen:
        return chosen[0], chosen[1]
    if not attempts:
        return "sample", None
    return "refine", attempts[-1].index


def move(state: Mapping[str, Any], choice: Choice, attempts: list[Attempt]) -> dict[str, Any]:
    """The update that sends the agent back to its model for the chosen move.

    Refining the latest answer continues the conversation with the feedback (what the
    chain strategy always does). A fresh sample hides this loop's turns so far from the
    model, which then answers the request as if first asked. Refining an earlier answer
    hides them too, and shows that answer with its feedback in one new message.
    """
    latest = attempts[-1]
    chosen: dict[str, Any] = {"refine_next": [choice.move, choice.parent]}
    if choice.parent == latest.index:
        return again(agent_feedback(latest.evaluation)) | chosen
    chosen["refine_hidden_to"] = len(state["messages"])
    if choice.parent is None:
        feedback = best_feedback(attempts) if choice.move == "guided" else ""
        if feedback.strip():  # a fresh answer told what the best one's feedback asked
            return again(guided_request(feedback)) | chosen
        return {"refine_phase": "running", "jump_to": "model"} | chosen
    refined = next(a for a in attempts if a.index == choice.parent)
    return again(agent_refine_earlier(refined)) | chosen


def clean_turns(state: Mapping[str, Any], best: str) -> list[AnyMessage]:
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


def again(text: str) -> dict[str, Any]:
    """The update that sends the agent back to its model with one new human turn."""
    return {"messages": [HumanMessage(text)], "refine_phase": "running", "jump_to": "model"}


class Turn(NamedTuple):
    """A final answer to evaluate: its text and reasoning (split once), the loop's view."""

    answer: str
    reasoning: str | None
    view: dict[str, Any]
    meter: BudgetMeter


class Edit(NamedTuple):
    """A reviewer's edit, still to evaluate: the loop's view, the attempt, the meter."""

    view: dict[str, Any]
    attempt: Attempt
    meter: BudgetMeter


class AgentLoop:
    """The loop's decisions inside an agent, without I/O.

    What `RefineMiddleware`'s hooks do between their calls (the evaluator's and the
    store's), sync and async alike.

    Args:
        options: The loop's options, validated once.
        evaluator: The evaluator of every final answer.
        review: The human review, or None.
        keep_evaluation_turns: Keep the answers and feedback turns in the conversation.
    """

    def __init__(
        self,
        options: LoopOptions,
        evaluator: BaseEvaluator,
        review: ReviewNode | None,
        keep_evaluation_turns: bool,
    ) -> None:
        self.options = options
        self.evaluator = evaluator
        self.review = review
        self.keep_evaluation_turns = keep_evaluation_turns

    def start(self, state: Mapping[str, Any]) -> dict[str, Any]:
        """A new loop for this run: the task is the last human message."""
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

    def budget_stop(self, state: Mapping[str, Any]) -> dict[str, Any] | None:
        """The update that ends the loop before a model call past the budget, else None."""
        budget = self.options.budget
        if budget is None or budget.exceeded(spent(state)) is None:
            return None
        return {
            "refine_stop_reason": "budget_exhausted",
            "refine_phase": "deciding",
            "jump_to": "end",
        }

    def meter(
        self, state: Mapping[str, Any], carried: Usage | None = None, what: str = "agent"
    ) -> BudgetMeter:
        """The one place that counts: a meter over what the loop has spent so far.

        Both the agent's model calls and the judge's go through it; it refuses a call
        (`BudgetStop`) once a limit is reached. `carried` is what failed calls of the same
        model step spent (a retry middleware calls the model again within the step).
        """
        # In an agent run inside a loop's step, that step's meter is its parent (a nested
        # loop spends from the outer budget too).
        return BudgetMeter(
            self.options.budget, spent(state), carried=carried, what=what, parent=active_meter()
        )

    def turn(self, state: Mapping[str, Any]) -> Turn | None:
        """The agent's final answer to evaluate, or None if it is not one (tool calls)."""
        if state.get("refine_phase", "running") != "running" or not state["messages"]:
            return None
        last = state["messages"][-1]
        if not isinstance(last, AIMessage) or last.tool_calls:
            return None
        answer, reasoning = split_reasoning(last)  # the answer only is ever judged
        return Turn(answer, reasoning, loop_view(state), self.meter(state, what="evaluator"))

    def pending(self, state: Mapping[str, Any], turn: Turn) -> Attempt:
        """The answer as the loop's next attempt, before its evaluation.

        Its usage is what the agent spent on it since the last attempt (its model and
        tool turns); the round adds the evaluation's.
        """
        attempts: list[Attempt] = list(turn.view["attempts"])
        move, parent = next_move(state, attempts)
        return Attempt(
            index=len(attempts),
            response=turn.answer,
            reasoning=turn.reasoning,
            instruction=state.get("refine_instruction"),
            parent=parent,
            move=move,
            model=state.get("refine_model"),
            usage=minus(turn.meter.spent_before, sum((a.usage for a in attempts), Usage())),
        )

    def record_key(self, state: Mapping[str, Any]) -> str | None:
        """The strategy record's key: `record_key`, else the agent's model and the evaluator."""
        return compose_key(state.get("refine_model"), self.evaluator, self.options.record_key)

    def after_round(
        self, state: Mapping[str, Any], outcome: Outcome, meter: BudgetMeter
    ) -> dict[str, Any]:
        """The agent's update after a round (see `_round.evaluate_round`).

        The loop goes on: back to the model with the chosen move. It stops, or an
        every-round review follows: the agent ends its turn and `after_agent` decides.
        """
        # Plain data in the agent's state: its checkpoints never hold the loop's models.
        update: dict[str, Any] = {
            "refine_attempts": to_plain(outcome.attempts),
            "refine_usage": to_plain(meter.spent_before + meter.delta()),
            "refine_instruction": None,
            "refine_next": None,
        }
        if outcome.choice is not None and (self.review is None or self.review.mode == "final"):
            return update | move(state, outcome.choice, outcome.attempts)
        return update | {"refine_stop_reason": outcome.stop_reason, "refine_phase": "deciding"}

    def review_outcome(self, state: Mapping[str, Any]) -> dict[str, Any] | Edit | None:
        """The review and its decision: an update, or an edit still to evaluate."""
        if state.get("refine_phase") != "deciding":
            return None  # the agent ended for another reason (e.g. another middleware)
        view = loop_view(state)
        stop_reason: StopReason | None = view["stop_reason"]
        response: str | None = None
        raising = stop_reason == "budget_exhausted" and self.options.on_budget_exhausted == "raise"
        if self.review is not None and not raising:
            decision = ask_review(self.review.payload(view), self.review.apply, self.review.actions)
            if decision.get("reviewer_feedback"):
                feedback = decision["reviewer_feedback"]
                return again(agent_review(feedback)) | {
                    "refine_stop_reason": None,
                    "refine_instruction": feedback,
                }
            if decision.get("pending") is not None:  # an edit: evaluated, as in the graph
                attempt = Attempt.model_validate(decision["pending"])
                return Edit(view, attempt, self.meter(state, what="evaluator"))
            stop_reason = decision.get("stop_reason", stop_reason)
            response = decision.get("response")
        if stop_reason is None:  # an every-round review said "continue" mid-loop
            return again(agent_feedback(view["attempts"][-1].evaluation))
        return self.finish(state, view | {"stop_reason": stop_reason, "response": response})

    def end_with_edit(
        self, state: Mapping[str, Any], edit: Edit, outcome: Outcome
    ) -> dict[str, Any]:
        """End the loop with the reviewer's text, evaluated (unscored past the budget)."""
        spent = edit.meter.spent_before + edit.meter.delta()
        view = edit.view | {
            "attempts": outcome.attempts,
            "usage": spent,
            "stop_reason": outcome.stop_reason,
            "response": edit.attempt.response,
        }
        return self.finish(state, view) | {
            "refine_attempts": to_plain(outcome.attempts),
            "refine_usage": to_plain(spent),
        }

    def finish(self, state: Mapping[str, Any], view: dict[str, Any]) -> dict[str, Any]:
        result = RefineResult.from_state(view)
        if result.stop_reason == "budget_exhausted" and self.options.on_budget_exhausted == "raise":
            raise BudgetExhaustedError(
                f"budget exhausted after {len(result.attempts)} answer(s); best score "
                f"{result.score}; the best result so far is in this error's .result",
                result,
            )
        emit(stop_event(LOOP_NAME, result))
        update: dict[str, Any] = {
            "refine_stop_reason": result.stop_reason,
            "refine_response": result.value,
            "refine_phase": "done",
        }
        if not self.keep_evaluation_turns:
            return update | {"messages": clean_turns(state, result.value)}
        last = state["messages"][-1] if state["messages"] else None
        already_last = (
            isinstance(last, AIMessage) and not last.tool_calls and last.text == result.value
        )
        if result.value and not already_last:
            update["messages"] = [AIMessage(result.value)]
        return update

    def result(self, state: Mapping[str, Any]) -> RefineResult:
        """The loop's outcome from the agent's state."""
        return RefineResult.from_state(loop_view(state))


def resolve_evaluator(
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

"""The loop inside an agent, without I/O: `RefineMiddleware`'s state keys and updates.

The decisions are the graph's: the round (`_round.evaluate_round`) and what comes
before and after it (`_decisions`: the next answer, a review's meaning, the end), each
handed the agent's state as the graph's are (`agent_view`, `loop_view`). `AgentLoop`
writes them as the agent's state updates: the attempt an answer becomes, the agent's
next turn (`onward`: which messages the model is shown, see `_transcript`), the review
and the end. The hooks themselves are in `_middleware`, the loop's calls (judgments,
comparisons, the record) in `_agent_calls`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, NamedTuple, NotRequired

from langchain.agents.middleware import (
    AgentState,
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
)
from langchain.agents.middleware.types import OmitFromInput, PrivateStateAttr
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage
from langgraph.graph.ui import AnyUIMessage, ui_message_reducer
from langgraph.types import Command

from langgraph_refine._agents._progress import ProgressUI
from langgraph_refine._agents._transcript import (
    Turn,
    after_request,
    answer_turn,
    conversation,
    draft_ids,
    hidden_from,
    is_host,
    model_view,
    prompt_turn,
    woven,
)
from langgraph_refine._calls._budget import BudgetMeter
from langgraph_refine._decisions._edits import read_edits
from langgraph_refine._decisions._end import (
    by_score_note,
    compares_at_end,
    end_of_run,
    regenerates,
)
from langgraph_refine._decisions._memory import MemoryPolicy
from langgraph_refine._decisions._next import next_attempt
from langgraph_refine._decisions._options import LoopOptions
from langgraph_refine._decisions._prompts import (
    EDIT_INSTRUCTIONS,
    agent_feedback,
    agent_refine_earlier,
    agent_review,
    clean_reply,
    guided_request,
    scaffolding,
)
from langgraph_refine._decisions._reviewed import ReviewAnswer, review_due
from langgraph_refine._decisions._round import Outcome
from langgraph_refine._decisions._view import LoopView
from langgraph_refine._events import ReviewPayload
from langgraph_refine._kinds import kind_of, model_name
from langgraph_refine._loop._resolve import LoopModels, chat_rungs, loop_models
from langgraph_refine._loop._review import ReviewNode
from langgraph_refine._loop._select import (
    Comparer,
    Selection,
    calls_left,
    selection_for,
)
from langgraph_refine._loop._thread import run_of
from langgraph_refine._reasoning import split_reasoning
from langgraph_refine._records._record import compose_key
from langgraph_refine._result import RefineResult
from langgraph_refine._state import (
    Attempt,
    ComparerLike,
    PlainDataChannel,
    StopReason,
    Usage,
    keep_latest,
    revive_state,
    to_plain,
)
from langgraph_refine._stop_rules import BUDGET_STOP
from langgraph_refine._typed import Reply
from langgraph_refine.evaluators._base import BaseEvaluator, EvaluatorLike

LOOP_NAME = "refine"
"""The loop's name in stream events and review payloads."""

Phase = Literal["running", "deciding", "judging", "done"]


class RefineAgentState(AgentState[Any]):
    """The agent state keys `RefineMiddleware` adds (all prefixed `refine_`).

    Attributes:
        criteria: What this request's answer must satisfy (a string or a list of
            strings), beside `messages` in the input: added to every LLM judge's criteria.
        refine_task: The request being answered: the last human message of the run's input.
        refine_attempts: Every final answer of this run, in order, with its evaluation
            (models in the state, plain data in checkpoints: see `PlainDataChannel`).
        refine_usage: Model calls (the agent's and the judge's), tokens and seconds spent.
        refine_stop_reason: Why the loop stopped (None while it runs).
        refine_response: The loop's answer, set when it stops.
        refine_selection: With `select="pairwise"`, the selection's record (as the
            graph's `selection`: `metadata["selection"]` of the result).
        refine_phase: `running`, `deciding` (an answer awaits review or the end),
            `judging` (the model's answer, a reviewer's edit or a pairwise end awaits
            the next model step, where the run's judge and comparer are known), `done`.
        refine_judging: What that model step is to judge: the answer in `refine_draft`
            (`{"draft": True}`), a reviewer's edit (`{"edit": attempt}`), or the end's
            comparisons (its stop reason and response).
        refine_route: Where the agent goes after a model step: `model` (to judge the
            answer, or for the next answer) or `end`.
        refine_instruction: A reviewer's request, recorded on the next attempt.
        refine_base: How many messages came before this run's loop (its conversation).
        refine_turns: The loop's own turns (answers, feedback, requests), kept beside
            the conversation and woven into the model's view (see `_transcript`).
        refine_hidden_to: After a fresh start (explore): the turns and this run's
            messages the model no longer sees (`[turns, last message id]`); None: it
            sees them all.
        refine_draft: The answer the model just gave, awaiting its evaluation (an
            `AIMessage` as plain data).
        refine_next: The next answer's move and the attempt it refines (`[move, parent]`).
        refine_rung: With a ladder (`models`), the rung of the next answer's model calls.
        refine_loop_id: Identifies this run's loop in the strategy record.
        refine_model: The model of the latest call, as the record and `Attempt.model` name it.
        refine_ended_in: The run (`execution_info.run_id`) that ended the loop (or handed
            its end to the model step); a later run continuing from there regenerates
            the answer (`regenerating`).
    """

    criteria: NotRequired[str | list[str] | None]
    refine_task: NotRequired[Annotated[str, OmitFromInput]]
    refine_attempts: NotRequired[
        Annotated[list[Attempt], OmitFromInput, PlainDataChannel(list[Attempt], keep_latest)]
    ]
    refine_usage: NotRequired[Annotated[Usage, OmitFromInput, PlainDataChannel(Usage, keep_latest)]]
    refine_stop_reason: NotRequired[Annotated[StopReason | None, OmitFromInput]]
    refine_response: NotRequired[Annotated[str | None, OmitFromInput]]
    refine_selection: NotRequired[Annotated[dict[str, Any] | None, OmitFromInput]]
    refine_phase: NotRequired[Annotated[Phase, PrivateStateAttr]]
    refine_judging: NotRequired[Annotated[dict[str, Any] | None, PrivateStateAttr]]
    refine_route: NotRequired[Annotated[str | None, PrivateStateAttr]]
    refine_instruction: NotRequired[Annotated[str | None, PrivateStateAttr]]
    refine_base: NotRequired[Annotated[int, PrivateStateAttr]]
    refine_turns: NotRequired[Annotated[list[list[Any]], PrivateStateAttr]]
    refine_hidden_to: NotRequired[Annotated[list[Any] | None, PrivateStateAttr]]
    refine_draft: NotRequired[Annotated[dict[str, Any] | None, PrivateStateAttr]]
    refine_next: NotRequired[Annotated[list[Any] | None, PrivateStateAttr]]
    refine_rung: NotRequired[Annotated[int, PrivateStateAttr]]
    refine_loop_id: NotRequired[Annotated[str, PrivateStateAttr]]
    refine_model: NotRequired[Annotated[str | None, PrivateStateAttr]]
    refine_ended_in: NotRequired[Annotated[str | None, PrivateStateAttr]]


class RefineProgressState(RefineAgentState):
    """The agent's state with a chat's UI messages (`RefineMiddleware(progress_ui=...)`).

    Attributes:
        ui: LangGraph's generative-UI messages (`langgraph.graph.ui`), merged by id with
            `ui_message_reducer`: the progress card of each run of the loop.
    """

    ui: NotRequired[Annotated[list[AnyUIMessage], OmitFromInput, ui_message_reducer]]


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
                "messages": conversation(state.get("messages") or []),
                "loop_id": state.get("refine_loop_id"),
                "selection": state.get("refine_selection"),
                "criteria": state.get("criteria"),
            }
        )
    )


def agent_view(state: Mapping[str, Any]) -> LoopView:
    """The agent's state as the decisions around the round read it (the graph's `graph_view`).

    `refine_next` holds the move and parent chosen for the next answer (by the round or a
    reviewer); without one, the next answer refines the latest, as in the graph.
    """
    attempts = tuple(revive_state({"attempts": state.get("refine_attempts") or []})["attempts"])
    chosen = state.get("refine_next")
    latest = attempts[-1].index if attempts else None
    return LoopView(
        task=state.get("refine_task", ""),
        attempts=attempts,
        parent=chosen[1] if chosen else latest,
        move=chosen[0] if chosen else None,
        request=state.get("refine_instruction"),
        stop_reason=state.get("refine_stop_reason"),
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
    response: ModelResponse[Any],
    meter: BudgetMeter,
    model: str | None,
    shown: Callable[[], dict[str, Any]] | None = None,
) -> ExtendedModelResponse[Any]:
    """The model's response, counted: a final answer is kept aside as the draft.

    The answer (an AI message without tool calls) does not join the conversation: it
    waits in `refine_draft` for its evaluation in the next model step, and the
    conversation gets the best answer once, when the loop ends. Tool calls join it as
    usual. `shown` gives what a chat is shown of a draft awaiting its judging (the
    progress card's update, see `AgentLoop.drafted`).
    """
    spent = meter.spent_before + meter.delta()
    update: dict[str, Any] = {"refine_usage": to_plain(spent)}
    if model is not None:
        update["refine_model"] = model
    messages = list(response.result)
    last = messages[-1] if messages else None
    if isinstance(last, AIMessage) and not last.tool_calls:
        # Plain data: a message anywhere in a node's update reaches `messages` streams.
        # The answer is judged in a model step of its own (`judge_in_model_step`): the
        # checkpoint between them means a resumed run (after a kill, or a pause inside
        # the judge) judges this answer again without asking the model for a new one.
        update |= {"refine_draft": last.model_dump(), **judge_in_model_step({"draft": True})}
        update["refine_route"] = update.pop("jump_to")
        if shown is not None:
            update |= shown()
        response = ModelResponse(
            result=messages[:-1], structured_response=response.structured_response
        )
    return ExtendedModelResponse(model_response=response, command=Command(update=update))


def routed(update: dict[str, Any]) -> ExtendedModelResponse[Any]:
    """The model step that judged an answer: its round's update (`refine_route` says where to)."""
    empty: ModelResponse[Any] = ModelResponse(result=[])
    return ExtendedModelResponse(model_response=empty, command=Command(update=update))


def judged(update: dict[str, Any]) -> ExtendedModelResponse[Any]:
    """The model step that judged a reviewer's edit or made the end's comparisons: the end."""
    empty: ModelResponse[Any] = ModelResponse(result=[])
    done = update | {"refine_judging": None, "refine_route": "end"}
    return ExtendedModelResponse(model_response=empty, command=Command(update=done))


def carry(request: ModelRequest[Any], meter: BudgetMeter) -> Usage:
    """Keep what a failed call of `request` spent in the request's state, for its retry.

    A retry middleware (`ModelRetryMiddleware`) calls the model again with the same
    request within the model step; the retry's meter starts from `refine_usage`, so the
    failed call's usage is counted (and budgeted) with it. The step's own update, when
    the retry succeeds, writes the total.
    """
    state: dict[str, Any] = request.state  # type: ignore[assignment]  # the agent's own keys
    total = meter.spent_before + meter.delta()
    state["refine_usage"] = to_plain(total)
    return total


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
        messages = state.get("messages") or []
        found = None
        for message in messages[-2:]:
            found = self._spent.pop(message.id, None) or found
        return found


def refused(
    meter: BudgetMeter, stop_reason: StopReason = "budget_exhausted"
) -> ExtendedModelResponse[Any]:
    """The model call the budget refused (a limit reached since `before_model` checked).

    The agent ends its turn without an answer (`after_model` ends it); the loop stops
    with `stop_reason` (`model_error`: a failure a middleware turned into a reply) and
    its best answer.
    """
    update = {
        "refine_usage": to_plain(meter.spent_before + meter.delta()),
        "refine_stop_reason": stop_reason,
        "refine_phase": "deciding",
        "refine_route": "end",
    }
    empty: ModelResponse[Any] = ModelResponse(result=[])
    return ExtendedModelResponse(model_response=empty, command=Command(update=update))


def model_of(request: ModelRequest[Any]) -> str | None:
    """The agent's model as the record key names it (the hooks after the model cannot see it)."""
    model = getattr(request, "model", None)
    return model_name(model) if model is not None else None


def shown(request: ModelRequest[Any], memory: MemoryPolicy = "all") -> ModelRequest[Any]:
    """The request with the loop's turns woven in, as this round's move shows them."""
    turns = request.state.get("refine_turns")
    if not turns and not request.state.get("refine_hidden_to"):
        return request  # (a card's host comes after a turn: it is left out with them)
    return request.override(messages=model_view(request.state, request.messages, memory))


def onward(
    state: Mapping[str, Any], view: LoopView, turns: list[Turn], options: LoopOptions
) -> dict[str, Any]:
    """The update that sends the agent back to its model for the next answer.

    The answer is decided once (`_next.next_attempt`); this renders it as a turn.
    Refining the latest answer continues the conversation with its feedback (or the
    reviewer's request). A fresh answer hides this loop's turns so far from the model,
    which then answers the request as if first asked (a guided one told the best
    answer's feedback). Refining an earlier answer hides them too, and shows that answer
    with its feedback (and the reviewer's request) in one new turn.

    Args:
        state: The agent's state.
        view: The loop's state after the round (or the review), as the decisions read it.
        turns: The loop's turns so far, the latest answer's included.
        options: The loop's options.
    """
    upcoming = next_attempt(view, options)
    parent, request = upcoming.parent, upcoming.request
    closing = "" if upcoming.edited is None else "\n\n" + EDIT_INSTRUCTIONS
    asked = "" if request is None else agent_review(request)
    if parent is not None and view.latest is not None and parent.index == view.latest.index:
        return again(state, turns, (asked or agent_feedback(parent.evaluation)) + closing)
    hidden = {"refine_hidden_to": hidden_from(state, turns)}
    if parent is None:
        if upcoming.guidance.strip():  # a fresh answer told what the best one's feedback asked
            return again(state, turns, guided_request(upcoming.guidance)) | hidden
        return {"refine_turns": turns, "refine_phase": "running", "jump_to": "model"} | hidden
    earlier = agent_refine_earlier(parent) + ("\n\n" + asked if asked else "")
    return again(state, turns, earlier + closing) | hidden


def started(state: Mapping[str, Any]) -> dict[str, Any]:
    """A new loop for this run: the task is the last human message.

    A progress card's host left by a run that failed goes (see `_progress`).
    """
    messages = state["messages"]
    human = [m for m in messages if isinstance(m, HumanMessage)]
    left = [RemoveMessage(id=m.id) for m in messages if is_host(m) and m.id]
    return ({"messages": left} if left else {}) | {
        "refine_task": human[-1].text if human else "",
        "refine_attempts": [],
        "refine_usage": to_plain(Usage()),
        "refine_stop_reason": None,
        "refine_response": None,
        "refine_phase": "running",
        "refine_judging": None,
        "refine_route": None,
        "refine_instruction": None,
        "refine_base": len(messages) - len(left),
        "refine_turns": [],
        "refine_hidden_to": None,
        "refine_draft": None,
        "refine_next": None,
        "refine_rung": 0,
        "refine_loop_id": uuid.uuid4().hex,
        "refine_ended_in": None,
    }


def ended_in(runtime: Any) -> dict[str, Any]:
    """The update recording the run that ends the loop (see `regenerating`)."""
    return {"refine_ended_in": run_of(runtime)}


def regenerating(state: Mapping[str, Any], runtime: Any) -> bool:
    """Whether this run continues, from before the answer, a loop another run ended.

    The loop has ended when it awaits its end (`deciding`) or handed it to a model step
    (`judging` a reviewer's edit or the end's comparisons, not an answer); whether this
    run then answers again is `_end.regenerates` (a chat's Refresh).
    """
    phase, job = state.get("refine_phase"), state.get("refine_judging") or {}
    ended = phase == "deciding" or (phase == "judging" and not job.get("draft"))
    return ended and regenerates(state.get("refine_ended_in"), run_of(runtime))


def restarted(state: Mapping[str, Any], progress: ProgressUI | None) -> dict[str, Any]:
    """A regenerated answer (`regenerating`): the loop starts again on the same request.

    What the ended loop left after the user's request goes (its tool calls and results,
    its card, with `progress`): the model answers as if first asked, and every call of
    the new loop is paid.
    """
    messages = list(state.get("messages") or [])
    left = after_request(messages)
    if progress is not None:
        progress.withdrawn(state)
    fresh = started({**state, "messages": messages[: len(messages) - len(left)]})
    gone = [RemoveMessage(id=m.id) for m in left if m.id]
    return fresh | {"messages": [*gone, *fresh.get("messages", [])]}


def judge_in_model_step(job: dict[str, Any]) -> dict[str, Any]:
    """The update that hands `job` to the model step, where the run's judges are known."""
    return {"refine_judging": job, "refine_phase": "judging", "jump_to": "model"}


def again(state: Mapping[str, Any], turns: list[Turn], text: str) -> dict[str, Any]:
    """The update that sends the agent back to its model with one more loop turn."""
    return {
        "refine_turns": [*turns, prompt_turn(state, text)],
        "refine_phase": "running",
        "jump_to": "model",
    }


def best_message(state: Mapping[str, Any], result: RefineResult, drafts: bool) -> AIMessage:
    """The answer's message; with streamed drafts, under the id its draft streamed with.

    A chat client then keeps the draft it showed instead of showing the answer twice.
    """
    ids = draft_ids(state.get("refine_turns") or [])
    index = result.best_index
    if not drafts or index is None or index >= len(ids) or ids[index] is None:
        return AIMessage(result.value)
    if result.attempts[index].response != result.value:  # a reviewer's text
        return AIMessage(result.value)
    return AIMessage(result.value, id=ids[index])


def copied_lines(state: Mapping[str, Any], attempts: Sequence[Attempt]) -> frozenset[str]:
    """The lines of the loop's own turns an answer copied back would carry (`scaffolding`)."""
    turns = [str(t[2]) for t in state.get("refine_turns") or [] if t[1] == "human"]
    return scaffolding(
        turns, [str(state.get("refine_task") or ""), *(a.response for a in attempts)]
    )


def draft_metadata(state: Mapping[str, Any]) -> dict[str, Any]:
    """What the agent's model calls carry: the attempt they draft, for a chat UI."""
    return {"refine_attempt": len(state.get("refine_attempts") or [])}


class Answer(NamedTuple):
    """A final answer to evaluate: its text and reasoning (split once), the loop's view."""

    answer: str
    reasoning: str | None
    view: dict[str, Any]
    draft: AIMessage


class Finish(NamedTuple):
    """The end, after a pairwise selection still to make (its comparisons are calls)."""

    view: dict[str, Any]
    selection: Selection


class Edit(NamedTuple):
    """A reviewer's edit, still to evaluate: the loop's view and the attempt."""

    view: dict[str, Any]
    attempt: Attempt


@dataclass(frozen=True)
class AgentLoop:
    """What `RefineMiddleware`'s hooks write around the round, sync and async alike.

    The decisions are the graph's (`_round.evaluate_round`, `_decisions`); this turns
    them into the agent's state updates. Frozen: it holds the middleware's
    configuration only, and nothing a run resolves is kept on it.

    Attributes:
        options: The loop's options, validated once.
        evaluator: The evaluator of every final answer (None: the agent's own model,
            known when it runs, see `_agent_calls.judges_for`).
        review: The human review, or None.
        keep_evaluation_turns: Keep the answers and feedback turns in the conversation.
        ladder: With `models`, the rungs' model names, cheapest first.
        comparer: Who compares answers with `select="pairwise"` (None: the agent's own
            model, known when it runs).
        progress: Shows the loop's progress in a chat (a generative-UI card), or None.
    """

    options: LoopOptions
    evaluator: BaseEvaluator | None
    review: ReviewNode | None
    keep_evaluation_turns: bool
    ladder: Sequence[str] = ()
    comparer: Comparer | None = None
    progress: ProgressUI | None = None

    def budget_stop(self, state: Mapping[str, Any]) -> dict[str, Any] | None:
        """The update that ends the loop before a model call past the budget, else None."""
        budget = self.options.budget
        if state.get("refine_phase") == "judging":
            return None  # no answer is asked: each judgment is metered and refused alone
        if budget is None or budget.exceeded(spent(state), judge_calls(self.evaluator)) is None:
            return None
        return {
            "refine_stop_reason": "budget_exhausted",
            "refine_phase": "deciding",
            "jump_to": "end",
        }

    def drafted(
        self,
        state: Mapping[str, Any],
        response: ModelResponse[Any],
        meter: BudgetMeter,
        model: str | None,
    ) -> ExtendedModelResponse[Any]:
        """The model step's reply, counted (`counted`); a progress card says "judging"."""
        progress = self.progress
        if progress is None:
            return counted(response, meter, model)
        view = agent_view(state)  # until the verdict, the card shows the round being judged
        return counted(
            response, meter, model, lambda: progress.judging(state, view.attempts, view.move)
        )

    def turn(self, state: Mapping[str, Any]) -> Answer | None:
        """The agent's final answer to evaluate, or None if there is none (tool calls)."""
        data = state.get("refine_draft")
        if state.get("refine_phase") != "judging" or data is None:
            return None
        draft = AIMessage.model_validate(data)
        answer, reasoning = split_reasoning(draft)  # the answer only is ever judged
        return Answer(answer, reasoning, loop_view(state), draft)

    def pending(self, state: Mapping[str, Any], turn: Answer) -> Attempt:
        """The answer as the loop's next attempt, before its evaluation.

        Its usage is what the agent spent on it since the last attempt (its model and
        tool turns); the round adds the evaluation's.
        """
        attempts: list[Attempt] = list(turn.view["attempts"])
        upcoming = next_attempt(agent_view(state), self.options)
        reply = Reply(turn.answer, reasoning=turn.reasoning)
        if upcoming.edited is not None:  # the answer was asked as edits to it
            reply = read_edits(turn.draft, upcoming.edited, None, lambda _: reply)
        reply = clean_reply(reply, copied_lines(state, attempts))
        return upcoming.attempt(
            reply,
            model=state.get("refine_model"),
            rung=state.get("refine_rung", 0) if self.ladder else None,
            usage=minus(spent(state), sum((a.usage for a in attempts), Usage())),
        )

    def record_key(self, state: Mapping[str, Any], evaluator: BaseEvaluator) -> str | None:
        """The strategy record's key: `record_key`, else the models and the run's evaluator."""
        model = ">".join(self.ladder) or state.get("refine_model")
        return compose_key(model, evaluator, self.options.record_key)

    def after_round(
        self, state: Mapping[str, Any], turn: Answer, outcome: Outcome, usage: Usage
    ) -> dict[str, Any]:
        """The agent's update after a round (see `_round.evaluate_round`).

        The loop goes on: back to the model with the chosen move. It stops, or an
        every-round review follows: the agent ends its turn and `after_agent` decides.
        The round runs in the model step, so where the agent goes is `refine_route`,
        which `after_model` follows.
        """
        turns = [*(state.get("refine_turns") or []), answer_turn(state, turn.draft)]
        # Plain data in the agent's state: its checkpoints never hold the loop's models.
        choice = outcome.choice
        update: dict[str, Any] = {
            "refine_attempts": to_plain(outcome.attempts),
            "refine_usage": to_plain(usage),
            "refine_instruction": None,
            "refine_judging": None,
            # Kept across an every-round review: its "continue" lets this choice stand.
            "refine_next": None if choice is None else [choice.move, choice.parent],
            "refine_draft": None,
        }
        if "rung" in outcome.update:
            update["refine_rung"] = outcome.update["rung"]
        if choice is not None and (self.review is None or self.review.mode == "final"):
            view = agent_view({**state, **update})
            update |= onward(state, view, turns, self.options)
        else:
            update |= {
                "refine_turns": turns,
                "refine_stop_reason": outcome.stop_reason,
                "refine_phase": "deciding",
                "jump_to": "end",
            }
        update["refine_route"] = update.pop("jump_to")
        if self.progress is not None:
            reviewing = (  # a person answers before the loop goes on or ends
                self.review is not None
                and update["refine_phase"] == "deciding"
                and review_due(outcome.stop_reason, self.options.on_budget_exhausted)
            )
            update |= self.progress.after_round(state, outcome, reviewing)
        return update

    def review_asked(self, state: Mapping[str, Any]) -> ReviewPayload | None:
        """The payload a reviewer is shown now, or None when no review is due."""
        if state.get("refine_phase") != "deciding" or self.review is None:
            return None
        view = loop_view(state)
        if not review_due(view["stop_reason"], self.options.on_budget_exhausted):
            return None
        return self.review.payload(view)

    def review_outcome(
        self, state: Mapping[str, Any], answer: ReviewAnswer | None
    ) -> dict[str, Any] | None:
        """The review's decision (`answer`, None without a review), as the agent's update.

        A reviewer's edit and a pairwise end need the run's judge or comparer, which the
        model step knows: they are handed to it (`refine_judging`, see `judging`).
        """
        if state.get("refine_phase") != "deciding":
            return None  # the agent ended for another reason (e.g. another middleware)
        view = loop_view(state)
        stop_reason: StopReason | None = view["stop_reason"]
        response: str | None = None
        turns: list[Turn] = list(state.get("refine_turns") or [])
        if answer is not None:
            if answer.edit is not None:  # evaluated, as in the graph
                return judge_in_model_step({"edit": to_plain(answer.edit)})
            if answer.request is not None:  # one more answer, refining the reviewed one
                chosen = {
                    "refine_next": ["revise", answer.parent],
                    "refine_instruction": answer.request,
                    "refine_stop_reason": None,
                }
                return chosen | onward(state, agent_view({**state, **chosen}), turns, self.options)
            stop_reason, response = answer.stop_reason, answer.response
        if stop_reason is None:  # an every-round review said "continue" mid-loop
            return onward(state, agent_view(state), turns, self.options)
        ended = {"stop_reason": stop_reason, "response": response}
        if stop_reason == BUDGET_STOP and self.options.on_budget_exhausted == "raise":
            end_of_run(view | ended, self.options)  # raises before any comparison is paid
        if compares_at_end(self.options.select, stop_reason):  # the model step compares
            return judge_in_model_step(ended)
        return self.finish(state, view | ended)

    def judging(
        self, state: Mapping[str, Any], comparer: Comparer
    ) -> Answer | Edit | Finish | dict[str, Any]:
        """What a model step without a model call judges (see `judge_in_model_step`).

        Returns:
            The answer the model just gave, to judge (its round); a reviewer's edit to
            evaluate; a pairwise selection to make; or the end's update when the
            selection is made by score.
        """
        job = dict(state.get("refine_judging") or {})
        if job.get("draft"):
            answer = self.turn(state)
            if answer is not None:
                return answer
            return {"refine_judging": None, "refine_phase": "running", "refine_route": "model"}
        view = loop_view(state)
        if "edit" in job:
            return Edit(view, Attempt.model_validate(job["edit"]))
        view |= job
        selection = selection_for(
            self.options, view["stop_reason"], view["task"], view["attempts"], comparer
        )
        if selection is None:
            return self.finish(state, view)
        budget_note = selection.budget_note(calls_left(self.options.budget, spent(state)))
        note = by_score_note(view["stop_reason"], budget_note)
        if note is not None:  # the budget cannot pay for every comparison: by score
            return self.finish(state, view | {"selection": selection.record(note=note)})
        return Finish(view, selection)

    def selected(
        self, state: Mapping[str, Any], end: Finish, record: dict[str, Any], comparing: Usage
    ) -> dict[str, Any]:
        """The end after the comparisons: their record and what they spent (`comparing`)."""
        total = spent(state) + comparing
        view = end.view | {"selection": record, "usage": total}
        return self.finish(state, view) | {"refine_usage": to_plain(total)}

    def end_with_edit(
        self, state: Mapping[str, Any], edit: Edit, outcome: Outcome, total: Usage
    ) -> dict[str, Any]:
        """End the loop with the reviewer's text, evaluated (unscored past the budget)."""
        spent = total
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
        """End the loop: the best answer joins the conversation once, as its last message."""
        result = end_of_run(view, self.options).result  # the one end (its event: the hook's)
        update: dict[str, Any] = {
            "refine_stop_reason": result.stop_reason,
            "refine_response": result.value,
            "refine_phase": "done",
            "refine_draft": None,
            "refine_selection": view.get("selection"),
        }
        best = best_message(state, result, self.options.stream_drafts) if result.value else None
        if self.keep_evaluation_turns:
            messages = woven(state, best)
        else:
            messages = [best] if best is not None else []
        if self.progress is not None:  # the card moves under the answer
            messages = self.progress.at_end(state, result, messages, self.keep_evaluation_turns)
        return update | ({"messages": messages} if messages else {})

    def result(self, state: Mapping[str, Any]) -> RefineResult:
        """The loop's outcome from the agent's state."""
        return RefineResult.from_state(loop_view(state))


def judge_calls(evaluator: BaseEvaluator | None) -> int:
    """Model calls judging an answer takes (without an evaluator, the agent's model judges)."""
    return int(evaluator is None or evaluator.calls_model)


def failed_reply(
    state: Mapping[str, Any], runtime: Any, spent: Usage | None = None
) -> dict[str, Any] | None:
    """After a model step that ended with a reply the loop never saw: the loop's end.

    The loop takes every answer of the model aside (`counted`); a final message that
    reached the conversation anyway was made by a middleware around this one from a
    failed model call (`ModelRetryMiddleware(on_failure="continue")` answers with the
    error's text). It is never an attempt, judged or fed back: the loop stops
    (`model_error`) and ends as any stop does, its best answer the conversation's last
    message (the failure's message goes, unless there is no answer to replace it). `spent`
    is the loop's usage the failed step reached (its failed calls included).
    """
    if state.get("refine_phase") != "running":
        return None
    messages = state.get("messages") or []
    last = messages[-1] if messages else None
    if not isinstance(last, AIMessage) or last.tool_calls:
        return None
    gone = (
        {"messages": [RemoveMessage(id=last.id)]}
        if last.id and state.get("refine_attempts")
        else {}
    )
    return (
        gone
        | ended_in(runtime)
        | ({"refine_usage": to_plain(spent)} if spent is not None else {})
        | {
            "refine_stop_reason": "model_error",
            "refine_phase": "deciding",
            "jump_to": "end",
        }
    )


def agent_models(
    models: Sequence[BaseChatModel | str] | None,
    evaluator: EvaluatorLike,
    judge_model: BaseChatModel | str | None,
    comparer: ComparerLike,
) -> tuple[list[BaseChatModel], LoopModels]:
    """The agent's ladder (cheapest first, model strings resolved) and its loop's models.

    Resolved as the graph's are (`loop_models`), except that the agent's own model,
    known when it runs, judges and compares when nothing else is named.

    Raises:
        ValueError: If `models` is not a non-empty list of chat models or model strings,
            or names one model twice; if both an evaluator and `judge_model` are given.
    """
    one = isinstance(models, str) or kind_of(models) in ("chat", "runnable")
    if models is not None and (one or not isinstance(models, Sequence) or not models):
        raise ValueError(
            f"models must be a non-empty list of chat models or 'provider:model' strings, "
            f"cheapest first, got {models!r}"
        )
    resolved = loop_models(
        list(models) if models is not None else None,
        evaluator,
        judge_model=judge_model,
        comparer=comparer,
        own_model=True,
        option="models",
    )
    return chat_rungs(resolved.rungs, "models"), resolved

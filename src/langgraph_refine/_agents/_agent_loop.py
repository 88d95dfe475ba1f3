"""The loop inside an agent, without I/O: what each of `RefineMiddleware`'s steps writes.

The decisions are the graph's: the round (`_round.evaluate_round`), what comes before
and after it (`_decisions`: the next answer, a review's meaning) and the end
(`_end.end_flow`), each handed the agent's state as the graph's are (`agent_view`,
`loop_view`). `AgentLoop` writes them as the agent's state updates: the loop's record
(`_agent_state.LoopState`) with its next job, the attempt an answer becomes, the agent's
next turn (`onward`: which messages the model is shown, see `_transcript`) and the end.
A progress card to show comes back beside an update (`_progress.Card`); the hooks in
`_middleware` show it. The loop's calls are in `_agent_calls`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from langchain.agents.middleware import ExtendedModelResponse, ModelRequest, ModelResponse
from langchain_core.messages import AIMessage, RemoveMessage
from langgraph.types import Command

from langgraph_refine._agents._agent_state import (
    Answering,
    Comparing,
    Deciding,
    Done,
    JudgingAnswer,
    JudgingEdit,
    LoopState,
    NextMove,
    agent_view,
    conversation,
    is_host,
    loop_state,
    loop_view,
    shown_drafts,
    started,
)
from langgraph_refine._agents._progress import Card, ProgressUI
from langgraph_refine._agents._transcript import (
    after_request,
    answer_turn,
    best_message,
    onward,
    woven,
)
from langgraph_refine._calls._budget import BudgetMeter
from langgraph_refine._decisions._end import Ended, regenerates
from langgraph_refine._decisions._next import next_attempt
from langgraph_refine._decisions._options import LoopOptions
from langgraph_refine._decisions._prompts import scaffolding
from langgraph_refine._decisions._reviewed import ReviewAnswer, review_due
from langgraph_refine._decisions._round import Outcome
from langgraph_refine._decisions._view import LoopView
from langgraph_refine._events import ReviewPayload
from langgraph_refine._kinds import model_name
from langgraph_refine._loop._review import ReviewNode
from langgraph_refine._reasoning import split_reasoning
from langgraph_refine._records._record import compose_key
from langgraph_refine._state import Attempt, StopReason, Usage
from langgraph_refine._stop_rules import BUDGET_STOP
from langgraph_refine._typed import Reply
from langgraph_refine.evaluators._base import BaseEvaluator

LOOP_NAME = "refine"
"""The loop's name in stream events and review payloads."""

Written = tuple[dict[str, Any], Card | None]
"""A step's state update and the progress card it shows (None: none)."""


class Answer(NamedTuple):
    """A final answer to evaluate: its text and reasoning (split once), its message."""

    answer: str
    reasoning: str | None
    draft: AIMessage


def minus(total: Usage, earlier: Usage) -> Usage:
    """What `total` spent beyond `earlier`."""
    return Usage(
        calls=total.calls - earlier.calls,
        input_tokens=total.input_tokens - earlier.input_tokens,
        output_tokens=total.output_tokens - earlier.output_tokens,
        total_tokens=total.total_tokens - earlier.total_tokens,
        seconds=max(total.seconds - earlier.seconds, 0.0),
        cost=None if total.cost is None or earlier.cost is None else total.cost - earlier.cost,
    )


def counted_usage(request: ModelRequest[Any], meter: BudgetMeter) -> Usage:
    """Keep what the model step of `request` spent in its state, for a retry of it.

    A retry middleware (`ModelRetryMiddleware`) calls the model again with the same
    request within the model step; the retry's meter starts from the record's usage,
    so the failed call's usage is counted (and budgeted) with it. The step's own update,
    when the retry succeeds, writes the total.
    """
    state: dict[str, Any] = request.state  # type: ignore[assignment]  # the agent's own keys
    total = meter.total()
    state.update(loop_state(state).update(usage=total))
    return total


def ended_loop(record: LoopState, run: str | None, stop_reason: StopReason) -> dict[str, Any]:
    """The update that ends the loop's rounds: the review, then the end (`after_agent`)."""
    return {"refine_stop_reason": stop_reason, **record.update(job=Deciding(), ended_by=run)}


def refused(
    state: Mapping[str, Any],
    meter: BudgetMeter,
    run: str | None,
    stop_reason: StopReason = BUDGET_STOP,
) -> ExtendedModelResponse[Any]:
    """The model call the budget refused (its step's meter: as the graph's generate step).

    The agent ends its turn without an answer; the loop stops with `stop_reason`
    (`model_error`: a failure a middleware turned into a reply) and its best answer.
    """
    record = loop_state(state).with_(usage=meter.total())
    return judged(ended_loop(record, run, stop_reason))


def judged(update: dict[str, Any]) -> ExtendedModelResponse[Any]:
    """A model step that judged without asking the model: its update, no message."""
    return ExtendedModelResponse(
        model_response=ModelResponse(result=[]), command=Command(update=update)
    )


def model_of(request: ModelRequest[Any]) -> str | None:
    """The agent's model as the record key names it (the hooks after the model cannot see it)."""
    model = getattr(request, "model", None)
    return model_name(model) if model is not None else None


def regenerating(state: Mapping[str, Any], run: str | None) -> bool:
    """Whether this run continues, from before the answer, a loop another run ended.

    The loop has ended when it awaits its end (`Deciding`) or handed it to a model step
    (a reviewer's edit or the end's comparisons); whether this run then answers again is
    `_end.regenerates` (a chat's Refresh).
    """
    record = loop_state(state)
    ended = isinstance(record.job, Deciding | JudgingEdit | Comparing)
    return ended and regenerates(record.ended_by, run)


def restarted(state: Mapping[str, Any], progress: ProgressUI | None) -> Written:
    """A regenerated answer (`regenerating`): the loop starts again on the same request.

    What the ended loop left after the user's request goes (its tool calls and results,
    its card, with `progress`): the model answers as if first asked, and every call of
    the new loop is paid.
    """
    messages = list(state.get("messages") or [])
    left = after_request(messages)
    card = progress.withdrawn(state, loop_state(state)) if progress is not None else None
    fresh = started({**state, "messages": messages[: len(messages) - len(left)]})
    return fresh | {"messages": [RemoveMessage(id=m.id) for m in left if m.id]}, card


def fresh_start(state: Mapping[str, Any]) -> dict[str, Any]:
    """A new loop for this run (`started`); a card's host a failed run left goes."""
    left = [RemoveMessage(id=m.id) for m in state["messages"] if is_host(m) and m.id]
    return started(state, removed=len(left)) | ({"messages": left} if left else {})


@dataclass(frozen=True)
class AgentLoop:
    """What `RefineMiddleware`'s steps write around the round, sync and async alike.

    Frozen: it holds the middleware's configuration only, and nothing a run resolves
    is kept on it.

    Attributes:
        options: The loop's options, validated once.
        evaluator: The evaluator of every final answer (None: the agent's own model,
            known when it runs, see `_agent_calls.judge_for`).
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
    comparer: Any = None
    progress: ProgressUI | None = None

    @property
    def judge_calls(self) -> int:
        """Model calls judging an answer takes (without an evaluator, the agent's model judges)."""
        return int(self.evaluator is None or self.evaluator.calls_model)

    def drafted(
        self,
        state: Mapping[str, Any],
        response: ModelResponse[Any],
        meter: BudgetMeter,
        model: str | None,
    ) -> tuple[ExtendedModelResponse[Any], Card | None]:
        """The model step's reply, counted: a final answer is kept aside, to be judged.

        The answer (an AI message without tool calls) does not join the conversation: it
        waits in the record (`JudgingAnswer`) for its round in the next model step (the
        checkpoint between them means a resumed run judges this answer again without
        asking the model for a new one), and the conversation gets the best answer once,
        when the loop ends. Tool calls join it as usual. A progress card says "judging".
        With `stream_drafts` a chat keeps the answer it streamed in view until the next
        one replaces it (the loop's views leave it out: `shown_drafts`).
        """
        record = loop_state(state)
        fields: dict[str, Any] = {"usage": meter.total()}
        if model is not None:
            fields["model"] = model
        messages = list(response.result)
        last = messages[-1] if messages else None
        card = None
        update: dict[str, Any] = {}
        if isinstance(last, AIMessage) and not last.tool_calls:
            # Plain data: a message anywhere in a node's update reaches `messages` streams.
            fields["job"] = JudgingAnswer(draft=last.model_dump())
            if self.progress is not None:  # until the verdict, the card shows the round judged
                view = agent_view(state, record)
                card = self.progress.judging(state, record, view.attempts, view.move)
            if self.options.stream_drafts:  # this one replaces the draft shown before
                update["messages"] = replaced_drafts(state, record)
            else:
                messages = messages[:-1]
            response = ModelResponse(
                result=messages, structured_response=response.structured_response
            )
        update |= record.update(**fields)
        if card is not None:
            update |= card.placed
        return ExtendedModelResponse(model_response=response, command=Command(update=update)), card

    def answer(self, job: JudgingAnswer) -> Answer:
        """The agent's final answer the loop holds to judge."""
        draft = AIMessage.model_validate(job.draft)
        answer, reasoning = split_reasoning(draft)  # the answer only is ever judged
        return Answer(answer, reasoning, draft)

    def pending(self, state: Mapping[str, Any], record: LoopState, turn: Answer) -> Attempt:
        """The answer as the loop's next attempt, before its evaluation.

        Its usage is what the agent spent on it since the last attempt (its model and
        tool turns); the round adds the evaluation's.
        """
        view = agent_view(state, record)
        upcoming = next_attempt(view, self.options)
        copied = scaffolding(
            [t.text for t in record.turns if t.kind == "human"],
            [view.task, *(a.response for a in view.attempts)],
        )
        reply = Reply(turn.answer, reasoning=turn.reasoning)
        return upcoming.attempt(
            upcoming.read(turn.draft, lambda _: reply, None, copied),
            model=record.model,
            rung=record.rung if self.ladder else None,
            usage=minus(record.usage, sum((a.usage for a in view.attempts), Usage())),
        )

    def record_key(self, record: LoopState, evaluator: BaseEvaluator) -> str | None:
        """The strategy record's key: `record_key`, else the models and the run's evaluator."""
        model = ">".join(self.ladder) or record.model
        return compose_key(model, evaluator, self.options.record_key)

    def after_round(
        self,
        state: Mapping[str, Any],
        turn: Answer,
        outcome: Outcome,
        usage: Usage,
        run: str | None,
    ) -> Written:
        """The agent's update after a round (see `_round.evaluate_round`).

        The loop goes on: back to the model with the chosen move. It stops, or an
        every-round review follows: the agent ends its turn and `after_agent` decides.
        """
        record = loop_state(state)
        turns = (*record.turns, answer_turn(state, turn.draft))
        choice = outcome.choice
        fields: dict[str, Any] = {
            "usage": usage,
            "instruction": None,
            # Kept across an every-round review: its "continue" lets this choice stand.
            "next": None if choice is None else NextMove(move=choice.move, parent=choice.parent),
            "rung": outcome.update.get("rung", record.rung),
        }
        # Plain data in the agent's state: its checkpoints never hold the loop's models.
        update: dict[str, Any] = {"refine_attempts": [a.model_dump() for a in outcome.attempts]}
        goes_on = choice is not None and (self.review is None or self.review.mode == "final")
        if goes_on:
            record = record.with_(**fields)
            view = agent_view({**state, **update}, record)
            update |= record.update(**onward(state, view, turns, self.options))
        else:
            record = record.with_(**fields, turns=turns)
            update |= ended_loop(record, run, outcome.stop_reason)  # type: ignore[arg-type]
        card = None
        if self.progress is not None:
            reviewing = (  # a person answers before the loop goes on or ends
                not goes_on
                and self.review is not None
                and review_due(outcome.stop_reason, self.options.on_budget_exhausted)
            )
            card = self.progress.after_round(state, record, outcome, reviewing)
            update |= card.placed
        return update, card

    def review_asked(self, state: Mapping[str, Any]) -> ReviewPayload | None:
        """The payload a reviewer is shown now, or None when no review is due."""
        if self.review is None or not isinstance(loop_state(state).job, Deciding):
            return None
        view = loop_view(state)
        if not review_due(view["stop_reason"], self.options.on_budget_exhausted):
            return None
        return self.review.payload(view)

    def review_outcome(
        self, state: Mapping[str, Any], answer: ReviewAnswer | None, run: str | None
    ) -> dict[str, Any] | Comparing | None:
        """The review's decision (`answer`, None without a review), as the agent's update.

        Returns:
            The update that goes on or hands a reviewer's edit (or a pairwise end) to the
            model step, where the run's judge and comparer are known; `Comparing` with
            the end's stop reason when the end is to be made now; None when the agent
            ended for another reason (e.g. another middleware).
        """
        record = loop_state(state)
        if not isinstance(record.job, Deciding):
            return None
        stop_reason: StopReason | None = state.get("refine_stop_reason")
        response: str | None = None
        if answer is not None:
            if answer.edit is not None:  # evaluated, as in the graph
                return record.update(job=JudgingEdit(attempt=answer.edit), ended_by=run) | {
                    "jump_to": "model"
                }
            if answer.request is not None:  # one more answer, refining the reviewed one
                record = record.with_(
                    next=NextMove(move="revise", parent=answer.parent), instruction=answer.request
                )
                chosen = {"refine_stop_reason": None}
                view = agent_view({**state, **chosen}, record)
                return chosen | self._onward(state, record, view)
            stop_reason, response = answer.stop_reason, answer.response
        if stop_reason is None:  # an every-round review said "continue" mid-loop
            return self._onward(state, record, agent_view(state, record))
        return Comparing(stop_reason=stop_reason, response=response)

    def _onward(
        self, state: Mapping[str, Any], record: LoopState, view: LoopView
    ) -> dict[str, Any]:
        return record.update(**onward(state, view, record.turns, self.options)) | {
            "jump_to": "model"
        }

    def finish(
        self, state: Mapping[str, Any], ended: Ended, attempts: Sequence[Attempt] | None = None
    ) -> Written:
        """End the loop with the end's result: its answer joins the conversation once, last.

        Args:
            state: The agent's state.
            ended: The end's result and what it added (`_end.end_flow`).
            attempts: The attempts with a reviewer's edit evaluated, when the end has it.
        """
        running, result = loop_state(state), ended.result
        record = running.with_(
            job=Done(), usage=result.usage, selection=ended.selection or running.selection
        )
        update: dict[str, Any] = {
            "refine_stop_reason": result.stop_reason,
            "refine_response": result.value,
            **record.update(),
        }
        if attempts is not None:
            update["refine_attempts"] = [a.model_dump() for a in attempts]
        best = best_message(record, result, self.options.stream_drafts) if result.value else None
        if self.keep_evaluation_turns:
            messages = woven(state, running, best)
        else:  # drafts a chat was shown go, but the best's (the answer keeps its id)
            removed = replaced_drafts(state, running, keep=best.id if best else None)
            messages = [*removed, *([best] if best is not None else [])]
        card = None
        if self.progress is not None:  # the card moves under the answer
            messages, card = self.progress.at_end(
                state, record, result, messages, self.keep_evaluation_turns
            )
        return update | ({"messages": messages} if messages else {}), card


def replaced_drafts(
    state: Mapping[str, Any], record: LoopState, keep: str | None = None
) -> list[RemoveMessage]:
    """The removals of the drafts a chat was shown (`stream_drafts`), but `keep`'s."""
    shown = shown_drafts(record) - {keep}
    return [RemoveMessage(id=m.id) for m in state.get("messages") or [] if m.id in shown]


def failed_reply(
    state: Mapping[str, Any], run: str | None, spent: Usage | None = None
) -> dict[str, Any] | None:
    """After a model step that ended with a reply the loop never saw: the loop's end.

    The loop takes every answer of the model aside (`drafted`); a final message that
    reached the conversation anyway was made by a middleware around this one from a
    failed model call (`ModelRetryMiddleware(on_failure="continue")` answers with the
    error's text). It is never an attempt, judged or fed back: the loop stops
    (`model_error`) and ends as any stop does, its best answer the conversation's last
    message (the failure's message goes, unless there is no answer to replace it). `spent`
    is the loop's usage the failed step reached (its failed calls included).
    """
    record = loop_state(state)
    messages = conversation(state.get("messages") or [], record)
    last = messages[-1] if messages else None
    if not isinstance(record.job, Answering) or not isinstance(last, AIMessage) or last.tool_calls:
        return None
    gone = (
        {"messages": [RemoveMessage(id=last.id)]}
        if last.id and state.get("refine_attempts")
        else {}
    )
    if spent is not None:
        record = record.with_(usage=spent)
    return gone | ended_loop(record, run, "model_error") | {"jump_to": "end"}

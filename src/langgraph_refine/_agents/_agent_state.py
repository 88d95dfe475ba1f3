"""The agent's loop state: four result keys beside the conversation and one typed record.

`RefineMiddleware` keeps what a user reads of the loop in four keys (`refine_task`,
`refine_attempts`, `refine_stop_reason`, `refine_response`) and everything the loop
needs to go on in one record, `LoopState`, under `refine_state`: named fields,
and one tagged `job` that says what the loop does next (answer, judge an answer or an
edit, compare, await a review or the end, done). Where the agent goes after a model step
follows from the job (`_middleware.after_model`).

Threads written by the eighth round's release kept the record in nineteen keys
(positional lists, a phase, a judging dict, a route): `loop_state` reads them into a
`LoopState` when a thread has no record yet (`Release8Keys`, `migrated`), so a paused or
killed thread resumes where it was.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Annotated, Any, Literal, NotRequired

from langchain.agents.middleware import AgentState
from langchain.agents.middleware.types import OmitFromInput, PrivateStateAttr
from langchain_core.messages import AIMessage, AnyMessage
from langgraph.graph.ui import AnyUIMessage, ui_message_reducer
from pydantic import BaseModel, ConfigDict, Field
from typing_extensions import TypedDict

from langgraph_refine._decisions._view import LoopView, request_in
from langgraph_refine._state import (
    Attempt,
    MoveKind,
    PlainDataChannel,
    StopReason,
    Usage,
    dumped,
    keep_latest,
    revive_state,
)

KEY = "refine_state"
"""The private state key holding the loop's record (`LoopState`)."""

HOST_PREFIX = "refine-progress-"
"""How the id of a progress card, and of the empty AI message hosting it, starts (`_progress`)."""


def is_host(message: AnyMessage) -> bool:
    """Whether `message` is the empty AI message hosting a progress card (see `_progress`)."""
    return (
        isinstance(message, AIMessage)
        and not message.tool_calls
        and str(message.id or "").startswith(HOST_PREFIX)
    )


def conversation(messages: Any, record: LoopState | None = None) -> list[AnyMessage]:
    """The messages without progress cards' hosts and shown drafts: what the loop's views hold.

    With `stream_drafts`, a chat keeps each answer in view until the next one replaces
    it (`AgentLoop.drafted`); until the loop ends, those are the loop's, not the
    conversation's (`shown_drafts`).
    """
    drafts = shown_drafts(record) if record is not None else frozenset()
    return [m for m in messages if not is_host(m) and m.id not in drafts]


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True)


class Turn(_Record):
    """One of the loop's own turns, kept beside the conversation (see `_transcript`).

    Attributes:
        anchor: The id of the conversation message it follows.
        kind: `"ai"` (an answer) or `"human"` (a prompt of the loop's: feedback, a request).
        text: Its text.
        id: The id the answer had when the model gave it (a streamed draft and the final
            answer can share it), or None.
    """

    anchor: str | None
    kind: Literal["ai", "human"]
    text: str
    id: str | None = None


class Hidden(_Record):
    """After a fresh start: what the model no longer sees (the turns and messages so far).

    Attributes:
        turns: How many of the loop's turns are hidden.
        upto: The id of this run's last message then (it and those before it are hidden).
    """

    turns: int
    upto: str | None


class NextMove(_Record):
    """The next answer's move and the attempt it refines (None: a fresh answer)."""

    move: MoveKind
    parent: int | None


class Answering(_Record):
    """The model is answering (tool turns included)."""

    kind: Literal["answering"] = "answering"


class JudgingAnswer(_Record):
    """The model's answer (`draft`, an `AIMessage` as plain data) awaits its round."""

    kind: Literal["judging"] = "judging"
    draft: dict[str, Any]


class JudgingEdit(_Record):
    """A reviewer's edit awaits its evaluation; then the loop ends with it."""

    kind: Literal["edit"] = "edit"
    attempt: Attempt


class Comparing(_Record):
    """The end's pairwise comparisons are to be made (the loop stopped with `stop_reason`)."""

    kind: Literal["comparing"] = "comparing"
    stop_reason: StopReason
    response: str | None = None


class Deciding(_Record):
    """The loop stopped, or paused for an every-round review: the review, then the end."""

    kind: Literal["deciding"] = "deciding"


class Done(_Record):
    """The loop ended: its answer is the conversation's last message."""

    kind: Literal["done"] = "done"


Job = Annotated[
    Answering | JudgingAnswer | JudgingEdit | Comparing | Deciding | Done,
    Field(discriminator="kind"),
]
"""What the loop does next. The model step judges (`JudgingAnswer`, `JudgingEdit`,
`Comparing`: where the run's judge and comparer are known) or asks the model
(`Answering`); `after_agent` reviews and ends (`Deciding`)."""


class LoopState(_Record):
    """The loop's record in the agent's state (`refine_state`).

    Attributes:
        loop_id: Identifies this run's loop (the strategy record, the progress card).
        base: How many messages came before this run's loop (its conversation).
        job: What the loop does next.
        turns: The loop's own turns, woven into the model's view (`_transcript`).
        hidden: After a fresh start, what the model no longer sees; None: it sees all.
        next: The next answer's move and parent (by the round or a reviewer); None: the
            next answer refines the latest.
        instruction: A reviewer's request, recorded on the next attempt.
        rung: With a ladder (`models`), the rung of the next answer's model calls.
        model: The model of the latest call, as the record and `Attempt.model` name it.
        usage: Model calls (the agent's and the judge's), tokens and seconds spent.
        selection: With `select="pairwise"`, the selection's record.
        ended_by: The run (`execution_info.run_id`) that ended the loop (or handed its
            end to the model step); another run reaching it regenerates the answer.
    """

    loop_id: str
    base: int = 0
    job: Job = Answering()
    turns: tuple[Turn, ...] = ()
    hidden: Hidden | None = None
    next: NextMove | None = None
    instruction: str | None = None
    rung: int = 0
    model: str | None = None
    usage: Usage = Usage()
    selection: dict[str, Any] | None = None
    ended_by: str | None = None

    def with_(self, **fields: Any) -> LoopState:
        """A copy with `fields` changed (validated: plain data becomes models)."""
        return LoopState.model_validate({**dict(self), **fields})

    @property
    def card_id(self) -> str:
        """The id of this loop's progress card and of the message hosting it while it runs."""
        return HOST_PREFIX + self.loop_id

    def update(self, **fields: Any) -> dict[str, Any]:
        """The state update writing this record with `fields` changed."""
        return {KEY: dumped(self.with_(**fields))}  # plain data in updates and checkpoints


def shown_drafts(record: LoopState) -> frozenset[str]:
    """The ids of the loop's answers, the one being judged included, until the loop ends."""
    if isinstance(record.job, Done):
        return frozenset()
    ids = {turn.id for turn in record.turns if turn.kind == "ai" and turn.id}
    if isinstance(record.job, JudgingAnswer) and record.job.draft.get("id"):
        ids.add(record.job.draft["id"])
    return frozenset(ids)


class Release8Keys(TypedDict, total=False):
    """The eighth round's private keys, read only to migrate a thread (`migrated`)."""

    refine_phase: Annotated[Any, PrivateStateAttr]
    refine_judging: Annotated[Any, PrivateStateAttr]
    refine_route: Annotated[Any, PrivateStateAttr]
    refine_instruction: Annotated[Any, PrivateStateAttr]
    refine_base: Annotated[Any, PrivateStateAttr]
    refine_turns: Annotated[Any, PrivateStateAttr]
    refine_hidden_to: Annotated[Any, PrivateStateAttr]
    refine_draft: Annotated[Any, PrivateStateAttr]
    refine_next: Annotated[Any, PrivateStateAttr]
    refine_rung: Annotated[Any, PrivateStateAttr]
    refine_loop_id: Annotated[Any, PrivateStateAttr]
    refine_model: Annotated[Any, PrivateStateAttr]
    refine_ended_in: Annotated[Any, PrivateStateAttr]
    refine_usage: Annotated[Any, PrivateStateAttr]
    refine_selection: Annotated[Any, PrivateStateAttr]


class RefineAgentState(AgentState[Any], Release8Keys):
    """The agent state keys `RefineMiddleware` adds.

    Attributes:
        criteria: What this request's answer must satisfy (a string or a list of
            strings), beside `messages` in the input: added to every LLM judge's criteria.
        refine_task: The request being answered: the last human message of the run's input.
        refine_attempts: Every final answer of this run, in order, with its evaluation
            (models in the state, plain data in checkpoints: see `PlainDataChannel`).
        refine_stop_reason: Why the loop stopped (None while it runs).
        refine_response: The loop's answer, set when it stops.
        refine_state: The loop's record (`LoopState`): in the output too, so `result`
            reads the usage and the selection from what `invoke` returned.
    """

    criteria: NotRequired[str | list[str] | None]
    refine_task: NotRequired[Annotated[str, OmitFromInput]]
    refine_attempts: NotRequired[
        Annotated[list[Attempt], OmitFromInput, PlainDataChannel(list[Attempt], keep_latest)]
    ]
    refine_stop_reason: NotRequired[Annotated[StopReason | None, OmitFromInput]]
    refine_response: NotRequired[Annotated[str | None, OmitFromInput]]
    refine_state: NotRequired[
        Annotated[LoopState | None, OmitFromInput, PlainDataChannel(LoopState | None, keep_latest)]
    ]


class RefineProgressState(RefineAgentState):
    """The agent's state with a chat's UI messages (`RefineMiddleware(progress_ui=...)`).

    Attributes:
        ui: LangGraph's generative-UI messages (`langgraph.graph.ui`), merged by id with
            `ui_message_reducer`: the progress card of each run of the loop.
    """

    ui: NotRequired[Annotated[list[AnyUIMessage], OmitFromInput, ui_message_reducer]]


def loop_state(state: Mapping[str, Any]) -> LoopState:
    """The loop's record in `state` (an eighth-round thread's keys migrated).

    Before any loop ran on the thread, a record with no loop (`loop_id` empty).
    """
    value = state.get(KEY)
    if isinstance(value, LoopState):
        return value
    if value is not None:
        return LoopState.model_validate(value)
    if state.get("refine_phase") is not None:
        return migrated(state)
    return LoopState(loop_id="")


def migrated(state: Mapping[str, Any]) -> LoopState:
    """An eighth-round thread's loop keys as a `LoopState` (see `Release8Keys`)."""
    old = {name.removeprefix("refine_"): state.get(name) for name in Release8Keys.__annotations__}
    job: dict[str, Any] = dict(old["judging"] or {})
    phase = old["phase"]
    if phase == "judging" and job.get("draft"):
        job = {"kind": "judging", "draft": old["draft"]}
    elif phase == "judging":
        job = {"kind": "edit", "attempt": job["edit"]} if "edit" in job else job
        job.setdefault("kind", "comparing")
    else:
        job = {"kind": "answering" if phase == "running" else phase}
    hidden, chosen = old["hidden_to"], old["next"]
    return LoopState.model_validate(
        {
            "loop_id": old["loop_id"] or "",
            "base": old["base"] or 0,
            "job": job,
            "turns": [dict(zip(Turn.model_fields, t, strict=True)) for t in old["turns"] or []],
            "hidden": dict(zip(Hidden.model_fields, hidden, strict=True)) if hidden else None,
            "next": dict(zip(NextMove.model_fields, chosen, strict=True)) if chosen else None,
            "instruction": old["instruction"],
            "rung": old["rung"] or 0,
            "model": old["model"],
            "usage": old["usage"] or Usage(),
            "selection": old["selection"],
            "ended_by": old["ended_in"],
        }
    )


def started(state: Mapping[str, Any], removed: int = 0) -> dict[str, Any]:
    """The update starting a new loop: the task is the last human message.

    Args:
        state: The agent's state.
        removed: Messages of the state's that this update removes (a card's host).
    """
    messages = state.get("messages") or []
    fresh = LoopState(loop_id=uuid.uuid4().hex, base=len(messages) - removed)
    return {
        "refine_task": request_in(messages) or "",
        "refine_attempts": [],
        "refine_stop_reason": None,
        "refine_response": None,
        KEY: dumped(fresh),
    }


def attempts_of(state: Mapping[str, Any]) -> list[Attempt]:
    """The loop's attempts (models, whatever the saver returned)."""
    return list(revive_state({"attempts": state.get("refine_attempts") or []})["attempts"])


def loop_view(state: Mapping[str, Any], record: LoopState | None = None) -> dict[str, Any]:
    """The loop's state in the graph's terms, for evaluators, stop rules, review and the end."""
    record = record if record is not None else loop_state(state)
    return {
        "task": state.get("refine_task", ""),
        "attempts": attempts_of(state),
        "usage": record.usage,
        "stop_reason": state.get("refine_stop_reason"),
        "response": state.get("refine_response"),
        "messages": conversation(state.get("messages") or [], record),
        "loop_id": record.loop_id or None,
        "selection": record.selection,
        "criteria": state.get("criteria"),
    }


def agent_view(state: Mapping[str, Any], record: LoopState | None = None) -> LoopView:
    """The agent's state as the decisions around the round read it (the graph's `graph_view`).

    The record's `next` holds the move and parent chosen for the next answer (by the
    round or a reviewer); without one, the next answer refines the latest, as in the graph.
    """
    record = record if record is not None else loop_state(state)
    attempts = tuple(attempts_of(state))
    chosen = record.next
    latest = attempts[-1].index if attempts else None
    return LoopView(
        task=state.get("refine_task", ""),
        attempts=attempts,
        parent=chosen.parent if chosen else latest,
        move=chosen.move if chosen else None,
        request=record.instruction,
        stop_reason=state.get("refine_stop_reason"),
    )

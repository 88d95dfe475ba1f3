"""The loop's own turns inside an agent, kept beside the conversation, never in it.

An agent's answers and the turns the loop sends back (the feedback, a reviewer's request,
an earlier answer to refine) are the loop's business: a chat rendering the agent's
`messages` must show the request, the tool calls and results, and one answer. So the
loop's turns live in the loop's record (`LoopState.turns`), each anchored after the
conversation message it followed, and are woven into the messages only where they are
needed: the model's view of a round (`model_view`) and, with `keep_evaluation_turns=True`,
the final transcript (`woven`).

A turn (`_agent_state.Turn`) names the conversation message it follows, its kind (an
answer, or a loop prompt), its text, and the id the answer had when the model gave it
(so a streamed draft and the final answer can share an id). A loop prompt becomes a
`HumanMessage` tagged as LangChain tags the turns its middleware writes
(`additional_kwargs["lc_source"]`, as `SummarizationMiddleware` does), so other
middleware, evaluations and chat UIs can tell it from the user.

The next answer is rendered here as a turn (`onward`), and the loop's best answer as
the message a chat keeps (`best_message`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from langchain.agents.middleware import ModelRequest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, RemoveMessage
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from langgraph_refine._agents._agent_state import (
    Answering,
    Hidden,
    LoopState,
    Turn,
    attempts_of,
    is_host,
    loop_state,
    shown_drafts,
)
from langgraph_refine._decisions._memory import MemoryPolicy, select_attempts
from langgraph_refine._decisions._next import next_attempt
from langgraph_refine._decisions._options import LoopOptions
from langgraph_refine._decisions._prompts import (
    EDIT_INSTRUCTIONS,
    agent_feedback,
    agent_refine_earlier,
    agent_review,
    guided_request,
)
from langgraph_refine._decisions._view import LoopView
from langgraph_refine._result import RefineResult
from langgraph_refine._state import Attempt, whole_text

LOOP_KEYS = "refine_"
"""How the loop's own state keys start: an evaluator is not shown them (`judged_state`)."""

LOOP_SOURCE = "refine"
"""`additional_kwargs["lc_source"]` and `name` of the turns the loop writes to the model.

LangChain marks a human turn the user did not type this way (`SummarizationMiddleware`
uses `"summarization"`; Deep Agents' `RubricMiddleware`, `"rubric_grader"`); its chat
model integrations do not send the key to the provider.
"""


def anchor(state: Mapping[str, Any]) -> str | None:
    """The id of the conversation's last message: where a turn added now belongs.

    A draft a chat is shown (`shown_drafts`) is the loop's: a turn never follows it.
    """
    drafts = shown_drafts(loop_state(state))
    messages = [m for m in state.get("messages") or [] if m.id not in drafts]
    return messages[-1].id if messages else None


def from_user(message: AnyMessage) -> bool:
    """A human message the user wrote (not one a middleware or the loop added)."""
    return isinstance(message, HumanMessage) and "lc_source" not in message.additional_kwargs


def after_request(messages: Sequence[AnyMessage]) -> list[AnyMessage]:
    """The messages after the user's last request: this run's tool calls, results, host."""
    at = max((i for i, m in enumerate(messages) if from_user(m)), default=len(messages) - 1)
    return list(messages[at + 1 :])


def answer_turn(state: Mapping[str, Any], draft: AIMessage) -> Turn:
    """The turn of an answer the model just gave (kept out of the conversation)."""
    return Turn(anchor=anchor(state), kind="ai", text=whole_text(draft.text), id=draft.id)


def prompt_turn(state: Mapping[str, Any], text: str) -> Turn:
    """The turn of a prompt the loop sends the model (feedback, a request, an answer)."""
    return Turn(anchor=anchor(state), kind="human", text=text)


def hidden_from(state: Mapping[str, Any], turns: Sequence[Turn]) -> Hidden:
    """What a fresh start sets aside: the turns so far and this run's messages so far."""
    return Hidden(turns=len(turns), upto=anchor(state))


def model_view(
    state: Mapping[str, Any],
    record: LoopState,
    messages: Sequence[AnyMessage],
    memory: MemoryPolicy = "all",
) -> list[AnyMessage]:
    """The messages the model is sent: the conversation with the loop's turns woven in.

    `memory` chooses the earlier answers the model sees, as in the graph's refinement
    prompt (`_memory.select_attempts`): an answer it forgets goes with the loop's turn
    that answered it. A fresh start (`LoopState.hidden`) hides the run's earlier turns
    and the messages of its earlier rounds (their tool calls too), so the model answers
    as if first asked.

    Args:
        state: The agent's state.
        record: The loop's record (its turns, what is hidden, where the run began).
        messages: The request's messages (the conversation, as other middleware left it).
        memory: The memory policy.
    """
    turns: Sequence[Turn | None] = _remembered(record.turns, attempts_of(state), memory)
    hidden_ids = set(shown_drafts(record))  # each is woven in as its turn
    if record.hidden is not None:
        turns = turns[record.hidden.turns :]
        hidden_ids |= run_ids(state, record.base, record.hidden.upto)
    return _weave(messages, [turn for turn in turns if turn is not None], hidden_ids)


def woven(state: Mapping[str, Any], record: LoopState, best: AIMessage | None) -> list[Any]:
    """The update that rewrites the conversation with every turn in it, the best answer last."""
    messages = _weave(state.get("messages") or [], record.turns, set(shown_drafts(record)))
    last = messages[-1] if messages else None
    if best is not None and not (isinstance(last, AIMessage) and last.text == best.text):
        messages.append(best)
    return [RemoveMessage(id=REMOVE_ALL_MESSAGES), *messages]


def draft_ids(turns: Iterable[Turn]) -> list[str | None]:
    """The message id of each answer, in order (attempt i's is the i-th)."""
    return [turn.id for turn in turns if turn.kind == "ai"]


def _remembered(
    turns: Sequence[Turn], attempts: Sequence[Attempt], memory: MemoryPolicy
) -> list[Turn | None]:
    """The turns, each one `memory` forgets replaced by None (positions kept).

    Answer i is attempt i's; the loop turns after an answer go with it.
    """
    if memory == "all" or not attempts:
        return list(turns)
    kept = {attempt.index for _, attempt in select_attempts(attempts, memory)}
    remembered: list[Turn | None] = []
    answer = -1
    for turn in turns:
        if turn.kind == "ai":
            answer += 1
        remembered.append(turn if answer < 0 or answer in kept else None)
    return remembered


def run_ids(state: Mapping[str, Any], base: int, upto: str | None) -> set[str]:
    """The ids of this run's messages (from `base`) up to `upto` (included)."""
    ids: set[str] = set()
    for message in list(state.get("messages") or [])[base:]:
        if message.id:
            ids.add(message.id)
        if message.id == upto:
            break
    return ids


def _weave(
    messages: Sequence[AnyMessage], turns: Sequence[Turn], hidden_ids: set[str]
) -> list[AnyMessage]:
    """The messages with each turn placed after its anchor, hidden messages left out.

    A progress card's host (`is_host`) is left out too: it is the chat's, not the model's.

    A turn whose anchor is hidden keeps its place (where the anchor was); one whose
    anchor is not in `messages` at all (another middleware removed it) goes last.
    """
    after: dict[str | None, list[AnyMessage]] = {}
    for turn in turns:
        after.setdefault(turn.anchor, []).append(_message(turn))
    out: list[AnyMessage] = []
    for message in messages:
        if message.id not in hidden_ids and not is_host(message):
            out.append(message)
        out.extend(after.pop(message.id, []))
    for rest in after.values():
        out.extend(rest)
    return out


def _message(turn: Turn) -> AnyMessage:
    if turn.kind == "ai":
        return AIMessage(turn.text, id=turn.id) if turn.id else AIMessage(turn.text)
    return loop_turn(turn.text)


def loop_turn(text: str) -> HumanMessage:
    """A prompt of the loop's own (feedback, a reviewer's request) as a tagged human turn."""
    return HumanMessage(text, name=LOOP_SOURCE, additional_kwargs={"lc_source": LOOP_SOURCE})


# -- the next turn, the final answer -----------------------------------------------------


def woven_request(request: ModelRequest[Any], memory: Any = "all") -> ModelRequest[Any]:
    """The request with the loop's turns woven in, as this round's move shows them."""
    record = loop_state(request.state)
    if not record.turns and record.hidden is None:
        return request  # (a card's host comes after a turn: it is left out with them)
    return request.override(messages=model_view(request.state, record, request.messages, memory))


def onward(
    state: Mapping[str, Any], view: LoopView, turns: Sequence[Turn], options: LoopOptions
) -> dict[str, Any]:
    """The record's fields that send the agent back to its model for the next answer.

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

    Returns:
        `turns`, `job` (`Answering`) and, after a fresh start, `hidden`.
    """
    upcoming = next_attempt(view, options)
    parent, request = upcoming.parent, upcoming.request
    closing = "" if upcoming.edited is None else "\n\n" + EDIT_INSTRUCTIONS
    asked = "" if request is None else agent_review(request)
    ahead: dict[str, Any] = {"job": Answering(), "turns": tuple(turns)}
    if parent is not None and view.latest is not None and parent.index == view.latest.index:
        text = (asked or agent_feedback(parent.evaluation)) + closing
        return ahead | {"turns": (*turns, prompt_turn(state, text))}
    ahead["hidden"] = hidden_from(state, turns)
    if parent is None:
        if upcoming.guidance.strip():  # a fresh answer told what the best one's feedback asked
            return ahead | {
                "turns": (*turns, prompt_turn(state, guided_request(upcoming.guidance)))
            }
        return ahead
    earlier = agent_refine_earlier(parent) + ("\n\n" + asked if asked else "")
    return ahead | {"turns": (*turns, prompt_turn(state, earlier + closing))}


def best_message(record: LoopState, result: RefineResult, drafts: bool) -> AIMessage:
    """The answer's message; with streamed drafts, under the id its draft streamed with.

    A chat client then keeps the draft it showed instead of showing the answer twice.
    """
    ids = draft_ids(record.turns)
    index = result.best_index
    if not drafts or index is None or index >= len(ids) or ids[index] is None:
        return AIMessage(result.value)
    if result.attempts[index].response != result.value:  # a reviewer's text
        return AIMessage(result.value)
    return AIMessage(result.value, id=ids[index])

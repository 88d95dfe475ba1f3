"""The loop's own turns inside an agent, kept beside the conversation, never in it.

An agent's answers and the turns the loop sends back (the feedback, a reviewer's request,
an earlier answer to refine) are the loop's business: a chat rendering the agent's
`messages` must show the request, the tool calls and results, and one answer. So the
loop's turns live in `refine_turns`, each anchored after the conversation message it
followed, and are woven into the messages only where they are needed: the model's view
of a round (`model_view`) and, with `keep_evaluation_turns=True`, the final transcript
(`woven`).

A turn is plain data: `[anchor, kind, text, id]`: the id of the conversation message it
follows, `"ai"` (an answer) or `"human"` (a loop prompt), its text, and the id the answer
had when the model gave it (so a streamed draft and the final answer can share an id).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, RemoveMessage
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from langgraph_refine._decisions._memory import MemoryPolicy, select_attempts
from langgraph_refine._state import Attempt

Turn = list[Any]
"""`[anchor message id, "ai" | "human", text, message id or None]`."""


def anchor(state: Mapping[str, Any]) -> str | None:
    """The id of the conversation's last message: where a turn added now belongs."""
    messages = state.get("messages") or []
    return messages[-1].id if messages else None


def answer_turn(state: Mapping[str, Any], draft: AIMessage) -> Turn:
    """The turn of an answer the model just gave (kept out of the conversation)."""
    return [anchor(state), "ai", draft.text, draft.id]


def prompt_turn(state: Mapping[str, Any], text: str) -> Turn:
    """The turn of a prompt the loop sends the model (feedback, a request, an answer)."""
    return [anchor(state), "human", text, None]


def hidden_from(state: Mapping[str, Any], turns: Sequence[Turn]) -> list[Any]:
    """What a fresh start sets aside: the turns so far and this run's messages so far."""
    return [len(turns), anchor(state)]


def model_view(
    state: Mapping[str, Any], messages: Sequence[AnyMessage], memory: MemoryPolicy = "all"
) -> list[AnyMessage]:
    """The messages the model is sent: the conversation with the loop's turns woven in.

    `memory` chooses the earlier answers the model sees, as in the graph's refinement
    prompt (`_memory.select_attempts`): an answer it forgets goes with the loop's turn
    that answered it. A fresh start (`refine_hidden_to`) hides the run's earlier turns
    and the messages of its earlier rounds (their tool calls too), so the model answers
    as if first asked.

    Args:
        state: The agent's state (`refine_turns`, `refine_hidden_to`, `refine_base`,
            `refine_attempts`).
        messages: The request's messages (the conversation, as other middleware left it).
        memory: The memory policy.
    """
    turns: Sequence[Turn | None] = _remembered(
        state.get("refine_turns") or [], state.get("refine_attempts") or [], memory
    )
    hidden_ids: set[str] = set()
    hidden = state.get("refine_hidden_to")
    if hidden:
        count, upto = hidden
        turns = turns[count:]
        hidden_ids = _run_ids(state, upto)
    return _weave(messages, [turn for turn in turns if turn is not None], hidden_ids)


def woven(state: Mapping[str, Any], best: AIMessage | None) -> list[Any]:
    """The update that rewrites the conversation with every turn in it, the best answer last."""
    messages = _weave(state.get("messages") or [], state.get("refine_turns") or [], set())
    last = messages[-1] if messages else None
    if best is not None and not (isinstance(last, AIMessage) and last.text == best.text):
        messages.append(best)
    return [RemoveMessage(id=REMOVE_ALL_MESSAGES), *messages]


def draft_ids(turns: Iterable[Turn]) -> list[str | None]:
    """The message id of each answer, in order (attempt i's is the i-th)."""
    return [turn[3] for turn in turns if turn[1] == "ai"]


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
        if turn[1] == "ai":
            answer += 1
        remembered.append(turn if answer < 0 or answer in kept else None)
    return remembered


def _run_ids(state: Mapping[str, Any], upto: str | None) -> set[str]:
    """The ids of this run's messages up to `upto` (included)."""
    ids: set[str] = set()
    base = int(state.get("refine_base") or 0)
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

    A turn whose anchor is hidden keeps its place (where the anchor was); one whose
    anchor is not in `messages` at all (another middleware removed it) goes last.
    """
    after: dict[str | None, list[AnyMessage]] = {}
    for turn in turns:
        after.setdefault(turn[0], []).append(_message(turn))
    out: list[AnyMessage] = []
    for message in messages:
        if message.id not in hidden_ids:
            out.append(message)
        out.extend(after.pop(message.id, []))
    for rest in after.values():
        out.extend(rest)
    return out


def _message(turn: Turn) -> AnyMessage:
    _, kind, text, message_id = turn
    if kind == "ai":
        return AIMessage(text, id=message_id) if message_id else AIMessage(text)
    return HumanMessage(text)

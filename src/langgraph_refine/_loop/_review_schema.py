"""The human review's answer: its shape, declared on the interrupt, and the ask-again loop.

One definition serves every place that pauses for a review (the graph's review step and
`RefineMiddleware`): clients read the answer's JSON schema from the interrupt's
`response_schema`, and `ask_review` pauses again, with an `error` key, until the answer
is one the review can apply.

A review is answered in either of two shapes: the loop's own (`{"action": "approve"}`,
...), or LangChain's human-in-the-loop response (`{"decisions": [{"type": "approve"}]}`),
which chat clients that render `HumanInTheLoopMiddleware`'s requests send.
`from_decisions` turns the second into the first: `approve` approves, `edit` edits with
`edited_action["args"]["response"]`, `reject` with a `message` revises (one more round,
the message as the reviewer's feedback), `reject` without one, or with the message
`stop`, stops with the best answer. `hitl_request` writes the review as the request such
a client renders; its description offers only what a chat can send: agent-chat-ui
refuses a rejection without a reason and, with its reason box left empty, sends
`approve`, so a chat user stops by rejecting with `stop`.

A chat may also end the thread without answering: agent-chat-ui's "Mark as Resolved"
resumes it with `Command(goto=END)` and no resume value. LangGraph has no channel for
that write (it logs "wrote to unknown channel branch:to:__end__, ignoring it") and runs
the paused review again, which would pause again. `ask_review` reads it as what it
means, the loop's `reject`: stop with the best answer (`resolve_requested`).

A client that can only send text (an A2A client replying to a task that asks for input)
answers in words, read by `from_text`: an action's name (`approve`, `reject`; `stop`
is a reject), `edit:`
followed by the edited answer, `revise:` followed by a request; any other text is a
request for one more answer (a revision).
"""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Callable, Mapping, Sequence
from functools import cache
from typing import Annotated, Any, Literal, TypeVar, Union

from langgraph.config import get_config
from langgraph.constants import CONFIG_KEY_CHECKPOINTER, END
from langgraph.errors import GraphInterrupt
from langgraph.types import interrupt
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from langgraph_refine._errors import ReviewInputError

logger = logging.getLogger("langgraph_refine")

T = TypeVar("T")

ReviewAction = Literal["approve", "edit", "reject", "revise", "continue"]
"""Every action a reviewer may take; `continue` only in `every_round` reviews."""

# Non-empty and not only whitespace: what the review's `apply` accepts.
_Text = Annotated[str, Field(min_length=1, pattern=r"\S")]


class _Answer(BaseModel):
    model_config = ConfigDict(extra="allow")


class Approve(_Answer):
    """Accept the reviewed response as the loop's answer (`stop_reason="approved"`)."""

    action: Literal["approve"]


class Edit(_Answer):
    """Replace the answer with the reviewer's text (`stop_reason="edited"`)."""

    action: Literal["edit"]
    response: _Text


class Reject(_Answer):
    """Stop with the best attempt (`stop_reason="rejected"`)."""

    action: Literal["reject"]


class Revise(_Answer):
    """Run one more round that sees the reviewer's feedback."""

    action: Literal["revise"]
    feedback: _Text


class Continue(_Answer):
    """Let the stop rules decide (every_round reviews only)."""

    action: Literal["continue"]


DECISIONS: tuple[str, ...] = ("approve", "edit", "reject")
"""The LangChain human-in-the-loop decisions a review accepts (its `allowed_decisions`)."""

STOP_WORDS: frozenset[str] = frozenset({"stop", "reject"})
"""A rejection's message (or a text answer) that stops with the best answer, any case."""


class ApproveDecision(_Answer):
    """Approve the answer (as `{"action": "approve"}`)."""

    type: Literal["approve"]


class EditedArgs(_Answer):
    response: _Text


class EditedAction(_Answer):
    args: EditedArgs  # its `name` (the reviewed action's) is not read


class EditDecision(_Answer):
    """Replace the answer with `edited_action.args.response` (as `{"action": "edit"}`)."""

    type: Literal["edit"]
    edited_action: EditedAction


class RejectDecision(_Answer):
    """With a `message`: one more round with it as feedback; without, or `stop`: stop."""

    type: Literal["reject"]
    message: str | None = None


Decision = Annotated[
    Union[ApproveDecision, EditDecision, RejectDecision],  # noqa: UP007
    Field(discriminator="type"),
]


class Decisions(_Answer):
    """LangChain's human-in-the-loop response: one decision, about the one action reviewed."""

    decisions: list[Decision] = Field(min_length=1, max_length=1)


_BY_ACTION: dict[str, type[_Answer]] = {
    "approve": Approve,
    "edit": Edit,
    "reject": Reject,
    "revise": Revise,
    "continue": Continue,
}


@cache
def _schema(actions: tuple[str, ...]) -> dict[str, Any]:
    members = tuple(_BY_ACTION[action] for action in actions)
    own: Any = (
        members[0]
        if len(members) == 1
        else Annotated[Union[members], Field(discriminator="action")]  # noqa: UP007
    )
    return TypeAdapter(Union[own, Decisions]).json_schema()  # noqa: UP007


def review_answer_schema(actions: Sequence[str]) -> dict[str, Any]:
    """The JSON schema of a valid answer to a review offering `actions`.

    Args:
        actions: The allowed actions, e.g. `["approve", "edit", "reject", "revise"]`.

    Returns:
        A JSON schema, a fresh copy per call: the loop's own answers (a discriminated
        union on `action`) or LangChain's human-in-the-loop response (`decisions`).

    Raises:
        ValueError: If an action is unknown.
    """
    unknown = [a for a in actions if a not in _BY_ACTION]
    if unknown:
        raise ValueError(f"unknown review action(s) {unknown}; allowed: {list(_BY_ACTION)}")
    return copy.deepcopy(_schema(tuple(actions)))


def from_decisions(value: Any) -> Any:
    """A LangChain human-in-the-loop response as the review's own answer; others as they are.

    Args:
        value: The resume value.

    Returns:
        `{"action": ...}` for a `{"decisions": [...]}` value; any other value unchanged.

    Raises:
        ReviewInputError: If the decisions are not one decision the review can apply.

    Example:
        >>> from_decisions({"decisions": [{"type": "reject", "message": "Shorter."}]})
        {'action': 'revise', 'feedback': 'Shorter.'}
        >>> from_decisions({"decisions": [{"type": "reject"}]})
        {'action': 'reject'}
        >>> from_decisions({"decisions": [{"type": "reject", "message": "Stop."}]})
        {'action': 'reject'}
    """
    if not isinstance(value, Mapping) or "decisions" not in value:
        return value
    decisions = value["decisions"]
    if not isinstance(decisions, list) or len(decisions) != 1:
        raise ReviewInputError(
            f"a review takes one decision: 'decisions' must be a list of one "
            f"{{'type': 'approve' | 'edit' | 'reject', ...}}, got {decisions!r}"
        )
    decision = decisions[0]
    kind = decision.get("type") if isinstance(decision, Mapping) else None
    if kind == "approve":
        return {"action": "approve"}
    if kind == "edit":
        return {"action": "edit", "response": _edited_response(decision)}
    if kind == "reject":
        message = decision.get("message")
        if message is not None and not isinstance(message, str):
            raise ReviewInputError(
                f"a 'reject' decision's 'message' must be a string, got {message!r}"
            )
        if message and message.strip() and not is_stop(message):
            return {"action": "revise", "feedback": message}
        return {"action": "reject"}
    raise ReviewInputError(
        f"a review decision's 'type' must be one of {list(DECISIONS)}, got {decision!r}; "
        "resume again with e.g. {'decisions': [{'type': 'approve'}]}"
    )


def is_stop(text: str) -> bool:
    """Whether a reviewer's words say stop (`STOP_WORDS`; case and end punctuation ignored)."""
    return text.strip().rstrip(".!").strip().lower() in STOP_WORDS


TEXT_FORMS = (
    "'approve', 'reject', 'edit: <the edited answer>', or a request for another answer "
    "('revise: <request>', or the request alone)"
)
"""How a review is answered in text (`from_text`), for messages that say so."""


def from_text(value: Any, actions: Sequence[str]) -> Any:
    """A review answered in text as the review's own answer; any other value unchanged.

    Args:
        value: The resume value.
        actions: The actions the review offers (`continue` is a word only where offered).

    Returns:
        `{"action": ...}` for a string: a bare action's name or `stop` (a reject; any
        case, trailing punctuation ignored), `edit: TEXT`, `revise: TEXT`, or a request
        (`revise`).

    Raises:
        ReviewInputError: For empty text, or `edit:` / `revise:` with nothing after it.

    Example:
        >>> from_text("Approve.", ["approve", "revise"])
        {'action': 'approve'}
        >>> from_text("Make it rhyme.", ["approve", "revise"])
        {'action': 'revise', 'feedback': 'Make it rhyme.'}
        >>> from_text("edit: Rain, then sun.", ["approve", "edit"])
        {'action': 'edit', 'response': 'Rain, then sun.'}
    """
    if not isinstance(value, str):
        return value
    text = value.strip()
    word = text.rstrip(".!").strip().lower()
    if "reject" in actions and is_stop(text):  # `reject` or `stop`
        return {"action": "reject"}
    if word in actions and word in ("approve", "continue"):
        return {"action": word}
    head, colon, rest = text.partition(":")
    kind = head.strip().lower()
    if colon and kind in ("edit", "revise"):
        if not rest.strip():
            raise ReviewInputError(
                f"a review answered {value!r} says {kind} but gives nothing after "
                f"'{kind}:'; resume again with {TEXT_FORMS}"
            )
        key = "response" if kind == "edit" else "feedback"
        return {"action": kind, key: rest.strip()}
    if not text:
        raise ReviewInputError(
            f"a review answer cannot be empty text; resume again with {TEXT_FORMS}"
        )
    return {"action": "revise", "feedback": text}


def _edited_response(decision: Mapping[str, Any]) -> str:
    action = decision.get("edited_action")
    args = action.get("args") if isinstance(action, Mapping) else None
    response = args.get("response") if isinstance(args, Mapping) else None
    if not isinstance(response, str) or not response.strip():
        raise ReviewInputError(
            "an 'edit' decision needs the edited answer as a non-empty string in "
            f"edited_action['args']['response'], got {action!r}; resume again with "
            "{'decisions': [{'type': 'edit', 'edited_action': {'name': ..., "
            "'args': {'response': '...'}}}]}"
        )
    return response


def hitl_request(payload: Mapping[str, Any]) -> dict[str, Any]:
    """The review as a LangChain human-in-the-loop request (`HumanInTheLoopMiddleware`'s shape).

    One action, named after the loop. Its `args` hold only what the reviewer may change,
    the response: a chat client renders each arg as an editable field, and only the
    response is read back. The attempt (by round, counted from 1), its score, verdict and
    feedback are told in its `description`, in words a reviewer reads; the review config
    allows `approve`, `edit` and `reject`.

    Args:
        payload: The review's own payload.

    Returns:
        `{"action_requests": [...], "review_configs": [...]}`.

    Example:
        >>> request = hitl_request({"name": "refine", "mode": "final", "response": "Hi.",
        ...     "attempt": 2, "score": 0.7, "verdict": "NEEDS_IMPROVEMENT",
        ...     "feedback": "Say more."})
        >>> request["action_requests"][0]["args"]
        {'response': 'Hi.'}
        >>> for line in request["action_requests"][0]["description"].splitlines()[:2]:
        ...     print(line)
        The best answer so far (round 3), scored 0.70 of 1: needs improvement.
        The judge's feedback: Say more.
    """
    return {
        "action_requests": [
            {
                "name": payload["name"],
                "args": {"response": payload["response"]},
                "description": _review_description(payload),
            }
        ],
        "review_configs": [{"action_name": payload["name"], "allowed_decisions": list(DECISIONS)}],
    }


REVIEW_CHOICES = (
    "Approve to end with this answer, or edit the response to end with your text. "
    "Reject with a message saying what to change to get one more answer that follows it; "
    'reject with the message "stop" (or mark the thread resolved) to end with the best '
    "answer so far."
)
"""What each decision does, as a chat can send it (a rejection there needs a message)."""


def _review_description(payload: Mapping[str, Any]) -> str:
    """What the reviewer is shown beside the response, in plain words.

    It names answers by round, counted from 1 as a chat's progress card counts them
    (`round` = the payload's `attempt` index + 1).
    """
    which = "latest answer" if payload["mode"] == "every_round" else "best answer so far"
    attempt, best = payload.get("attempt"), payload.get("best_attempt")
    revised = payload["mode"] == "final" and best is not None and best != attempt
    if revised:  # what the reviewer asked for, shown beside the best
        which = "revised answer"
    head = f"The {which}" + (f" (round {attempt + 1})" if attempt is not None else "")
    score, verdict = payload.get("score"), payload.get("verdict")
    if score is None:
        head += ", not scored"
    else:
        head += f", scored {score:.2f} of 1"
    if verdict:
        head += f": {str(verdict).replace('_', ' ').lower()}"
    lines = [head + "."]
    if revised and best is not None:
        best_score = payload.get("best_score")
        scored = "not scored" if best_score is None else f"scored {best_score:.2f} of 1"
        lines.append(f"The best answer so far is round {best + 1}, {scored}.")
    feedback = str(payload.get("feedback") or "").strip()
    if feedback:
        lines.append(f"The judge's feedback: {feedback}")
    lines.append(REVIEW_CHOICES)
    return "\n".join(lines)


def ask_review(
    payload: Mapping[str, Any],
    apply: Callable[[Mapping[str, Any], Any], T],
    actions: Sequence[str],
    *,
    resolve: bool | None = None,
) -> T:
    """Pause with `interrupt(payload, response_schema=...)` until `apply` accepts the answer.

    The schema is passed as JSON, which LangGraph publishes to clients without checking
    answers against it: a malformed answer is not an error of the run, so `apply` checks
    it, and the review pauses again with the same payload plus an `error` key saying what
    was wrong. Each `interrupt()` here has its own resume slot, so the bad value is never
    replayed into the next answer.

    A run that resumes the review with no answer but a client's resolve
    (`Command(goto=END)`, agent-chat-ui's "Mark as Resolved") gets `RESOLVED`, the
    loop's `reject`: the loop ends with the best answer instead of pausing again.

    Args:
        payload: What the reviewer is shown.
        apply: Turns an answer into the caller's update; raises `ReviewInputError` for a
            malformed answer.
        actions: The actions offered, for the schema.
        resolve: Whether this run resolves the thread (`aresolve_requested`, read
            before by an async caller); None: read here, only when the review has no
            answer (`resolve_requested`).

    Returns:
        What `apply` returned for the first well-formed answer.
    """
    schema = review_answer_schema(actions)
    shown = payload
    while True:
        try:
            value = interrupt(shown, response_schema=schema)
        except GraphInterrupt:
            if not (resolve if resolve is not None else resolve_requested()):
                raise
            logger.info("%s: the thread was resolved: ending with the best answer", shown["name"])
            value = dict(RESOLVED)
        try:
            return apply(payload, value)
        except ReviewInputError as exc:
            logger.info("%s: review answer rejected: %s", payload.get("name"), exc)
            shown = {**payload, "error": str(exc)}


RESOLVED: Mapping[str, str] = {"action": "reject"}
"""The answer a client's resolve stands for: stop with the best answer, as `reject` does."""

RESOLVE_WRITE = f"branch:to:{END}"
"""The write LangGraph makes of `Command(goto=END)`: no graph has that channel, so it stays
a pending write on the checkpoint the run resumes, where `resolve_requested` reads it."""


def resolve_requested() -> bool:
    """Whether this run resumes the thread with a client's resolve (`Command(goto=END)`).

    Read from the pending writes of the thread's checkpoint the run resumes (the root
    graph's, where a run's command is written), with the run's checkpointer. False
    outside a graph run, without a checkpointer, or when the checkpointer cannot be read
    synchronously here (an async saver on its event loop: use `aresolve_requested`).
    """
    found = _resolve_lookup()
    if found is None:
        return False
    saver, config = found
    try:
        checkpoint = saver.get_tuple(config)
    except (asyncio.InvalidStateError, NotImplementedError) as exc:  # an async-only saver
        logger.debug("the thread's checkpoint cannot be read synchronously here: %s", exc)
        return False
    return _resolves(checkpoint)


async def aresolve_requested() -> bool:
    """`resolve_requested` for code on an event loop (a served agent's async hook)."""
    found = _resolve_lookup()
    if found is None:
        return False
    saver, config = found
    return _resolves(await saver.aget_tuple(config))


def _resolve_lookup() -> tuple[Any, dict[str, Any]] | None:
    """The run's checkpointer and the config of the root checkpoint it resumes, or None."""
    try:
        configurable = get_config().get("configurable") or {}
    except RuntimeError:  # outside a graph run
        return None
    saver = configurable.get(CONFIG_KEY_CHECKPOINTER)
    thread = configurable.get("thread_id")
    if saver is None or thread is None:
        return None
    root: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ""}
    checkpoint_id = (configurable.get("checkpoint_map") or {}).get("")
    if checkpoint_id is not None:
        root["checkpoint_id"] = checkpoint_id
    return saver, {"configurable": root}


def _resolves(checkpoint: Any) -> bool:
    writes = getattr(checkpoint, "pending_writes", None) or []
    return any(channel == RESOLVE_WRITE for _, channel, _ in writes)

"""A human review, decided once for the graph and the agent: what it shows, what an answer means.

`reviewed` picks the attempt a review shows; `read_answer` turns a reviewer's answer
(the loop's own `{"action": ...}`; LangChain's decisions are turned into one first, see
`_review_schema.from_decisions`) into a `ReviewAnswer`: whether the loop stops and why,
the text it ends with, the edit to evaluate, or the request and the attempt the next
answer refines. The graph's review step writes it to the graph's state, the agent's
`after_agent` to the agent's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langgraph_refine._errors import ReviewInputError
from langgraph_refine._result import best_attempt
from langgraph_refine._state import Attempt, StopReason
from langgraph_refine._stop_rules import BUDGET_STOP, review_stop


def review_due(stop_reason: StopReason | None, on_budget_exhausted: str) -> bool:
    """Whether the loop pauses for its review now.

    Not after a budget stop that raises (nothing is left to spend on what a reviewer
    asks), nor once a reviewer's edit is evaluated (the edit ends the loop).
    """
    if stop_reason == BUDGET_STOP and on_budget_exhausted == "raise":
        return False
    return stop_reason != "edited"


def reviewed(attempts: Sequence[Attempt], mode: str) -> Attempt | None:
    """The attempt a review shows.

    Every round: the latest. Final: the best, except after a reviewer's request: then the
    best of the attempts made since it (the revision, ties to it). A human's request
    outranks a tie, so the reviewer sees what they asked for, and approving approves it.
    """
    if mode == "every_round":
        return attempts[-1] if attempts else None
    asked = next(
        (i for i in range(len(attempts) - 1, -1, -1) if attempts[i].move == "revise"), None
    )
    return best_attempt(attempts if asked is None else attempts[asked:])


@dataclass(frozen=True)
class ReviewAnswer:
    """What a reviewer's answer means for the loop.

    Attributes:
        action: `approve`, `edit`, `reject`, `revise` or `continue`.
        stop_reason: The stop reason after it (None: the loop goes on; `continue`
            keeps the stop rules' decision).
        response: The text the loop ends with: the shown one (approve), the reviewer's
            (edit, before its evaluation); else None.
        edit: A reviewer's edit as the attempt to evaluate next (`move="edit"`).
        request: A revise's request for the next answer.
        parent: The attempt a revise refines: the one the reviewer was shown.
    """

    action: str
    stop_reason: StopReason | None
    response: str | None = None
    edit: Attempt | None = None
    request: str | None = None
    parent: int | None = None


def read_answer(shown: Mapping[str, Any], value: Any, actions: Sequence[str]) -> ReviewAnswer:
    """What the answer `value` to the review `shown` (its payload) means.

    Raises:
        ReviewInputError: If the value is not a dict with an offered action and the
            fields that action needs.
    """
    if not isinstance(value, Mapping) or value.get("action") not in actions:
        raise ReviewInputError(
            f"review resume value must be a dict with 'action' in {list(actions)}, "
            f"got {value!r}; resume again with Command(resume={{'action': ...}})"
        )
    action = value["action"]
    current: StopReason | None = shown.get("stop_reason")
    if action == "continue":  # the stop rules' decision stands
        return ReviewAnswer(action, current)
    if action == "approve":
        return ReviewAnswer(action, "approved", response=shown["response"])
    if action == "edit":
        # The edited text is an attempt of its own (`move="edit"`), evaluated next; its
        # evaluation ends the loop with "edited". Until then the loop has not stopped.
        text = _required_text(value, "response", action)
        return ReviewAnswer(action, None, response=text, edit=_edit(shown, text))
    if action == "revise":
        request = _required_text(value, "feedback", action)
        return ReviewAnswer(action, None, request=request, parent=shown.get("attempt"))
    return ReviewAnswer(action, review_stop(action, current))


def _edit(shown: Mapping[str, Any], text: str) -> Attempt:
    """The attempt a reviewer's edit makes: after the latest, a child of the shown one."""
    return Attempt(
        index=int(shown.get("iteration") or 0) + 1,
        response=text,
        parent=shown.get("attempt"),
        move="edit",
    )


def _required_text(value: Mapping[str, Any], key: str, action: str) -> str:
    text = value.get(key)
    if not isinstance(text, str) or not text.strip():
        raise ReviewInputError(
            f"review action {action!r} needs a non-empty string {key!r}, got {text!r}; "
            "resume again with the field filled in"
        )
    return text

"""The human review's answer: its shape, declared on the interrupt, and the ask-again loop.

One definition serves every place that pauses for a review (the graph's review step and
`RefineMiddleware`): clients read the answer's JSON schema from the interrupt's
`response_schema`, and `ask_review` pauses again, with an `error` key, until the answer
is one the review can apply.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Mapping, Sequence
from functools import cache
from typing import Annotated, Any, Literal, TypeVar, Union

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
    if len(members) == 1:
        return TypeAdapter(members[0]).json_schema()
    union = Annotated[Union[members], Field(discriminator="action")]  # type: ignore[valid-type]  # noqa: UP007
    return TypeAdapter(union).json_schema()


def review_answer_schema(actions: Sequence[str]) -> dict[str, Any]:
    """The JSON schema of a valid answer to a review offering `actions`.

    Args:
        actions: The allowed actions, e.g. `["approve", "edit", "reject", "revise"]`.

    Returns:
        A JSON schema (a discriminated union on `action`), a fresh copy per call.

    Raises:
        ValueError: If an action is unknown.
    """
    unknown = [a for a in actions if a not in _BY_ACTION]
    if unknown:
        raise ValueError(f"unknown review action(s) {unknown}; allowed: {list(_BY_ACTION)}")
    return copy.deepcopy(_schema(tuple(actions)))


def ask_review(
    payload: Mapping[str, Any],
    apply: Callable[[Mapping[str, Any], Any], T],
    actions: Sequence[str],
) -> T:
    """Pause with `interrupt(payload, response_schema=...)` until `apply` accepts the answer.

    The schema is passed as JSON, which LangGraph publishes to clients without checking
    answers against it: a malformed answer is not an error of the run, so `apply` checks
    it, and the review pauses again with the same payload plus an `error` key saying what
    was wrong. Each `interrupt()` here has its own resume slot, so the bad value is never
    replayed into the next answer.

    Args:
        payload: What the reviewer is shown.
        apply: Turns an answer into the caller's update; raises `ReviewInputError` for a
            malformed answer.
        actions: The actions offered, for the schema.

    Returns:
        What `apply` returned for the first well-formed answer.
    """
    schema = review_answer_schema(actions)
    shown = payload
    while True:
        try:
            return apply(payload, interrupt(shown, response_schema=schema))
        except ReviewInputError as exc:
            logger.info("%s: review answer rejected: %s", payload.get("name"), exc)
            shown = {**payload, "error": str(exc)}

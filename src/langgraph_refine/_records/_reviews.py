"""The record of human reviews: every reviewer's answer kept in the run's LangGraph store.

A person's verdict on an attempt the judge scored is a label (`evaluators.store_labels`
reads them back for `evaluators.calibrate`). The graph's review step and the agent's
record each answer as a label once it is read (`ReviewNode.__call__`, and
`RefineMiddleware`'s `after_agent` / `aafter_agent`): so the graph, the agent and the
command line's `run --review --store FILE` record without any code of the user's,
whenever the run has a store. Where the run is async on its event loop (an agent served
by `langgraph dev`), the answer is written with the store's `aput`: a server's store
refuses sync calls there. Each label carries the identity of the judge that scored it.

Each answer is one item under `REVIEW_NAMESPACE`, keyed by the thread, the loop and the
attempt shown, so a review resumed twice (a crash after the answer) writes the same item
again, never a second label. A store error is logged and the run goes on: the record is
for later calibration, never a reason to fail a loop.
"""

from __future__ import annotations

import datetime
import hashlib
import logging
import uuid
from collections.abc import Mapping
from typing import Any

from langgraph.config import get_config, get_store
from langgraph.store.base import BaseStore

logger = logging.getLogger("langgraph_refine")

REVIEW_NAMESPACE: tuple[str, ...] = ("langgraph_refine", "reviews")
"""Where reviews are kept in a store (beside the strategy records' namespace)."""

PASSING_ACTIONS = frozenset({"approve"})
"""A reviewer's answers that pass the attempt shown; `edit`, `reject` and `revise` do not."""

LABELLING_ACTIONS = PASSING_ACTIONS | {"edit", "reject", "revise"}
"""The answers that are a verdict on the attempt shown (`continue` is none: it defers)."""


def review_item(
    payload: Mapping[str, Any], action: str, judge: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The stored value of a reviewer's `action` on the attempt `payload` showed.

    Args:
        payload: What the reviewer was shown.
        action: The reviewer's answer.
        judge: The identity of the judge that scored the attempt (see
            `evaluators._identity`), so a calibration made from these labels knows it.

    Example:
        >>> item = review_item({"task": "t", "response": "r", "score": 0.8, "attempt": 1}, "edit")
        >>> item["passed"], item["action"], item["attempt"]
        (False, 'edit', 1)
    """
    return {
        "task": str(payload.get("task") or ""),
        "response": str(payload.get("response") or ""),
        "passed": action in PASSING_ACTIONS,
        "action": action,
        "score": payload.get("score"),
        "verdict": payload.get("verdict"),
        "attempt": payload.get("attempt"),
        "name": payload.get("name"),
        "judge": dict(judge) if judge is not None else None,
        "recorded_at": datetime.datetime.now(datetime.UTC).isoformat(),
    }


def record_review(
    payload: Mapping[str, Any], action: str, *, judge: Mapping[str, Any] | None = None
) -> None:
    """Keep a reviewer's answer in the running graph's store, if it has one.

    A no-op outside a graph run, without a store, for an answer that is no verdict
    (`continue`) or for a review that showed no attempt. For code running in a worker
    thread or a sync run; on an event loop use `arecord_review` (a server's store
    refuses sync calls there).
    """
    target = _target(payload, action)
    if target is None:
        return
    store, key = target
    try:
        store.put(REVIEW_NAMESPACE, key, review_item(payload, action, judge), index=False)
    except Exception as exc:  # the record serves later calibration; the run goes on
        logger.warning("could not record the review in the store (%s): %s", key, exc)


async def arecord_review(
    payload: Mapping[str, Any], action: str, *, judge: Mapping[str, Any] | None = None
) -> None:
    """Async twin of `record_review`: the store's `aput`, on the run's event loop."""
    target = _target(payload, action)
    if target is None:
        return
    store, key = target
    try:
        await store.aput(REVIEW_NAMESPACE, key, review_item(payload, action, judge), index=False)
    except Exception as exc:  # the record serves later calibration; the run goes on
        logger.warning("could not record the review in the store (%s): %s", key, exc)


def _target(payload: Mapping[str, Any], action: str) -> tuple[BaseStore, str] | None:
    """The running graph's store and the review's key; None when nothing is recorded."""
    if action not in LABELLING_ACTIONS or payload.get("attempt") is None:
        return None
    try:
        store = get_store()
        configurable = get_config().get("configurable") or {}
    except RuntimeError:  # not inside a graph run: nothing to record in
        return None
    if store is None:
        return None
    return store, _key(configurable, payload)


def _key(configurable: Mapping[str, Any], payload: Mapping[str, Any]) -> str:
    """One review of one attempt of one loop on one thread (a resumed review writes it again).

    The task and the response shown are part of it: a chat's thread runs a new loop for
    each request, its attempts counted from 0 again, and each review is a label of its own.
    """
    thread = configurable.get("thread_id") or uuid.uuid4().hex
    shown = f"{payload.get('task')}\x00{payload.get('response')}".encode()
    digest = hashlib.sha256(shown).hexdigest()[:16]
    return f"{thread}|{payload.get('name') or 'refine'}|{payload.get('attempt')}|{digest}"


def stored_reviews(store: BaseStore) -> list[dict[str, Any]]:
    """Every review kept in `store`, oldest first."""
    found: list[Any] = []
    while True:
        page = store.search(REVIEW_NAMESPACE, limit=500, offset=len(found))
        found.extend(page)
        if len(page) < 500:
            break
    items = [item for item in found if tuple(item.namespace) == REVIEW_NAMESPACE]
    # When each answer was given (microseconds; a store's own times may be coarser).
    items.sort(key=lambda item: (str(item.value.get("recorded_at") or ""), item.key))
    return [dict(item.value) for item in items]

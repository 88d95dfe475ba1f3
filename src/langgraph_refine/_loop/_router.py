"""Routing: where the loop goes after each step. The decision itself is the stop rules'.

The routers read the state only, so they work in any topology: map their labels onto
your own node names with `add_conditional_edges(node, router, {"refine": ..., "stop": ...})`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal


def route_after_evaluation(state: Mapping[str, Any]) -> Literal["refine", "stop"]:
    """`"stop"` once a stop reason is set (stop rules, budget or reviewer), else `"refine"`.

    Also the router after a human review: `revise` clears the stop reason (refine again),
    `approve`/`edit`/`reject` set one (stop).

    Example:
        >>> route_after_evaluation({"stop_reason": None})
        'refine'
        >>> route_after_evaluation({"stop_reason": "passed"})
        'stop'
    """
    return "stop" if state.get("stop_reason") else "refine"

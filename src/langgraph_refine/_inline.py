"""Inline steps: the graph's small sync steps, run in the caller's thread in both modes.

LangGraph wraps a plain sync function given to `add_node` or `add_conditional_edges` so
that, under `ainvoke`, it runs in a worker thread; a conditional edge's function is also
traced as a run of its own. For the loop's instant steps (starting, routing, finishing)
that thread hop and span cost more than the step itself: twice per round for the
routers, and under many concurrent loops the hops contend for the interpreter lock.
`Inline` presents such a step as a runnable with real sync and async entry points that
both call it directly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langchain_core.runnables import Runnable, RunnableConfig


class Inline(Runnable[Any, Any]):
    """Run a quick sync step inline under both `invoke` and `ainvoke`.

    Only for steps that never block (no I/O, no model call): an async run calls them on
    the event loop.

    Args:
        step: The function (or callable object) taking the state.
        name: The run name; defaults to the function's name.

    Example:
        >>> Inline(lambda state: state["x"] + 1, name="inc").invoke({"x": 1})
        2
    """

    def __init__(self, step: Callable[[Any], Any], *, name: str | None = None) -> None:
        self.step = step
        self.name = name or getattr(step, "__name__", None) or type(step).__name__

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        """Run the step (sync)."""
        return self.step(input)

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        """Run the step on the event loop, without a worker thread."""
        return self.step(input)

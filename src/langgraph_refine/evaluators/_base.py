"""The evaluator protocol's base: calling what may be async."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from langchain_core.runnables.config import run_in_executor


def is_async_callable(fn: object) -> bool:
    """True for async functions and objects whose `__call__` is async."""
    call = getattr(type(fn), "__call__", None)  # noqa: B004 - looking for an async __call__
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(call)


def call_sync(fn: Callable[..., Any], *args: Any, what: str) -> Any:
    """Call `fn(*args)` on the sync path; refuse an async `fn` with a clear error."""
    if is_async_callable(fn):
        raise TypeError(f"the {what} is async; run the loop with ainvoke() or arefine()")
    value = fn(*args)
    if inspect.isawaitable(value):
        if inspect.iscoroutine(value):
            value.close()
        raise TypeError(
            f"the {what} returned an awaitable; run the loop with ainvoke() or arefine()"
        )
    return value


async def acall(fn: Callable[..., Any], *args: Any) -> Any:
    """Await `fn(*args)`: directly if async, in a worker thread if sync."""
    if is_async_callable(fn):
        return await fn(*args)
    value = await run_in_executor(None, fn, *args)
    if inspect.isawaitable(value):
        value = await value
    return value

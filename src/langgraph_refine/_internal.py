"""The loop's own model calls: kept out of a chat's stream, still in its traces.

A judge, a panel's members, a pairwise comparer, a confirmation (a second judge call)
and an agent used as a judge all call models for the loop itself. In a chat, whatever a
run's model calls stream (`stream_mode="messages"`, the LangGraph SDK's `messages-tuple`)
is shown to the user: a judge's JSON verdict is not meant for them. Two public
conventions mark such calls, and `internal` applies both:

- LangGraph's `nostream` tag (`langgraph.constants.TAG_NOSTREAM`): the call's tokens and
  message are left out of `messages` streams, `subgraphs=True` included;
- LangChain's internal-call metadata (`internal_call_metadata()`, from
  `langchain.agents.middleware.internal_call_transformer`): with `InternalCallTransformer`
  (which `RefineMiddleware` declares) the call is left out of an agent's `run.messages`.

Callbacks still see every call, so traces (LangSmith, OpenTelemetry) and the budget's
meter are unchanged.

Nobody is shown such a call's tokens, so a judge asks its model for the reply whole
(`unstreamed`): LangChain would otherwise stream it whenever a streaming callback is
attached (a chat's `messages` stream), `nostream` or not.

The one place it is applied: every evaluator and comparer the loop uses is adapted
(`as_evaluator`, `as_comparer`) into a `BaseEvaluator` or a `Comparer`, and those base
classes run their subclasses' `evaluate` / `aevaluate` (`compare` / `acompare`) under
`internal_calls` (`mark_internal`). So an LLM judge, a panel, an agent used as a judge,
an openevals evaluator, a user's function (a model it calls through LangChain) and a
user's own evaluator class are all marked, wherever the loop calls them from.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
import sys
from collections.abc import Callable, Iterator
from typing import Any, TypeVar, cast

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import var_child_runnable_config
from langgraph.constants import TAG_NOSTREAM

from langgraph_refine._kinds import kind_of

F = TypeVar("F", bound=Callable[..., Any])
M = TypeVar("M")

_TRANSFORMER_MODULE = "langchain.agents.middleware.internal_call_transformer"


def internal_metadata() -> dict[str, Any]:
    """LangChain's internal-call metadata, or `{}` when nothing in this process reads it.

    The metadata holds a process-local token only `InternalCallTransformer` checks; that
    transformer exists only once its module is imported (LangChain's agents, an optional
    dependency), so the loop never imports it itself: a run without agents pays nothing.
    """
    module = sys.modules.get(_TRANSFORMER_MODULE)
    if module is None:
        return {}
    return cast("dict[str, Any]", module.internal_call_metadata())


def internal_config(config: RunnableConfig | None) -> RunnableConfig:
    """`config` with the `nostream` tag and the internal-call metadata added.

    Args:
        config: The config calls would inherit (None: none yet).

    Returns:
        A new config (the given one is not changed); its callbacks are the same.

    Example:
        >>> internal_config({"tags": ["mine"]})["tags"]
        ['mine', 'nostream']
    """
    config = config or {}
    tags = list(config.get("tags") or [])
    if TAG_NOSTREAM not in tags:
        tags.append(TAG_NOSTREAM)
    metadata = {**(config.get("metadata") or {}), **internal_metadata()}
    return cast(RunnableConfig, {**config, "tags": tags, "metadata": metadata})


@contextlib.contextmanager
def internal_calls() -> Iterator[None]:
    """Mark every model call made in the block (without a config of its own) as internal.

    Calls inherit the current run's config from LangChain's context; the block sets it to
    `internal_config` of it, so callbacks and metadata are kept. Outside a run (no config
    to inherit) there is no stream to keep the calls out of, and nothing changes.
    """
    token = _enter()
    try:
        yield
    finally:
        if token is not None:
            var_child_runnable_config.reset(token)


def _enter() -> contextvars.Token[Any] | None:
    """Set the inherited config to its internal form; the token to reset, None if unchanged."""
    config = var_child_runnable_config.get()
    if config is None or TAG_NOSTREAM in (config.get("tags") or ()):
        return None  # outside a run, or already marked (a combination's part)
    return var_child_runnable_config.set(internal_config(config))


def mark_internal(cls: type, *names: str) -> None:
    """Run the methods `names` that `cls` itself defines under `internal_calls`.

    For a base class's `__init_subclass__`: each subclass's own implementation is marked
    once (an inherited one already is).
    """
    for name in names:
        method = cls.__dict__.get(name)
        if callable(method) and not getattr(method, _MARK, False):
            setattr(cls, name, internal(method))


_MARK = "_langgraph_refine_internal"


def internal(method: F) -> F:
    """Run `method` (sync or async) under `internal_calls`: the loop's own model calls.

    Example:
        >>> from langchain_core.runnables.config import ensure_config
        >>> class Judge:
        ...     @internal
        ...     def evaluate(self, response):
        ...         return ensure_config()["tags"]
        >>> token = var_child_runnable_config.set({"tags": ["mine"]})  # as in a run
        >>> Judge().evaluate("text")
        ['mine', 'nostream']
        >>> var_child_runnable_config.reset(token)
    """
    if inspect.iscoroutinefunction(method):

        @functools.wraps(method)
        async def amarked(*args: Any, **kwargs: Any) -> Any:
            token = _enter()
            try:
                return await method(*args, **kwargs)
            finally:
                if token is not None:
                    var_child_runnable_config.reset(token)

        setattr(amarked, _MARK, True)
        return cast(F, amarked)

    @functools.wraps(method)
    def marked(*args: Any, **kwargs: Any) -> Any:
        # (No context manager: this runs for every evaluation, and a generator-based
        # one costs more than the rest of a quick check.)
        token = _enter()
        try:
            return method(*args, **kwargs)
        finally:
            if token is not None:
                var_child_runnable_config.reset(token)

    setattr(marked, _MARK, True)
    return cast(F, marked)


def unstreamed(model: M) -> M:
    """`model` as the loop's own calls use it: its reply asked for whole, never streamed.

    LangChain streams a chat model's call whenever a streaming callback is attached (a
    `messages` stream, `astream_events`), a `nostream` call included, whose tokens nobody
    is shown. Streamed, a structured reply costs the same and gains nothing; through
    `langchain-openai` it also logs a pydantic serializer warning per call (`Expected
    'none' ... field_name='parsed'`). So the loop's structured calls go to a copy with
    LangChain's `disable_streaming` set; a model that cannot stream, or already does
    not, is used as it is.

    Example:
        >>> from langchain_core.language_models import GenericFakeChatModel
        >>> model = GenericFakeChatModel(messages=iter([]))
        >>> (unstreamed(model).disable_streaming, model.disable_streaming)
        (True, False)
    """
    if kind_of(model) != "chat" or getattr(model, "disable_streaming", False) is True:
        return model
    chat = cast(BaseChatModel, model)
    kind = type(chat)
    if kind._stream is BaseChatModel._stream and kind._astream is BaseChatModel._astream:
        return model  # it cannot stream: nothing to turn off
    return cast(M, chat.model_copy(update={"disable_streaming": True}))


__all__ = [
    "internal",
    "internal_calls",
    "internal_config",
    "internal_metadata",
    "mark_internal",
    "unstreamed",
]

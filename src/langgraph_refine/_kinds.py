"""What kind of thing a user passed: a chat model, a graph or other runnable, or a callable.

Generators, judges and evaluators may each be any of these. The kind is decided here and
only here; the rest of the package asks `kind_of` (or holds an adapter chosen by it, see
`_adapters`) and never tests the type itself.
"""

from __future__ import annotations

from typing import Any, Literal

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import Runnable

Kind = Literal["chat", "runnable", "callable"]
"""A chat model, a graph or other runnable, or a plain (sync or async) callable."""


def kind_of(obj: Any) -> Kind | None:
    """The kind of `obj`, or None if it is none of them.

    Example:
        >>> kind_of(len), kind_of("text")
        ('callable', None)
    """
    if isinstance(obj, BaseChatModel):
        return "chat"
    if isinstance(obj, Runnable):
        return "runnable"
    return "callable" if callable(obj) else None


def chat_model_of(obj: Any) -> BaseChatModel | None:
    """The chat model `obj` is, or wraps through runnable bindings (`bind`, `with_retry`)."""
    for _ in range(8):  # bindings nest shallowly; never loop on a cycle
        if kind_of(obj) == "chat":
            return obj  # type: ignore[no-any-return]
        bound = getattr(obj, "bound", None) or getattr(obj, "runnable", None)
        if bound is None:
            return None
        obj = bound
    return None


def model_name(obj: Any) -> str:
    """The model as LangChain reports it (`provider:model`), else its class or function name.

    A runnable that wraps a chat model (`model.bind(...)`, `model.with_retry()`) names
    that model; a callable is named by its function name.

    Example:
        >>> def write(state): return "text"
        >>> model_name(write)
        'write'
    """
    model = chat_model_of(obj)
    if model is not None:
        try:
            params = model._get_ls_params()
        except Exception:  # a model whose tracing parameters cannot be built
            params = {}
        provider, name = params.get("ls_provider"), params.get("ls_model_name")
        if name:
            return f"{provider}:{name}" if provider else str(name)
        return type(model).__name__
    if kind_of(obj) == "runnable":
        return type(obj).__name__
    name = getattr(obj, "__name__", None)
    return str(name) if name else type(obj).__name__

"""Chat-model plumbing: resolving `"provider:model"` strings and reading replies."""

from __future__ import annotations

from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage


def resolve_chat_model(model: BaseChatModel | str, *, option: str) -> BaseChatModel:
    """Return `model` itself, or the chat model a `"provider:model"` string names.

    Strings are resolved with LangChain's `init_chat_model`. A bare model name (no
    provider) is served over the OpenAI protocol, so `OPENAI_BASE_URL` can point it at
    any OpenAI-compatible server.

    Args:
        model: A chat model or a model string.
        option: The option name, for error messages.

    Raises:
        ImportError: If the package behind `init_chat_model` is not installed.
        ValueError: If the string is empty.
    """
    if isinstance(model, BaseChatModel):
        return model
    if not model.strip():
        raise ValueError(
            f"{option} must be a chat model or a 'provider:model' string, got {model!r}"
        )
    try:
        from langchain.chat_models import init_chat_model
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            f"{option}={model!r} needs LangChain's init_chat_model: "
            "pip install 'langgraph-refine[providers]' (and the provider's package, "
            "e.g. 'langgraph-refine[openai]')"
        ) from exc
    provider = None if ":" in model else "openai"
    # The loop's own retry policy handles transient errors; client-side retries would
    # multiply with it.
    return init_chat_model(model, model_provider=provider, max_retries=0)


def message_text(message: Any) -> str:
    """The text of a model reply (a message, or a plain string)."""
    if isinstance(message, str):
        return message
    if isinstance(message, BaseMessage):
        return message.text
    raise TypeError(f"expected a string or a chat message, got {type(message).__name__}")

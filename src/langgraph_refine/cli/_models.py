"""Chat models for the command line: `--model` / `--base-url`, or the environment.

A `"provider:model"` string goes to LangChain's `init_chat_model`; a bare name (or a name
whose prefix is not a LangChain provider, such as `smollm2:135m`) is served over the OpenAI
protocol, so `--base-url` / `OPENAI_BASE_URL` can point it at any OpenAI-compatible server.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from langchain_core.caches import BaseCache
from langchain_core.language_models import BaseChatModel

from langgraph_refine.cli._errors import CliError

MODEL_ENV = "REFINE_MODEL"
BASE_URL_ENV = "OPENAI_BASE_URL"
API_KEY_ENV = "OPENAI_API_KEY"
CONNECT_TIMEOUT = 10.0
"""Seconds to wait for a TCP connection: an unreachable server fails fast."""


@dataclass(frozen=True)
class ModelSettings:
    """How to build the chat models of one command.

    Attributes:
        model: `--model`, or `REFINE_MODEL` from the environment.
        base_url: `--base-url`, or `OPENAI_BASE_URL` from the environment.
        judge_model: `--judge-model` (None: the judge uses `model`).
        timeout: Seconds one model call may take.
        cache: The model cache every model shares, if `--cache` was given.
    """

    model: str | None
    base_url: str | None = None
    judge_model: str | None = None
    timeout: float = 120.0
    cache: BaseCache | None = None

    @classmethod
    def from_options(
        cls,
        model: str | None,
        base_url: str | None,
        judge_model: str | None,
        *,
        timeout: float = 120.0,
        cache: BaseCache | None = None,
    ) -> ModelSettings:
        """Fill in what the options leave out from the environment."""
        return cls(
            model=_clean(model) or _clean(os.environ.get(MODEL_ENV)),
            base_url=_clean(base_url) or _clean(os.environ.get(BASE_URL_ENV)),
            judge_model=_clean(judge_model),
            timeout=timeout,
            cache=cache,
        )

    def describe_endpoint(self) -> str:
        """Where OpenAI-protocol requests go, for error messages."""
        return self.base_url or "the provider's default endpoint"

    def generator(self) -> BaseChatModel:
        """The generator's chat model.

        Raises:
            CliError: If no model is configured or it cannot be built.
        """
        if not self.model:
            raise CliError(
                "no model given: pass --model NAME (a 'provider:model' string or a model name "
                f"served over the OpenAI protocol) or set {MODEL_ENV}"
            )
        return build_chat_model(self.model, self, option="--model")

    def judge(self) -> BaseChatModel:
        """The LLM judge's chat model: `--judge-model`, else the generator's."""
        if self.judge_model:
            return build_chat_model(self.judge_model, self, option="--judge-model")
        return self.generator()


def _clean(value: str | None) -> str | None:
    return value.strip() if value and value.strip() else None


def build_chat_model(name: str, settings: ModelSettings, *, option: str) -> BaseChatModel:
    """Build one chat model by name.

    Args:
        name: A `"provider:model"` string or a model name (OpenAI protocol).
        settings: Base URL, timeout and cache.
        option: The option that named the model, for error messages.

    Raises:
        CliError: If the provider is unknown, its package is missing, or the client
            rejects its settings (e.g. no API key).
    """
    try:
        from langchain.chat_models import init_chat_model
    except ImportError:
        raise CliError(
            f"{option} {name!r} needs LangChain's init_chat_model: "
            "pip install 'langgraph-refine[providers,openai]'"
        ) from None
    provider, model = _split(name)
    if provider is not None:
        try:
            return _init(init_chat_model, model, provider, settings)
        except CliError:
            raise
        except ValueError as exc:
            if "unsupported" not in str(exc).lower() or "provider" not in str(exc).lower():
                raise CliError(f"{option} {name!r}: {_one_line(exc)}") from None
            # Not a LangChain provider prefix: the whole string is a model name.
        except Exception as exc:
            raise CliError(f"{option} {name!r}: {_one_line(exc)}") from None
    try:
        return _init(init_chat_model, name, "openai", settings)
    except CliError:
        raise
    except Exception as exc:
        raise CliError(f"{option} {name!r}: {_one_line(exc)}") from None


def _split(name: str) -> tuple[str | None, str]:
    if ":" not in name:
        return None, name
    provider, _, model = name.partition(":")
    return provider.strip().lower().replace("-", "_"), model.strip()


def _init(init: Any, model: str, provider: str, settings: ModelSettings) -> BaseChatModel:
    # The loop's retry policy handles transient errors; client retries would multiply it.
    kwargs: dict[str, Any] = {"max_retries": 0}
    if settings.cache is not None:
        kwargs["cache"] = settings.cache
    if provider == "openai":
        import httpx

        kwargs["timeout"] = httpx.Timeout(settings.timeout, connect=CONNECT_TIMEOUT)
        if settings.base_url:
            kwargs["base_url"] = settings.base_url
            # OpenAI-compatible local servers ignore the key, but the client insists on one.
            if not os.environ.get(API_KEY_ENV):
                kwargs["api_key"] = "unused"
    elif settings.base_url:
        kwargs["base_url"] = settings.base_url
    try:
        chat_model: BaseChatModel = init(model, model_provider=provider, **kwargs)
    except ImportError as exc:
        extra = " (pip install 'langgraph-refine[openai]')" if provider == "openai" else ""
        raise CliError(
            f"model provider {provider!r} needs its package{extra}: {_one_line(exc)}"
        ) from None
    return chat_model


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__

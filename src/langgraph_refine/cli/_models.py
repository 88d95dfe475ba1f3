"""Chat models for the command line: `--model` / `--base-url`, or the environment.

Model strings are resolved by the library's `resolve_chat_model` (the same rule and the
same messages as `create_refine_graph` and the server graphs): a `"provider:model"` string
names a LangChain provider; a bare name, or a name whose prefix is not a provider (such as
`qwen2.5:7b`), is served over the OpenAI protocol, so `--base-url` / `OPENAI_BASE_URL` can
point it at any OpenAI-compatible server. Every model gets the generation cap
(`--max-tokens`).

A command builds each model once: `ModelSettings` keeps what it built, so the generator,
the judge, a comparer and every batch line that names the same model share one client.

Every OpenAI-protocol model of one command shares one pair of HTTP clients (`HttpClients`,
see `_http`): one connection pool and one SSL context for the generator and the judge of
every task of a batch, instead of a pool and a freshly loaded certificate bundle per model.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from langchain_core.caches import BaseCache
from langchain_core.language_models import BaseChatModel

from langgraph_refine._calls._models import (
    DEFAULT_MAX_TOKENS,
    OPENAI,
    max_tokens_setting,
    model_route,
    one_line,
    resolve_chat_model,
)
from langgraph_refine._loop._resolve import loop_models
from langgraph_refine.cli._errors import USAGE, CliError
from langgraph_refine.cli._http import HttpClients

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
        max_tokens: Output tokens one model call may generate.
        cache: The model cache every model shares, if `--cache` was given.
        http: The HTTP clients every OpenAI-protocol model of the command shares.
        ladder: The models after `model` when `--model` was repeated: a ladder of
            models, cheapest first (see `cli._ladder_view`).

    The settings belong to one command, and keep the models it built (`chat_model`,
    `judge`): the command builds each once, however many of its parts ask.
    """

    model: str | None
    base_url: str | None = None
    judge_model: str | None = None
    timeout: float = 120.0
    max_tokens: int = DEFAULT_MAX_TOKENS
    cache: BaseCache | None = None
    http: HttpClients = field(default_factory=HttpClients, compare=False, repr=False)
    ladder: tuple[str, ...] = ()
    # What the command built: ("model", name) for a model, ("judge", "") for the judge.
    _built: dict[tuple[str, str], BaseChatModel] = field(
        default_factory=dict, init=False, compare=False, repr=False
    )

    @classmethod
    def from_options(
        cls,
        model: str | None,
        base_url: str | None,
        judge_model: str | None,
        *,
        timeout: float = 120.0,
        max_tokens: int | None = None,
        cache: BaseCache | None = None,
    ) -> ModelSettings:
        """Fill in what the options leave out from the environment.

        Raises:
            CliError: If `--max-tokens` or `REFINE_MAX_TOKENS` is not a whole number >= 1.
        """
        try:
            cap = max_tokens_setting(max_tokens)
        except ValueError as exc:
            raise CliError(str(exc), exit_code=2) from None
        return cls(
            model=_clean(model) or _clean(os.environ.get(MODEL_ENV)),
            base_url=_clean(base_url) or _clean(os.environ.get(BASE_URL_ENV)),
            judge_model=_clean(judge_model),
            timeout=timeout,
            max_tokens=cap,
            cache=cache,
        )

    def describe_endpoint(self) -> str:
        """Where OpenAI-protocol requests go, for error messages."""
        return self.base_url or "the provider's default endpoint"

    def chat_model(self, name: str, *, option: str) -> BaseChatModel:
        """The chat model `name` names, built on first use and kept for the command.

        Args:
            name: A `"provider:model"` string or a model name (OpenAI protocol).
            option: The option that named it, for error messages.

        Raises:
            CliError: If it cannot be built (see `build_chat_model`).
        """
        key = ("model", name)
        if key not in self._built:
            self._built[key] = build_chat_model(name, self, option=option)
        return self._built[key]

    def generator(self) -> BaseChatModel | list[BaseChatModel]:
        """The generator's chat model, or the ladder's models (cheapest first).

        Raises:
            CliError: If no model is configured or one cannot be built.
        """
        first = self._first()
        if not self.ladder:
            return first
        return [first, *(self.chat_model(name, option="--model") for name in self.ladder)]

    def judge(self) -> BaseChatModel:
        """The LLM judge's chat model: `--judge-model`, else the library's default judge model.

        The default is decided by the loop's own rule (`loop_models`: the generator's, the
        first rung's in a ladder), the one the graph and the agent use. Decided once per
        command: every check, comparer and batch line that asks gets the same model.
        """
        key = ("judge", "")
        if key not in self._built:
            self._built[key] = self._decide_judge()
        return self._built[key]

    def _decide_judge(self) -> BaseChatModel:
        if self.judge_model:  # named: no generator needed (a batch whose lines name theirs)
            return self.chat_model(self.judge_model, option="--judge-model")
        model = loop_models(self.generator(), None).judge_model
        if model is None:  # a chat model generator always gives one
            raise CliError("no judge model: pass --judge-model NAME", exit_code=USAGE)
        return model

    def _first(self) -> BaseChatModel:
        if not self.model:
            raise CliError(
                "no model given: pass --model NAME (a 'provider:model' string or a model name "
                f"served over the OpenAI protocol) or set {MODEL_ENV}",
                exit_code=USAGE,
            )
        return self.chat_model(self.model, option="--model")


def _clean(value: str | None) -> str | None:
    return value.strip() if value and value.strip() else None


def build_chat_model(name: str, settings: ModelSettings, *, option: str) -> BaseChatModel:
    """Build one chat model by name, with the library's resolver (`resolve_chat_model`).

    A command asks `ModelSettings.chat_model`, which builds each model once with this.

    Args:
        name: A `"provider:model"` string or a model name (OpenAI protocol).
        settings: Base URL, timeout, generation cap and cache.
        option: The option that named the model, for error messages.

    Raises:
        CliError: The resolver's message (`--model 'name': ...`): the provider's package
            is missing or the client rejects its settings (e.g. no API key).
    """
    try:
        return resolve_chat_model(name, option=option, **model_kwargs(name, settings))
    except ValueError as exc:  # ModelStringError: it names the option, the value, the fix
        raise CliError(one_line(exc), exit_code=USAGE) from None


def model_kwargs(name: str, settings: ModelSettings) -> dict[str, Any]:
    """The constructor arguments the command line gives the model `name` names."""
    kwargs: dict[str, Any] = {"max_tokens": settings.max_tokens}
    if settings.cache is not None:
        kwargs["cache"] = settings.cache
    if settings.base_url:
        kwargs["base_url"] = settings.base_url
    provider, _ = model_route(name)
    if provider == OPENAI:
        import httpx

        kwargs["timeout"] = httpx.Timeout(settings.timeout, connect=CONNECT_TIMEOUT)
        kwargs["http_client"], kwargs["http_async_client"] = settings.http.pair()
        # OpenAI-compatible local servers ignore the key, but the client insists on one.
        if settings.base_url and not os.environ.get(API_KEY_ENV):
            kwargs["api_key"] = "unused"
    return kwargs

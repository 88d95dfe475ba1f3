"""Chat-model plumbing: resolving model strings, the generation cap, and reading replies.

`resolve_chat_model` is the one place a model string becomes a chat model, for every
surface: the graph (`create_refine_graph("...")`, a ladder, `judge_model=`, `comparer=`, via
`_loop._resolve.loop_models`), the agent's `RefineMiddleware` (the same), the evaluators
(`llm_judge("...")`, `checklist("...")`), a run's context (`models`, `judge_model`), the
command line and the server graphs. So the same string means the same model everywhere, and
a string that names none fails with one message (`ModelStringError`): the option, the
value, what was wrong and how to fix it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage

from langgraph_refine._errors import RefineError
from langgraph_refine._kinds import kind_of

OPENAI = "openai"

PROVIDERS: frozenset[str] = frozenset(
    {
        "anthropic",
        "anthropic_bedrock",
        "azure_ai",
        "azure_openai",
        "baseten",
        "bedrock",
        "bedrock_converse",
        "bedrock_mantle_anthropic",
        "bedrock_mantle_openai",
        "cohere",
        "deepseek",
        "fireworks",
        "google_anthropic_vertex",
        "google_genai",
        "google_vertexai",
        "groq",
        "huggingface",
        "ibm",
        "langsmith",
        "litellm",
        "meta",
        "mistralai",
        "nvidia",
        "ollama",
        "openai",
        "openrouter",
        "perplexity",
        "together",
        "upstage",
        "xai",
    }
)
"""The `provider:` prefixes a model string may start with.

These are the `model_provider` values LangChain's `init_chat_model` documents. LangChain
keeps its own registry private, so the list is kept here; tests check it against
`init_chat_model`'s documentation. Any other prefix is part of a model name, as in
Ollama-style tags (`qwen2.5:7b`, `smollm2:135m`).
"""

MAX_TOKENS_ENV = "REFINE_MAX_TOKENS"
"""The environment variable that sets the generation cap of the CLI, demo and server."""

DEFAULT_MAX_TOKENS = 512
"""Output tokens one model call may generate, unless `--max-tokens` / `REFINE_MAX_TOKENS` say.

512 tokens (about 380 English words) holds a full paragraph-to-page answer, yet it ends a
runaway generation early: small local models can ramble for thousands of tokens, and the
next refinement prompt, which carries that attempt, would then overflow a small context
(2,048 tokens per slot on a llama.cpp server started with `-c 8192 -np 4`).
"""


def model_route(name: str) -> tuple[str, str]:
    """Split a model string into `(provider, model)`: the one rule for every entry point.

    A string whose prefix before the first colon is one of `PROVIDERS` (case and `-`/`_`
    do not matter) names that provider and the model after the colon. Anything else, a
    bare name or a name whose prefix is not a provider, is a model name served over the
    OpenAI protocol, so `OPENAI_BASE_URL` (or `base_url=`) can point it at any
    OpenAI-compatible server (llama.cpp, vLLM, Ollama's `/v1`).

    Args:
        name: A model string, e.g. `"anthropic:claude-sonnet-4-5"`, `"gpt-4o-mini"` or
            `"qwen2.5:7b"`.

    Returns:
        The provider (a `PROVIDERS` member) and the model name.

    Example:
        >>> model_route("qwen2.5:7b")
        ('openai', 'qwen2.5:7b')
        >>> model_route("Ollama:qwen2.5:7b")
        ('ollama', 'qwen2.5:7b')
    """
    text = name.strip()
    prefix, sep, rest = text.partition(":")
    provider = prefix.strip().lower().replace("-", "_")
    if sep and provider in PROVIDERS and rest.strip():
        return provider, rest.strip()
    return OPENAI, text


class ModelStringError(RefineError, ValueError):
    """A model string that names no chat model this process can build.

    Every surface (`create_refine_graph`, `RefineMiddleware`, `llm_judge`, a comparer, the
    command line, the server) gets this error from `resolve_chat_model`, so one message
    says what was wrong, the value and how to fix it.

    Attributes:
        option: The option or flag that named the model (`generator`, `--judge-model`).
        value: The value it was given.
        reason: What was wrong and how to fix it, without the option and the value.
    """

    def __init__(self, option: str, value: object, reason: str) -> None:
        self.option, self.value, self.reason = option, value, reason
        super().__init__(f"{option_value(option, value)}: {reason}")

    def unusable(self, error: type[ValueError] = ValueError) -> ValueError:
        """This error as a run's context reports a model it names (`models`, `judge_model`).

        Args:
            error: The `ValueError` subclass the caller raises.

        Returns:
            "{option} {value!r} cannot be used: " and the reason, as an `error`.
        """
        return error(f"{self.option} {self.value!r} cannot be used: {self.reason}")


class ModelPackageError(ModelStringError, ImportError):
    """A model string whose provider's package (or LangChain's `init_chat_model`) is missing."""


def option_value(option: str, value: object) -> str:
    """An option and its value as the user wrote them: `generator='x'`, `--model 'x'`.

    A keyword argument is written as Python writes it; a command-line flag (`--model`) or
    a batch line's key (`'model'`) with the value after a space, as on the command line.

    Example:
        >>> option_value("generator", "gpt-4o"), option_value("--model", "gpt-4o")
        ("generator='gpt-4o'", "--model 'gpt-4o'")
    """
    if option.startswith(("-", "'")):
        return f"{option} {value!r}"
    return f"{option}={value!r}"


def resolve_chat_model(model: BaseChatModel | str, *, option: str, **kwargs: Any) -> BaseChatModel:
    """Return `model` itself, or the chat model a model string names (see `model_route`).

    The one place a model string becomes a chat model. Strings are built with LangChain's
    `init_chat_model`, with client-side retries off (`max_retries=0`, unless given): the
    loop's own retry policy handles transient errors, and client retries would multiply
    with it.

    Args:
        model: A chat model (returned unchanged) or a model string.
        option: The option that named the model, for error messages.
        **kwargs: Passed to the chat model's constructor when `model` is a string, e.g.
            `max_tokens`, `temperature`, `timeout`, `base_url`, `api_key`, `cache`.

    Returns:
        The chat model.

    Raises:
        ModelPackageError: An `ImportError`: `init_chat_model` or the provider's package
            is not installed.
        ModelStringError: A `ValueError`: the string is empty, or the provider's client
            rejects its settings (no API key, say).

    Example:
        >>> model = resolve_chat_model(
        ...     "qwen2.5:7b", option="model", base_url="http://127.0.0.1:11434/v1",
        ...     api_key="unused", max_tokens=256,
        ... )  # doctest: +SKIP
    """
    if kind_of(model) == "chat":
        return model  # type: ignore[return-value]
    if not isinstance(model, str) or not model.strip():
        raise ValueError(
            f"{option} must be a chat model or a model string ('provider:model' or a model "
            f"name served over the OpenAI protocol), got {model!r}"
        )
    try:
        from langchain.chat_models import init_chat_model
    except ImportError:  # pragma: no cover - depends on the environment
        raise ModelPackageError(
            option,
            model,
            "needs LangChain's init_chat_model: pip install 'langgraph-refine[providers]' (and "
            "the provider's package, e.g. 'langgraph-refine[openai]')",
        ) from None
    provider, name = model_route(model)
    kwargs.setdefault("max_retries", 0)
    try:
        chat_model: BaseChatModel = init_chat_model(name, model_provider=provider, **kwargs)
    except ImportError as exc:
        extra = " (pip install 'langgraph-refine[openai]')" if provider == OPENAI else ""
        raise ModelPackageError(
            option,
            model,
            f"model provider {provider!r} needs its package{extra}: {one_line(exc)}",
        ) from exc
    except Exception as exc:  # the provider's client refuses its settings (a missing key)
        raise ModelStringError(
            option,
            model,
            f"the {provider} client refuses its settings: {one_line(exc)} (set what it asks "
            "for in the environment, or pass a chat model built with your own settings)",
        ) from exc
    return chat_model


def as_chat_model(model: Any, option: str) -> BaseChatModel | None:
    """`model` as a chat model (a model string resolved), or None if it is no chat model.

    For values that may also be another kind of thing (a generator function, an evaluator).

    Raises:
        ModelStringError: If `model` is a string that names no usable chat model.
    """
    if isinstance(model, str):
        return resolve_chat_model(model, option=option)
    return model if kind_of(model) == "chat" else None


def resolve_generator(generator: Any, option: str) -> Any:
    """A generator or a ladder of them, its model strings as chat models, the rest as given.

    Args:
        generator: One generator, or a list or tuple of them (a ladder, cheapest first).
        option: The option that named it; a rung is named `option[i]`.

    Raises:
        ModelStringError: Naming the first model string that names no usable chat model.
    """
    if isinstance(generator, str):
        return resolve_chat_model(generator, option=option)
    if isinstance(generator, list | tuple):
        return [resolve_generator(g, f"{option}[{i}]") for i, g in enumerate(generator)]
    return generator


def parse_max_tokens(value: object, *, source: str) -> int:
    """Check a generation cap: a whole number of tokens, at least 1.

    Args:
        value: An int, or its text (from the environment).
        source: Where it came from (`--max-tokens`, `REFINE_MAX_TOKENS`), for the message.

    Raises:
        ValueError: If it is not a whole number >= 1.
    """
    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and value.strip().lstrip("+-").isdigit():
        number = int(value.strip())
    if number is None or number < 1:
        raise ValueError(
            f"{source} must be a whole number of tokens >= 1 (e.g. {DEFAULT_MAX_TOKENS}), "
            f"got {value!r}"
        )
    return number


def max_tokens_setting(value: int | None = None, environ: Mapping[str, str] | None = None) -> int:
    """The generation cap: `value` if given, else `REFINE_MAX_TOKENS`, else the default.

    Args:
        value: An explicit cap (the CLI's `--max-tokens`).
        environ: Where to read `REFINE_MAX_TOKENS`; `os.environ` when omitted.

    Raises:
        ValueError: If the chosen value is not a whole number >= 1.
    """
    if value is not None:
        return parse_max_tokens(value, source="--max-tokens")
    env = os.environ if environ is None else environ
    text = env.get(MAX_TOKENS_ENV, "").strip()
    if not text:
        return DEFAULT_MAX_TOKENS
    return parse_max_tokens(text, source=MAX_TOKENS_ENV)


def message_text(message: Any) -> str:
    """The text of a model reply (a message, or a plain string)."""
    if isinstance(message, str):
        return message
    if isinstance(message, BaseMessage):
        return message.text
    raise TypeError(f"expected a string or a chat message, got {type(message).__name__}")


def one_line(exc: BaseException) -> str:
    """An error's message on one line (its type's name if it has none), for a one-line report."""
    return " ".join(str(exc).split()) or type(exc).__name__

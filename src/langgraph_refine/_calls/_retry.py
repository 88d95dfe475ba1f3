"""Retry policy for model-calling steps: retry transient provider errors, never other 4xx."""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from email.utils import parsedate_to_datetime

from langgraph.types import RetryPolicy

RETRYABLE_STATUS = frozenset({408, 409, 429})
MAX_RETRY_AFTER_SECONDS = 60.0


def status_code(exc: BaseException) -> int | None:
    """The HTTP status an exception carries (openai, httpx and similar clients), if any."""
    for candidate in (exc, getattr(exc, "response", None)):
        code = getattr(candidate, "status_code", None)
        if isinstance(code, int):
            return code
    return None


def is_transient(exc: BaseException) -> bool:
    """True for errors worth retrying, read through the whole exception chain.

    Transient: a connection error or timeout (the standard library's, or a client
    library's transport error: httpx, httpcore, aiohttp, openai, ...), HTTP 408, 409,
    429 or 5xx, and a 2xx reply whose body could not be read (see `malformed_reply`).
    A client library often wraps the transport's error in its own (`raise ... from`),
    or collects it in an exception group: every error in the chain (`__cause__`,
    `__context__`, an `ExceptionGroup`'s members) is read, the outermost status first.
    """
    for error in exception_chain(exc):
        if malformed_reply(error):
            return True
        code = status_code(error)
        if code is not None and code >= 400:  # the outermost error status decides
            return code in RETRYABLE_STATUS or code >= 500
        if _is_transport_error(error):
            return True
    return False


def exception_chain(exc: BaseException, limit: int = 32) -> list[BaseException]:
    """`exc` and every error behind it: causes, contexts and exception groups' members.

    Breadth-first, the outermost first; each error once, at most `limit` of them.
    """
    seen: list[BaseException] = []
    queue = [exc]
    while queue and len(seen) < limit:
        error = queue.pop(0)
        if any(error is known for known in seen):
            continue
        seen.append(error)
        if isinstance(error, BaseExceptionGroup):
            queue.extend(error.exceptions)
        queue.extend(e for e in (error.__cause__, error.__context__) if e is not None)
    return seen


# Transport failures by class name, so that no client library is a hard dependency:
# openai's and anthropic's, httpx's and httpcore's (`TransportError`, `TimeoutException`,
# `ReadError`, `RemoteProtocolError`, ...), aiohttp's and requests'.
_TRANSPORT_NAMES = frozenset(
    {
        "APIConnectionError",
        "APITimeoutError",
        "TransportError",
        "TimeoutException",
        "NetworkError",
        "ProtocolError",
        "ConnectError",
        "ReadError",
        "WriteError",
        "CloseError",
        "RemoteProtocolError",
        "ReadTimeout",
        "ConnectTimeout",
        "WriteTimeout",
        "PoolTimeout",
        "ClientConnectionError",
        "ClientPayloadError",
        "ServerDisconnectedError",
        "ServerTimeoutError",
        "ChunkedEncodingError",
        "IncompleteRead",
    }
)


def _is_transport_error(exc: BaseException) -> bool:
    if isinstance(exc, ConnectionError | TimeoutError):
        return True
    return any(cls.__name__ in _TRANSPORT_NAMES for cls in type(exc).__mro__)


# Where a provider's reply is read: an error of a parsing kind raised in one of these
# packages is a reply that could not be read, not a bug of the caller's.
_CLIENT_PACKAGES = (
    "openai",
    "anthropic",
    "httpx",
    "httpcore",
    "aiohttp",
    "json",
    "langchain_openai",
    "langchain_anthropic",
    "langchain_ollama",
    "langchain_google_genai",
    "langchain_core.language_models",  # a reply with no generation in it
    "langchain_core.outputs",
)
_PARSE_ERRORS = (ValueError, TypeError, KeyError, IndexError, AttributeError)


def malformed_reply(exc: BaseException) -> bool:
    """True for a provider reply (HTTP 2xx) whose body could not be read.

    A truncated or garbled body (`JSONDecodeError`), a client's own "the reply is not
    what the API promises" (`APIResponseValidationError`), or a parsing error (a missing
    `choices`, an empty list) raised inside the provider's client while it read the
    reply. Such a reply is retried like a dropped connection: the next one is usually
    whole. A `ValueError` raised by the caller's own code is not one.
    """
    names = {cls.__name__ for cls in type(exc).__mro__}
    if names & {"JSONDecodeError", "APIResponseValidationError", "IncompleteJSONError"}:
        return True
    if not isinstance(exc, _PARSE_ERRORS) or exc.__traceback__ is None:
        return False
    frame = exc.__traceback__
    while frame.tb_next is not None:  # the innermost frame raised it
        frame = frame.tb_next
    module = str(frame.tb_frame.f_globals.get("__name__", ""))
    return any(module == p or module.startswith(p + ".") for p in _CLIENT_PACKAGES)


def retry_after_seconds(exc: BaseException) -> float | None:
    """Seconds a `Retry-After` header on the exception's response asks to wait, if any."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    value = headers.get("retry-after-ms")
    if value is not None:
        try:
            return min(float(value) / 1000.0, MAX_RETRY_AFTER_SECONDS)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            seconds = parsedate_to_datetime(value).timestamp() - time.time()
        except (TypeError, ValueError):
            return None
    return max(0.0, min(seconds, MAX_RETRY_AFTER_SECONDS))


def retry_follows(
    exc: BaseException,
    policy: RetryPolicy | Sequence[RetryPolicy] | None,
    attempt: int | None,
) -> RetryPolicy | None:
    """The policy that will retry the call after `exc`, or None if no retry follows.

    As in LangGraph, the first policy that retries the error applies, and it retries
    while `attempt` (this try's number, 1 = first) is below its `max_attempts`.

    Args:
        exc: The error the call failed with.
        policy: The retry policy or policies (None: no retry follows).
        attempt: This try's number, or None if unknown (no retry known).
    """
    policies = [policy] if isinstance(policy, RetryPolicy) else list(policy or [])
    chosen = next((p for p in policies if _retries(p, exc)), None)
    if chosen is None or attempt is None or attempt >= chosen.max_attempts:
        return None
    return chosen


def policy_tries(policy: RetryPolicy | Sequence[RetryPolicy] | None) -> int:
    """The most requests one call may send under `policy`: its largest `max_attempts` (1: none).

    Example:
        >>> policy_tries(None), policy_tries(RetryPolicy(max_attempts=4))
        (1, 4)
    """
    policies = [policy] if isinstance(policy, RetryPolicy) else list(policy or [])
    return max((p.max_attempts for p in policies), default=1)


def retry_wait(exc: BaseException, policy: RetryPolicy, tries: int) -> float:
    """Seconds to wait before `policy` retries a call that failed `tries` times with `exc`.

    Only called when a retry follows (see `retry_follows`). The policy's exponential
    backoff, as LangGraph computes it for a node (`initial_interval` times
    `backoff_factor` per earlier failure, capped by `max_interval`, plus up to a second
    of jitter when asked), and on top the server's `Retry-After`, capped by
    `max_interval` too, so a server cannot park the loop.
    """
    backoff = min(
        policy.max_interval, policy.initial_interval * policy.backoff_factor ** (tries - 1)
    )
    if policy.jitter:
        backoff += random.uniform(0, 1)
    return backoff + min(retry_after_seconds(exc) or 0.0, policy.max_interval)


def _retries(policy: RetryPolicy, exc: BaseException) -> bool:
    retry_on = policy.retry_on
    if isinstance(retry_on, type):
        return isinstance(exc, retry_on)
    if isinstance(retry_on, Sequence):
        return isinstance(exc, tuple(retry_on))
    return bool(retry_on(exc)) if isinstance(exc, Exception) else False


DEFAULT_RETRY_POLICY = RetryPolicy(
    initial_interval=0.5,
    backoff_factor=2.0,
    max_interval=10.0,
    max_attempts=4,
    jitter=True,
    retry_on=is_transient,
)
"""Up to 4 attempts with exponential backoff from 0.5 s, on transient errors only."""


_CONTEXT_PHRASES = (
    "context_length_exceeded",
    "exceeds the available context size",
    "maximum context length",
    "context length exceeded",
    "context window",
    "too many tokens",
    "prompt is too long",
)


def is_context_length_error(exc: BaseException) -> bool:
    """True for a provider's "the prompt does not fit the context" error.

    OpenAI answers HTTP 400 with code `context_length_exceeded`; llama.cpp, vLLM and
    Ollama answer 400 with a message saying the request exceeds the context size.
    """
    code = status_code(exc)
    if code is not None and code not in (400, 413):
        return False
    if getattr(exc, "code", None) == "context_length_exceeded":
        return True
    text = " ".join(str(part) for part in (exc, getattr(exc, "body", ""))).lower()
    return any(phrase in text for phrase in _CONTEXT_PHRASES)


def describe_status(exc: BaseException) -> str | None:
    """A short 'HTTP 401' style label for errors that carry a status, else None."""
    code = status_code(exc)
    return f"HTTP {code}" if code is not None else None

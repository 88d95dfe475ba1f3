"""The loop's hold on the provider clients of the chat models it calls: retries and deadlines.

A chat model's provider client may retry a failed request by itself (ChatOpenAI's and
ChatAnthropic's `max_retries`, 2 by default, inside the provider's SDK). Those requests
never reach LangChain's callbacks: the budget could neither count nor bound them, and a
request the loop gave up on at its deadline would be sent again after the run returned.
So the loop calls such a model through a copy it holds (`held`), the user's object
unchanged:

- the client's own retries are off: the loop's retry policy retries instead, and every
  request it sends is one call the meter counts and the budget may refuse;
- every request of an OpenAI-protocol client is sent with a timeout no longer than what
  the run's deadline leaves (`deadline`, set by the step around each call): a request cut
  off by `max_seconds` closes its socket at the deadline instead of waiting for a reply
  the run no longer reads.

A kind whose retries cannot be taken over is named once in a warning saying what to set.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

import httpx
from langchain_core.language_models import BaseChatModel

logger = logging.getLogger("langgraph_refine")

_DEADLINE: ContextVar[float | None] = ContextVar("langgraph_refine_deadline", default=None)
"""The `time.monotonic()` by which the requests sent in this context must be over."""

_OPENAI_CLIENTS = ("root_client", "root_async_client")
_FRESH = httpx.Limits(max_keepalive_connections=0)  # every request on a connection of its own
# A cached provider client built from the model's fields on first use (langchain-anthropic):
# dropped from a copy, so the copy builds its own with the copy's settings.
_CACHED_CLIENTS = ("_client_params", "_client", "_async_client")


@contextlib.contextmanager
def deadline(seconds_left: float | None) -> Iterator[None]:
    """Requests sent inside this block end within `seconds_left` seconds (None: no limit).

    A deadline set further out keeps the nearer one already in force (a nested loop).
    """
    if seconds_left is None:
        yield
        return
    at = time.monotonic() + seconds_left
    outer = _DEADLINE.get()
    token = _DEADLINE.set(at if outer is None else min(at, outer))
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def bounded_timeout(request: httpx.Request) -> None:
    """Cap the request's timeouts (connect, read, write, pool) at the time the deadline leaves.

    Raises:
        httpx.TimeoutException: If the deadline has already passed (nothing is sent).
    """
    at = _DEADLINE.get()
    if at is None:
        return
    left = at - time.monotonic()
    if left <= 0:
        raise httpx.PoolTimeout("max_seconds reached before the request was sent", request=request)
    given = request.extensions.get("timeout") or {}
    request.extensions["timeout"] = {
        name: left if (value := given.get(name)) is None else min(value, left)
        for name in ("connect", "read", "write", "pool")
    }


_SOCKETS: ContextVar[list[Any] | None] = ContextVar("langgraph_refine_sockets", default=None)
"""The network streams opened for requests in this context, when it may be interrupted."""


@contextlib.contextmanager
def interruptible() -> Iterator[list[Any]]:
    """Requests sent in this block on a fresh connection each, its stream kept (`interrupt`).

    For a sync call run in a thread of its own: when the caller's thread is interrupted
    (Ctrl-C), its requests are closed at once rather than at their deadline.
    """
    streams: list[Any] = []
    token = _SOCKETS.set(streams)
    try:
        yield streams
    finally:
        _SOCKETS.reset(token)


def interrupt(streams: list[Any]) -> None:
    """Shut the connections of `streams` down: a thread blocked reading one returns at once."""
    for stream in streams:
        sock = stream.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


def _kept(streams: list[Any], given: Any) -> Any:
    """A trace hook (httpx's `trace` extension) keeping each new connection's stream."""

    def trace(event: str, info: dict[str, Any]) -> None:
        if event == "connection.connect_tcp.complete" and info.get("return_value") is not None:
            streams.append(info["return_value"])
        if given is not None:
            given(event, info)

    return trace


class _Bounded(httpx.BaseTransport):
    """Sends each request through `client` with its timeouts capped by the deadline.

    In an `interruptible` block, requests go through `fresh` (no connection kept alive),
    so each one's connection is known and can be shut down.
    """

    def __init__(self, client: httpx.Client, fresh: httpx.Client | None = None) -> None:
        self._client = client
        self._fresh = fresh

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        bounded_timeout(request)
        streams = _SOCKETS.get()
        if streams is None or self._fresh is None:
            return self._client.send(request, stream=True)
        request.extensions["trace"] = _kept(streams, request.extensions.get("trace"))
        return self._fresh.send(request, stream=True)


class _AsyncBounded(httpx.AsyncBaseTransport):
    """Async twin of `_Bounded`: a cancelled request closes its connection (httpx's own rule)."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self._client = client

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        bounded_timeout(request)
        return await self._client.send(request, stream=True)


def _inner(given: Any, kind: type[httpx.Client] | type[httpx.AsyncClient]) -> Any:
    """The client requests go through: the user's own, else one like the SDK's default."""
    if isinstance(given, kind):
        return given
    # The OpenAI SDK's default limits (many connections: a batch runs many loops at once).
    limits = httpx.Limits(max_connections=1000, max_keepalive_connections=100)
    return kind(limits=limits, timeout=None, follow_redirects=True)


def _openai_copy(model: BaseChatModel) -> BaseChatModel:
    """A copy of an OpenAI-SDK model (ChatOpenAI, AzureChatOpenAI, ...) with retries off."""
    update: dict[str, Any] = {"max_retries": 0}
    root = getattr(model, "root_client", None)
    if root is not None:
        given = getattr(model, "http_client", None)
        # The user's own client keeps its connections; ours can send on fresh ones.
        fresh = None if given is not None else _fresh_client()
        sync = httpx.Client(transport=_Bounded(_inner(given, httpx.Client), fresh))
        update["root_client"] = root.with_options(max_retries=0, http_client=sync)
        update["client"] = update["root_client"].chat.completions
    aroot = getattr(model, "root_async_client", None)
    if aroot is not None:
        given = getattr(model, "http_async_client", None)
        transport = _AsyncBounded(_inner(given, httpx.AsyncClient))
        update["root_async_client"] = aroot.with_options(
            max_retries=0, http_client=httpx.AsyncClient(transport=transport)
        )
        update["async_client"] = update["root_async_client"].chat.completions
    return model.model_copy(update=update)


def _fields_copy(model: BaseChatModel) -> BaseChatModel:
    """A copy with `max_retries=0` whose provider client is built again from it (ChatAnthropic).

    Its requests keep the client's own timeouts (the Anthropic SDK takes no httpx client
    of ours): a sync call cut off at the deadline is left to them.
    """
    copy = model.model_copy(update={"max_retries": 0})
    for name in _CACHED_CLIENTS:
        copy.__dict__.pop(name, None)
    return copy


def _fresh_client() -> httpx.Client:
    """A client keeping no connection alive: each request's connection is its own."""
    return httpx.Client(limits=_FRESH, follow_redirects=True)


def _takes_over(model: BaseChatModel) -> str | None:
    """How the loop turns this model's client retries off: "openai", "fields" or None."""
    if any(hasattr(getattr(model, name, None), "with_options") for name in _OPENAI_CLIENTS):
        return "openai"
    if "max_retries" in getattr(type(model), "model_fields", {}) and any(
        hasattr(type(model), name) for name in _CACHED_CLIENTS
    ):
        return "fields"
    return None


def _retries(model: BaseChatModel) -> int | None:
    """The model's own `max_retries`, when it has one (None for ChatOpenAI's SDK default 2)."""
    value = getattr(model, "max_retries", None)
    return value if isinstance(value, int) else None


class _Copies:
    """The held copy of each model the loop calls, made once per model object.

    Entries keep their model alive, so an entry's key (the object's identity) is never
    reused by another model while it is held; the oldest are let go past `size`.
    """

    def __init__(self, size: int = 256) -> None:
        self._size = size
        self._entries: OrderedDict[int, tuple[Any, BaseChatModel]] = OrderedDict()
        self._lock = threading.Lock()
        self._warned: set[str] = set()

    def get(self, model: BaseChatModel) -> BaseChatModel:
        key = id(model)
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry[0] is model:
                self._entries.move_to_end(key)
                return entry[1]
        copy = self._make(model)
        with self._lock:
            self._entries[key] = (model, copy)
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)
        return copy

    def _make(self, model: BaseChatModel) -> BaseChatModel:
        how = _takes_over(model)
        if how == "openai":
            return _openai_copy(model)
        if how == "fields":
            return _fields_copy(model) if _retries(model) != 0 else model
        if _retries(model):  # retries the loop cannot see, on a kind it cannot take over
            self._warn(model)
        return model

    def _warn(self, model: BaseChatModel) -> None:
        name = type(model).__name__
        if name in self._warned:
            return
        self._warned.add(name)
        logger.warning(
            "%s retries failed requests itself (max_retries=%s): those requests are not "
            "counted in usage or bounded by max_calls. Build it with max_retries=0; the "
            "loop's retry policy retries instead.",
            name,
            _retries(model),
        )


_COPIES = _Copies()


def held(model: BaseChatModel) -> BaseChatModel:
    """The copy of `model` the loop calls: client retries off, requests bounded by the deadline.

    The user's object is unchanged; the same model gives the same copy (its connections
    are reused). A model without retries of its own is returned as it is.

    Example:
        >>> from langchain_openai import ChatOpenAI
        >>> user = ChatOpenAI(model="m", base_url="http://127.0.0.1:9/v1", api_key="k")
        >>> held(user).root_client.max_retries, user.root_client.max_retries
        (0, 2)
    """
    return _COPIES.get(model)

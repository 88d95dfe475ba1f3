"""One HTTP client pair and one SSL context for every OpenAI-protocol model of a command.

`HttpClients` builds the sync and async clients the command's chat models share
(`ChatOpenAI(http_client=..., http_async_client=...)`): the generator and the judge of
every task of a batch send their requests through the same client, its keep-alive
connections are reused, and the certificate bundle is loaded once. The async client
spreads a batch's workers over `LANES` connection pools (see `LANE`).

Each pool is httpcore's own, with one change that matters under load: before it
reuses or keeps an idle connection, the pool asks whether the server closed it, and the
stock asyncio stream answers by rebuilding a dictionary of socket attributes (with a
system call for the peer's address) for every idle connection, on every request and
every response. With tens of requests in flight that scan is a tenth of the command's
CPU; `ReadyWatch` answers all the questions of one turn of the event loop with one
`poll`. Everything else is the HTTP library's: requests, responses, timeouts, and its
exceptions (httpcore's are mapped to httpx's by name, as httpx's own transport does).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import importlib
import os
import select
import socket
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from types import ModuleType
from typing import Any

KEEPALIVE_CONNECTIONS = 256
"""Idle connections a pool keeps open: more than a batch's tasks in flight, so
connections are reused rather than closed and opened again under load."""

LANES = 8
"""Connection pools the async client spreads a batch's workers over (see `LANE`)."""

LANE: contextvars.ContextVar[int] = contextvars.ContextVar("langgraph_refine_lane", default=0)
"""The lane of the running task's requests: a batch worker sets its own number.

httpcore's pool looks at every connection it holds on every request and every response,
so at 64 tasks in flight a pool of 64 connections spends more on that scan than on the
request. Worker `n` sends through pool `n % LANES`: a worker's calls follow one another,
so each pool holds about its workers' share of the connections, and the connections
opened stay one per task in flight, as with one pool."""


class HttpClients:
    """One SSL context and one sync and one async HTTP client, built on first use."""

    def __init__(self) -> None:
        self._clients: tuple[Any, Any] | None = None

    def pair(self) -> tuple[Any, Any]:
        """The sync and the async client (built on the first call)."""
        if self._clients is None:
            self._clients = _build()
        return self._clients

    async def aclose(self) -> None:
        """Close both clients (their connections); the next `pair()` builds new ones."""
        if self._clients is not None:
            sync, async_ = self._clients
            self._clients = None
            sync.close()
            await async_.aclose()


def _build() -> tuple[Any, Any]:
    import httpx
    import openai

    httpx_, httpcore = _libraries()
    # The SSL context httpx would build (certifi, or SSL_CERT_FILE / SSL_CERT_DIR), made once.
    context = httpx.create_ssl_context()
    default = openai.DEFAULT_CONNECTION_LIMITS
    keepalive = max(KEEPALIVE_CONNECTIONS, default.max_keepalive_connections or 0)
    options = socket_options()

    def pool() -> Any:
        return httpcore.AsyncConnectionPool(
            ssl_context=context,
            max_connections=default.max_connections,
            max_keepalive_connections=keepalive,
            keepalive_expiry=default.keepalive_expiry,
            socket_options=options,
            network_backend=_backend(httpcore)(),
        )

    transport = _transport(httpx_, httpcore)(pool)
    sync = openai.DefaultHttpxClient(
        verify=context,
        transport=httpx_.HTTPTransport(verify=context, socket_options=options, limits=default),
    )
    return sync, openai.DefaultAsyncHttpxClient(verify=context, transport=transport)


def _libraries() -> tuple[ModuleType, ModuleType]:
    """The httpx and httpcore the OpenAI SDK is built on (`httpx2`/`httpcore2` from openai 3)."""
    import openai

    httpx_name = type(openai.DEFAULT_CONNECTION_LIMITS).__module__.partition(".")[0]
    httpx_ = importlib.import_module(httpx_name)
    return httpx_, importlib.import_module(httpx_name.replace("httpx", "httpcore"))


def socket_options() -> list[tuple[int, int, int]]:
    """TCP keepalive, as LangChain's OpenAI models set it on the clients they build.

    A silent peer (a dropped NAT entry, a dead server) then fails a call within about two
    minutes instead of hanging until `--timeout`. `LANGCHAIN_OPENAI_TCP_KEEPALIVE=0`
    turns it off, as for LangChain's own clients.
    """
    if os.environ.get("LANGCHAIN_OPENAI_TCP_KEEPALIVE", "1") == "0":
        return []
    options = [(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)]
    if sys.platform == "linux":
        options += [
            (socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, 60),
            (socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, 10),
            (socket.IPPROTO_TCP, socket.TCP_KEEPCNT, 3),
            (socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, 120_000),
        ]
    return options


class ReadyWatch:
    """Answers whether a read on a pool's socket would return at once (as httpcore asks).

    The pool asks about every idle connection on every request and every response (about
    60 questions a model call at 64 in flight). One `poll` of every watched socket
    answers all the questions asked in one turn of the event loop: the pool asks them in
    one pass, without awaiting, so the sockets are seen as at the start of that pass, as
    one `poll` each would see them up to the microseconds between two questions.
    """

    def __init__(self) -> None:
        self._poller: Any = select.poll() if hasattr(select, "poll") else None
        self._owners: dict[int, object] = {}  # fd -> the stream that registered it
        self._ready: set[int] | None = None  # readable fds this turn (None: not polled)

    def watch(self, sock: socket.socket, owner: object) -> int:
        """Watch `sock` for `owner` (its stream); returns the descriptor to ask about."""
        fd = sock.fileno()
        if fd != -1 and self._poller is not None:
            self._poller.register(fd, select.POLLIN)  # a reused fd: registered anew
            self._owners[fd] = owner
        return fd

    def forget(self, fd: int, owner: object) -> None:
        """Stop watching `fd`, unless another stream has registered it since."""
        if self._owners.get(fd) is owner:
            del self._owners[fd]
            with contextlib.suppress(KeyError, ValueError, OSError):
                self._poller.unregister(fd)

    def readable(self, sock: socket.socket, fd: int) -> bool:
        """True when a read would not wait: data, the server's close, or a closed socket."""
        if fd == -1 or sock.fileno() != fd:
            return True  # closed (or its descriptor reused): httpcore drops the connection
        if self._poller is None:  # Windows: no poll
            ready, _, _ = select.select([fd], [], [], 0)
            return bool(ready)
        if self._ready is None:
            self._ready = {found for found, _ in self._poller.poll(0)}
            try:
                asyncio.get_running_loop().call_soon(self._expire)
            except RuntimeError:  # no running loop: answer this question only
                polled, self._ready = self._ready, None
                return fd in polled
        return fd in self._ready

    def _expire(self) -> None:
        self._ready = None


def _backend(httpcore: ModuleType) -> type[Any]:
    """The asyncio backend of httpcore, with streams that answer `is_readable` cheaply."""
    watch = ReadyWatch()  # one per pool (a backend serves one pool)

    class _NetworkStream(httpcore.AsyncNetworkStream):  # type: ignore[misc,name-defined]
        def __init__(self, inner: Any) -> None:
            self._inner = inner
            self._socket = inner.get_extra_info("socket")
            self._fd = -1 if self._socket is None else watch.watch(self._socket, self)

        async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
            data: bytes = await self._inner.read(max_bytes, timeout)
            return data

        async def write(self, buffer: bytes, timeout: float | None = None) -> None:
            await self._inner.write(buffer, timeout)

        async def aclose(self) -> None:
            watch.forget(self._fd, self)
            await self._inner.aclose()

        async def start_tls(self, *args: Any, **kwargs: Any) -> Any:
            return _NetworkStream(await self._inner.start_tls(*args, **kwargs))

        def get_extra_info(self, info: str) -> Any:
            if info == "is_readable" and self._socket is not None:
                return watch.readable(self._socket, self._fd)
            return self._inner.get_extra_info(info)

    class _Backend(httpcore.AsyncNetworkBackend):  # type: ignore[misc,name-defined]
        def __init__(self) -> None:
            self._inner = httpcore.AnyIOBackend()

        async def connect_tcp(self, *args: Any, **kwargs: Any) -> Any:
            return _NetworkStream(await self._inner.connect_tcp(*args, **kwargs))

        async def connect_unix_socket(self, *args: Any, **kwargs: Any) -> Any:
            return _NetworkStream(await self._inner.connect_unix_socket(*args, **kwargs))

        async def sleep(self, seconds: float) -> None:
            await self._inner.sleep(seconds)

    return _Backend


def _transport(httpx_: ModuleType, httpcore: ModuleType) -> type[Any]:
    """An httpx transport over an httpcore pool (what `httpx.AsyncHTTPTransport` does)."""

    @contextlib.contextmanager
    def mapped() -> Iterator[None]:
        try:
            yield
        except Exception as exc:
            for kind in type(exc).__mro__:  # the most specific kind httpx has a twin of
                if not kind.__module__.startswith(httpcore.__name__):
                    continue
                twin = getattr(httpx_, kind.__name__, None)
                if isinstance(twin, type) and issubclass(twin, Exception):
                    raise twin(str(exc)) from exc
            raise

    class _ResponseStream(httpx_.AsyncByteStream):  # type: ignore[misc,name-defined]
        def __init__(self, stream: Any) -> None:
            self._stream = stream

        async def __aiter__(self) -> AsyncIterator[bytes]:
            with mapped():
                async for part in self._stream:
                    yield part

        async def aclose(self) -> None:
            with mapped():
                await self._stream.aclose()

    class _Transport(httpx_.AsyncBaseTransport):  # type: ignore[misc,name-defined]
        def __init__(self, pool: Callable[[], Any]) -> None:
            self._new_pool = pool
            self._pools: dict[int, Any] = {}  # by lane, built on first use

        def _pool(self) -> Any:
            lane = LANE.get() % LANES
            found = self._pools.get(lane)
            if found is None:
                found = self._pools[lane] = self._new_pool()
            return found

        async def handle_async_request(self, request: Any) -> Any:
            url = request.url
            sent = httpcore.Request(
                method=request.method,
                url=httpcore.URL(
                    scheme=url.raw_scheme, host=url.raw_host, port=url.port, target=url.raw_path
                ),
                headers=request.headers.raw,
                content=request.stream,
                extensions=request.extensions,
            )
            with mapped():
                response = await self._pool().handle_async_request(sent)
            return httpx_.Response(
                status_code=response.status,
                headers=response.headers,
                stream=_ResponseStream(response.stream),
                extensions=response.extensions,
            )

        async def aclose(self) -> None:
            pools, self._pools = list(self._pools.values()), {}
            for pool in pools:
                await pool.aclose()

    return _Transport

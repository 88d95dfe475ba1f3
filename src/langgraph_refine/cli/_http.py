"""One HTTP connection pool and one SSL context for every OpenAI-protocol model of a command.

`HttpClients` builds the sync and async clients the command's chat models share
(`ChatOpenAI(http_client=..., http_async_client=...)`): the generator and the judge of
every task of a batch send their requests through one pool, and the certificate bundle
is loaded once.

The async pool is httpcore's own, with one change that matters under load: before it
reuses or keeps an idle connection, the pool asks whether the server closed it, and the
stock asyncio stream answers by rebuilding a dictionary of socket attributes (with a
system call for the peer's address) for every idle connection, on every request and
every response. With tens of requests in flight that scan is a tenth of the command's
CPU; `_Stream` answers from the socket it keeps, with one `poll`. Everything else is
the HTTP library's: requests, responses, timeouts, and its exceptions (httpcore's are
mapped to httpx's by name, as httpx's own transport does).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import select
import socket
import sys
from collections.abc import AsyncIterator, Iterator
from types import ModuleType
from typing import Any

KEEPALIVE_CONNECTIONS = 256
"""Idle connections the pool keeps open: more than a batch's tasks in flight, so
connections are reused rather than closed and opened again under load."""


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
    pool = httpcore.AsyncConnectionPool(
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


class Readable:
    """Answers whether a read on one socket would return at once (as httpcore asks).

    It answers with one `poll` on a poller registered once for the socket: the pool asks
    about every idle connection on every request and every response.

    Args:
        sock: The connection's socket.
    """

    def __init__(self, sock: socket.socket) -> None:
        self._socket = sock
        self._fd = sock.fileno()
        self._poller: Any = None
        if self._fd != -1 and hasattr(select, "poll"):  # Windows has no poll: select below
            self._poller = select.poll()
            self._poller.register(self._fd, select.POLLIN)

    def __call__(self) -> bool:
        """True when a read would not wait: data, the server's close, or a closed socket."""
        if self._socket.fileno() != self._fd or self._fd == -1:
            return True  # closed (or its descriptor reused): httpcore drops the connection
        if self._poller is None:
            ready, _, _ = select.select([self._fd], [], [], 0)
            return bool(ready)
        return bool(self._poller.poll(0))


def _backend(httpcore: ModuleType) -> type[Any]:
    """The asyncio backend of httpcore, with streams that answer `is_readable` cheaply."""

    class _NetworkStream(httpcore.AsyncNetworkStream):  # type: ignore[misc,name-defined]
        def __init__(self, inner: Any) -> None:
            self._inner = inner
            sock = inner.get_extra_info("socket")
            self._readable = Readable(sock) if sock is not None else None

        async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
            data: bytes = await self._inner.read(max_bytes, timeout)
            return data

        async def write(self, buffer: bytes, timeout: float | None = None) -> None:
            await self._inner.write(buffer, timeout)

        async def aclose(self) -> None:
            await self._inner.aclose()

        async def start_tls(self, *args: Any, **kwargs: Any) -> Any:
            return _NetworkStream(await self._inner.start_tls(*args, **kwargs))

        def get_extra_info(self, info: str) -> Any:
            if info == "is_readable" and self._readable is not None:
                return self._readable()
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
        def __init__(self, pool: Any) -> None:
            self._pool = pool

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
                response = await self._pool.handle_async_request(sent)
            return httpx_.Response(
                status_code=response.status,
                headers=response.headers,
                stream=_ResponseStream(response.stream),
                extensions=response.extensions,
            )

        async def aclose(self) -> None:
            await self._pool.aclose()

    return _Transport

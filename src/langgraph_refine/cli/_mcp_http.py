"""`mcp --transport streamable-http`: the checks every HTTP request passes first.

A web page the user visits can send requests to a server on the user's machine, and a
DNS name the page's site controls can point at 127.0.0.1 (DNS rebinding): such a request
names a foreign `Host`, or carries the page's `Origin`. MCP's transport spec requires a
server to validate `Origin`; `HostCheck` validates both, on every request, so a page
never drives the loop with the user's API key. What is allowed is the bound address's
own: its host names with the bound port, and the `http://` origins of those; an origin
given with `--allow-origin` is allowed too (its host with it, for a server reached under
another name). A request without `Origin` (a program, not a browser) is served.

A client that goes away (a closed session, a dropped connection) is no error: the SDK's
report of the stream it left, a traceback each time, is dropped (`quiet_when_clients_leave`).
"""

from __future__ import annotations

import ipaddress
import logging
import socket
import sys
from collections.abc import Iterable
from typing import Any

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
"""The names a client on this machine reaches a loopback-bound server by."""


def bound_names(host: str) -> tuple[str, ...]:
    """The host names a client may reach a server bound to `host` by.

    A loopback address answers to every loopback name; a wildcard (`0.0.0.0`, `::`)
    to those and the machine's own names; another address or name to itself.

    Example:
        >>> bound_names("127.0.0.1")
        ('127.0.0.1', 'localhost', '[::1]')
        >>> bound_names("192.168.1.5")
        ('192.168.1.5',)
    """
    name = host.strip().strip("[]").lower()
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return LOOPBACK_NAMES if name == "localhost" else (name,)
    if address.is_loopback:
        return LOOPBACK_NAMES
    if address.is_unspecified:
        machine = {socket.gethostname().lower(), socket.getfqdn().lower()}
        return (*LOOPBACK_NAMES, *sorted(machine - set(LOOPBACK_NAMES)))
    return (f"[{name}]" if address.version == 6 else name,)


def origin_of(text: str) -> str:
    """An origin as browsers send it: `scheme://host[:port]`, lower case, no path.

    Raises:
        ValueError: For text that is not an `http://` or `https://` origin.

    Example:
        >>> origin_of("http://LocalHost:6274/")
        'http://localhost:6274'
    """
    cleaned = text.strip().rstrip("/").lower()
    scheme, _, authority = cleaned.partition("://")
    if scheme not in ("http", "https") or not authority or "/" in authority:
        raise ValueError(
            f"--allow-origin takes an origin such as http://localhost:6274; got {text!r}"
        )
    return cleaned


class HostCheck:
    """An ASGI app in front of another: a request naming a foreign Host or Origin is refused.

    A foreign `Host` gets 421 (Misdirected Request), a foreign `Origin` 403, each with a
    one-line reason saying what was refused and how to allow it.

    Args:
        app: The app that serves the requests that pass.
        host: The address the server is bound to.
        port: The port it is bound to.
        origins: Origins allowed besides the bound address's own (`--allow-origin`).
    """

    def __init__(self, app: Any, *, host: str, port: int, origins: Iterable[str] = ()) -> None:
        self.app = app
        self.port = port
        names = bound_names(host)
        own = {f"http://{name}:{port}" for name in names}
        extra = {origin_of(origin) for origin in origins}
        self.origins = frozenset(own | extra)
        self.hosts = frozenset(
            {f"{name}:{port}" for name in names}
            | ({*names} if port == 80 else set())
            | {origin.partition("://")[2] for origin in extra}
        )

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """Serve the request, or refuse it with its reason."""
        if scope["type"] == "http":
            refused = self.refusal(_headers(scope))
            if refused is not None:
                status, reason = refused
                await _answer(send, status, reason)
                return
        await self.app(scope, receive, send)

    def refusal(self, headers: dict[str, str]) -> tuple[int, str] | None:
        """The status and reason to refuse a request with these headers (None: serve it)."""
        host = headers.get("host", "").strip().lower()
        if host not in self.hosts:
            shown = f'"{host}"' if host else "none"
            return 421, (
                f"Host {shown} is not this server's: it answers at "
                f"{', '.join(sorted(self.hosts))}; a request naming another host may come "
                "from a web page (DNS rebinding), so it is refused"
            )
        origin = headers.get("origin")
        if origin is not None and origin.strip().rstrip("/").lower() not in self.origins:
            return 403, (
                f'Origin "{origin}" is not allowed: this server takes requests from '
                f"{', '.join(sorted(self.origins))} and from programs that send no Origin; "
                f"start it with --allow-origin {origin} to take this one"
            )
        return None


def _headers(scope: Any) -> dict[str, str]:
    """The request's headers (the first of each name), names in lower case."""
    headers: dict[str, str] = {}
    for name, value in scope.get("headers", ()):
        headers.setdefault(name.decode("latin-1").lower(), value.decode("latin-1"))
    return headers


async def _answer(send: Any, status: int, reason: str) -> None:
    """Send a plain-text response of one line."""
    body = (reason + "\n").encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class ClientGone(logging.Filter):
    """Drops a log record whose error says the client went away (its stream closed)."""

    def filter(self, record: logging.LogRecord) -> bool:
        """False (drop it) for a record carrying a client-gone error."""
        error = record.exc_info[1] if record.exc_info else None
        return error is None or not client_gone(error)


def client_gone(error: BaseException) -> bool:
    """Whether `error` (or each error of a group) is a stream or connection closed under us."""
    import anyio

    if isinstance(error, BaseExceptionGroup):
        return all(client_gone(inner) for inner in error.exceptions)
    closed = (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream)
    return isinstance(error, (*closed, ConnectionError))


def quiet_when_clients_leave() -> None:
    """Send the SDK's log (warnings and errors) to stderr, less its reports of clients gone."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(logging.WARNING)
    handler.addFilter(ClientGone())
    sdk = logging.getLogger("mcp")
    sdk.addHandler(handler)
    sdk.propagate = False

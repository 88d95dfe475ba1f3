"""A scripted OpenAI-compatible server on loopback that fails on cue.

Each test scripts the replies in order (`FaultServer.script`): an error status with
headers, a hang longer than the client's timeout, a malformed body, or a normal chat
completion. Once the script runs out, every request gets a normal completion. The
server records every request it receives, so tests can count calls and check timing.

Normal completions come from `content(request)`: by default a generated text numbered by
the request (`"draft 3"`), or, for a request that asks for structured output
(`response_format`), a judge reply in JSON.
"""

from __future__ import annotations

import json
import select
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Reply:
    """One scripted answer.

    Attributes:
        status: HTTP status.
        body: Raw body bytes; None for a normal chat completion (status 200) or an
            OpenAI-style error object (other statuses).
        headers: Extra response headers (e.g. `retry-after`).
        content_type: The body's content type.
        delay: Seconds to wait before answering (a hang, when longer than the client's
            timeout).
    """

    status: int = 200
    body: bytes | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    content_type: str = "application/json"
    delay: float = 0.0


def ok() -> Reply:
    """A normal chat completion."""
    return Reply()


def error(status: int, headers: Mapping[str, str] | None = None) -> Reply:
    """An OpenAI-style error response with `status`."""
    return Reply(status=status, headers=dict(headers or {}))


def hang(seconds: float) -> Reply:
    """No answer for `seconds` (then a normal completion, if the client still listens)."""
    return Reply(delay=seconds)


def malformed(body: bytes, content_type: str = "application/json") -> Reply:
    """Status 200 with `body` as it is."""
    return Reply(body=body, content_type=content_type)


@dataclass(frozen=True)
class Received:
    """A request the server received."""

    at: float  # time.monotonic() on arrival
    path: str
    body: dict[str, Any]
    headers: dict[str, str]

    @property
    def is_judge(self) -> bool:
        """True for a structured-output (judge) request."""
        return "response_format" in self.body

    @property
    def prompt(self) -> str:
        """The text of the last message."""
        return str(self.body["messages"][-1]["content"])


Content = Callable[[Received, int], "str | dict[str, Any]"]
"""Makes a normal completion's message: its text, or the whole assistant message as a dict
(for tool calls)."""


def default_content(request: Received, number: int) -> str:
    """A numbered draft for generations; a NEEDS_IMPROVEMENT judge reply for judge calls."""
    if request.is_judge:
        return json.dumps(
            {"feedback": "Add a concrete example.", "verdict": "NEEDS_IMPROVEMENT", "score": 0.4}
        )
    return f"draft {number}"


def completion(text: str | dict[str, Any], model: str) -> bytes:
    """A chat-completion body carrying `text` (or a whole assistant message), with usage."""
    message = text if isinstance(text, dict) else {"role": "assistant", "content": text}
    return json.dumps(
        {
            "id": "chatcmpl-fault",
            "object": "chat.completion",
            "created": 0,
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if message.get("tool_calls") else "stop",
                }
            ],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }
    ).encode()


ERROR_TYPES = {401: "invalid_api_key", 429: "rate_limit_exceeded"}


def error_body(status: int) -> bytes:
    """An OpenAI-style error object."""
    return json.dumps(
        {
            "error": {
                "message": f"scripted failure with status {status}",
                "type": ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid"),
                "code": ERROR_TYPES.get(status),
            }
        }
    ).encode()


class FaultServer:
    """The server. Use `serve()` (a context manager) to run it in a background thread.

    Attributes:
        received: Every request received, in order.
        content: Makes the text of normal completions from the request and its number
            (1-based, counting every request received).
    """

    def __init__(self, content: Content = default_content) -> None:
        self.received: list[Received] = []
        # For each hung request (by its number), when the client closed its connection.
        self.closed: dict[int, float] = {}
        self._hanging: set[int] = set()
        # Every judge request's reply, when set (a judge that always fails, or hangs).
        self.judge_reply: Reply | None = None
        self.content = content
        self._script: list[Reply] = []
        self._lock = threading.Lock()
        self._release = threading.Event()  # set on shutdown: hanging handlers return
        self._server: ThreadingHTTPServer | None = None

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible base URL."""
        assert self._server is not None, "the server is not running"
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def script(self, *replies: Reply) -> None:
        """Queue replies for the next requests, in order."""
        with self._lock:
            self._script.extend(replies)

    def unscript(self) -> None:
        """Drop the queued replies no request took."""
        with self._lock:
            self._script.clear()

    def generations(self) -> list[Received]:
        """The requests that were not judge calls."""
        return [r for r in self.received if not r.is_judge]

    def _next(self, request: Received) -> tuple[Reply, int]:
        with self._lock:
            self.received.append(request)
            if request.is_judge and self.judge_reply is not None:
                return self.judge_reply, len(self.received)
            reply = self._script.pop(0) if self._script else ok()
            return reply, len(self.received)

    def _respond(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("content-length") or 0)
        raw = handler.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else {}
        except json.JSONDecodeError:
            body = {"unparsed": raw.decode("utf-8", "replace")}
        request = Received(time.monotonic(), handler.path, body, dict(handler.headers.items()))
        reply, number = self._next(request)
        if reply.delay and self._hung(handler, reply.delay, number):
            return  # shutting down, or the client went away
        if reply.body is None and reply.status == 200 and body.get("stream"):
            self._stream(handler, self.content(request, number), str(body.get("model", "")))
            return
        if reply.body is not None:
            payload = reply.body
        elif reply.status == 200:
            payload = completion(self.content(request, number), str(body.get("model", "")))
        else:
            payload = error_body(reply.status)
        try:
            handler.send_response(reply.status)
            handler.send_header("content-type", reply.content_type)
            handler.send_header("content-length", str(len(payload)))
            for name, value in reply.headers.items():
                handler.send_header(name, value)
            handler.end_headers()
            handler.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a hang past its timeout)

    def _hung(self, handler: BaseHTTPRequestHandler, seconds: float, number: int) -> bool:
        """Wait `seconds` without answering; True if the server stops or the client leaves.

        The connection is watched meanwhile: when the client closes it (a timeout, a
        cancel), the time is kept in `closed`.
        """
        sock = handler.connection
        end = time.monotonic() + seconds
        with self._lock:
            self._hanging.add(number)
        try:
            while (left := end - time.monotonic()) > 0:
                if self._release.is_set():
                    return True
                readable, _, _ = select.select([sock], [], [], min(left, 0.02))
                if readable and not _peek(sock):
                    with self._lock:
                        self.closed[number] = time.monotonic()
                    return True
            return False
        finally:
            with self._lock:
                self._hanging.discard(number)

    def open_hangs(self) -> list[int]:
        """The hung requests (by number) whose client still holds the connection open."""
        with self._lock:
            return sorted(self._hanging)

    @staticmethod
    def _stream(handler: BaseHTTPRequestHandler, text: str | dict[str, Any], model: str) -> None:
        """A normal completion as server-sent events (a request with `stream`)."""
        message = json.loads(completion(text, model))["choices"][0]
        delta = {k: v for k, v in message["message"].items() if v or k == "content"}
        for i, call in enumerate(delta.get("tool_calls") or []):
            call["index"] = i
        base = {"id": "chatcmpl-fault", "object": "chat.completion.chunk", "created": 0}
        chunks = [
            {"choices": [{"index": 0, "delta": delta}]},
            {"choices": [{"index": 0, "delta": {}, "finish_reason": message["finish_reason"]}]},
            {"choices": [], "usage": json.loads(completion("", model))["usage"]},
        ]
        try:
            handler.send_response(200)
            handler.send_header("content-type", "text/event-stream")
            handler.end_headers()
            for chunk in chunks:
                data = json.dumps({**base, "model": model, **chunk})
                handler.wfile.write(f"data: {data}\n\n".encode())
            handler.wfile.write(b"data: [DONE]\n\n")
            handler.close_connection = True
        except (BrokenPipeError, ConnectionResetError):
            pass

    @contextmanager
    def serve(self) -> Iterator[FaultServer]:
        """Run on a free loopback port until the block ends."""
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                server._respond(self)

            def log_message(self, format: str, *args: Any) -> None:
                pass  # keep test output clean

        httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        httpd.daemon_threads = True
        self._server = httpd
        thread = threading.Thread(
            target=httpd.serve_forever, args=(0.05,), name="fault-server", daemon=True
        )
        thread.start()
        try:
            yield self
        finally:
            self._release.set()
            httpd.shutdown()
            httpd.server_close()
            thread.join(timeout=5)


def _peek(sock: socket.socket) -> bytes:
    """What the client sent and the server has not read; b"" once it closed the connection."""
    try:
        return sock.recv(1, socket.MSG_PEEK)
    except OSError:  # reset by the client
        return b""

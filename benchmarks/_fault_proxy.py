"""A chat server on loopback that injects provider faults on a seeded schedule.

It serves OpenAI's `/v1/chat/completions` and Anthropic's `/v1/messages` itself (a scripted
model behind a real socket, in either protocol) and answers each request as its run's
schedule says: a normal completion or, at the run's fault rate, one of `FAULTS`. A run is
named by the `model` of its requests, so many runs share one server and every request is
put down to its run, late ones included.

The scripted model: a draft reads `The sea, draft K.`, K one more than the highest draft
number in the request (0 for the first), so a draft depends on its prompt only (a replay
gets the same reply); a judge request (the structured output of `llm_judge`:
`response_format` for OpenAI, `output_config` for Anthropic) gets `NEEDS_IMPROVEMENT`
with a score rising with the draft it judges, so a loop without faults runs every round
it may.

Every request is recorded (`Received`) with when it arrived, what it was answered with and
when its exchange ended: the reply written, or the client gone (the server watches the
socket while it holds a reply back, so a client closing a hung request is seen when it
closes). `Schedule.hold_at` holds one request's reply back (a kill lands inside that call).
"""

from __future__ import annotations

import json
import random
import re
import select
import socket
import struct
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

REQUEST_FAULTS = ("500", "429", "408", "hang", "reset", "malformed", "truncated", "401")
"""What a request can get instead of its reply: HTTP 500; 429 with `Retry-After: 1`; 408;
no reply for `HANG` seconds, then the connection reset; the connection reset at once;
a 200 reply whose body is not JSON; a 200 reply cut off half way; 401 (not transient: a
run meeting it raises, which shows whether its error keeps `.result`)."""
FAULTS = (*REQUEST_FAULTS, "unreadable")
"""`REQUEST_FAULTS`, and for a judge request only: a completion whose text is no verdict."""
HANG = 8.0
"""Seconds a hung request waits before the server closes its connection."""
LATENCY = 0.03
"""Seconds every normal reply takes (a fast model)."""
UNREADABLE = "I think it is quite good overall."
_DRAFT = re.compile(r"The sea, draft (\d+)\.")


@dataclass
class Schedule:
    """One run's faults: drawn per request from its own seeded generator.

    Attributes:
        rate: The share of requests that get a fault (`REQUEST_FAULTS` for a draft,
            `FAULTS` for a judge request).
        seed: Seeds the draws, so the same run gets the same faults on every path.
        always: A fault every request of this kind (`"draft"` or `"judge"`) gets, after
            the run's first `after` requests.
        hold_at: The request (1-based, within the run) whose reply is held back for
            `hold_for` seconds; `held` is set when it arrives.
    """

    rate: float = 0.0
    seed: int = 0
    always: dict[str, str] = field(default_factory=dict)
    after: int = 0
    hold_at: int | None = None
    hold_for: float = 20.0
    held: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.count = 0

    def next(self, kind: str) -> tuple[str, float]:
        """The fault for the run's next request of `kind` ("" for none), and a hold."""
        self.count += 1
        hold = self.hold_for if self.count == self.hold_at else 0.0
        if kind in self.always and self.count > self.after:
            return self.always[kind], hold
        if self.rng.random() >= self.rate:
            return "", hold
        return self.rng.choice(REQUEST_FAULTS if kind == "draft" else FAULTS), hold


@dataclass
class Received:
    """A request the server received, and how its exchange ended.

    Attributes:
        run: The run it belongs to (its `model`).
        kind: `"draft"` or `"judge"`.
        fault: The fault it got, `""` for a normal reply.
        at: `time.monotonic()` on arrival.
        ended: `time.monotonic()` when its reply was written or its client was seen gone.
        outcome: `"answered"` (a completion written whole: paid, even an unreadable one),
            `"failed"` (another fault sent), `"client gone"` (the client closed first), or
            `""` while it is open.
    """

    run: str
    kind: str
    fault: str
    at: float
    ended: float = 0.0
    outcome: str = ""


def draft_number(text: str) -> int:
    """The highest draft number in `text`, -1 for none."""
    return max((int(n) for n in _DRAFT.findall(text)), default=-1)


def reply_text(kind: str, messages: list[dict[str, Any]]) -> str:
    """The scripted model's reply to a request of `kind` with `messages`."""
    text = "\n".join(str(m.get("content")) for m in messages)
    if kind == "draft":
        return f"The sea, draft {draft_number(text) + 1}. Waves under a grey sky."
    score = min(0.3 + 0.1 * max(draft_number(text), 0), 0.8)
    return json.dumps(
        {"feedback": "Name a colour.", "verdict": "NEEDS_IMPROVEMENT", "score": round(score, 2)}
    )


def completion(text: str, model: str, anthropic: bool = False) -> bytes:
    """A completion body carrying `text`, with usage, in OpenAI's or Anthropic's protocol."""
    if anthropic:
        return json.dumps(
            {
                "id": "msg_bench",
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [{"type": "text", "text": text}],
                "stop_reason": "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": 20, "output_tokens": 8},
            }
        ).encode()
    return json.dumps(
        {
            "id": "chatcmpl-bench",
            "object": "chat.completion",
            "created": 0,
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 20, "completion_tokens": 8, "total_tokens": 28},
        }
    ).encode()


def error_body(status: int, anthropic: bool = False) -> bytes:
    """An error object for `status`, in OpenAI's or Anthropic's protocol."""
    kind = {429: "rate_limit_error", 408: "timeout_error", 401: "authentication_error"}
    error = {"message": f"injected {status}", "type": kind.get(status, "api_error")}
    return json.dumps({"type": "error", "error": error} if anthropic else {"error": error}).encode()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # many runs at a time, each with a connection pool

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client resetting its connection is part of the script: say nothing of it."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class FaultProxy:
    """The server; `serve()` runs it on a free loopback port in background threads.

    Attributes:
        received: Every request received, in order of arrival.
        schedules: Each run's schedule, by run name; a run without one gets no faults.
    """

    def __init__(self) -> None:
        self.received: list[Received] = []
        self.schedules: dict[str, Schedule] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        """The server's root URL (Anthropic's base URL)."""
        assert self._server is not None, "the server is not running"
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def base_url(self) -> str:
        """OpenAI's base URL."""
        return f"{self.url}/v1"

    def of(self, run: str) -> list[Received]:
        """The requests of `run`, in order of arrival."""
        with self._lock:
            return [r for r in self.received if r.run == run]

    def _admit(self, body: dict[str, Any]) -> tuple[Received, float]:
        run = str(body.get("model", ""))
        judge = "response_format" in body or "format" in (body.get("output_config") or {})
        kind = "judge" if judge else "draft"
        with self._lock:
            schedule = self.schedules.setdefault(run, Schedule())
            fault, hold = schedule.next(kind)
            request = Received(run, kind, fault, time.monotonic())
            self.received.append(request)
        if hold:
            schedule.held.set()
        return request, hold

    def _wait(self, conn: socket.socket, seconds: float) -> bool:
        """Wait `seconds` watching the socket; False as soon as the client closes it."""
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0 and not self._stop.is_set():
            readable, _, _ = select.select([conn], [], [], min(left, 0.02))
            if readable:
                try:
                    if conn.recv(1, socket.MSG_PEEK) == b"":
                        return False
                except OSError:
                    return False
        return True

    def _respond(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("content-length") or 0)
        body = json.loads(handler.rfile.read(length) or b"{}")
        request, hold = self._admit(body)
        conn = handler.connection
        waited = self._wait(conn, hold + (HANG if request.fault == "hang" else LATENCY))
        if not waited:
            request.ended, request.outcome = time.monotonic(), "client gone"
            handler.close_connection = True
            return
        try:
            self._send(handler, request, body, handler.path.endswith("/messages"))
        except OSError:
            request.ended, request.outcome = time.monotonic(), "client gone"
            handler.close_connection = True
            return
        request.ended = time.monotonic()
        request.outcome = "answered" if request.fault in ("", "unreadable") else "failed"

    def _send(
        self,
        handler: BaseHTTPRequestHandler,
        request: Received,
        body: dict[str, Any],
        anthropic: bool,
    ) -> None:
        fault, model = request.fault, str(body.get("model", ""))
        if fault in ("hang", "reset"):
            # RST instead of FIN: the client sees a reset connection, as from a proxy.
            handler.connection.setsockopt(
                socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
            )
            handler.close_connection = True
            return
        status, headers, payload = 200, {}, b""
        if fault in ("500", "408", "429", "401"):
            status, payload = int(fault), error_body(int(fault), anthropic)
            headers = {"retry-after": "1"} if fault == "429" else {}
        elif fault == "malformed":
            payload = b"<html><body><h1>502 Bad Gateway</h1></body></html>"
        else:
            kind = "unreadable" if fault == "unreadable" else request.kind
            text = UNREADABLE if kind == "unreadable" else reply_text(kind, body["messages"])
            payload = completion(text, model, anthropic)
        handler.send_response(status)
        handler.send_header("content-type", "application/json")
        handler.send_header("content-length", str(len(payload)))
        for name, value in headers.items():
            handler.send_header(name, value)
        handler.end_headers()
        if fault == "truncated":
            handler.wfile.write(payload[: len(payload) // 2])
            handler.wfile.flush()
            handler.close_connection = True
            return
        handler.wfile.write(payload)

    @contextmanager
    def serve(self) -> Iterator[FaultProxy]:
        """Serve on a free loopback port until the block ends."""
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                proxy._respond(self)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        httpd = _Server(("127.0.0.1", 0), Handler)
        self._server = httpd
        thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            httpd.shutdown()
            httpd.server_close()
            thread.join(timeout=5)

"""A scripted OpenAI-compatible HTTP server on loopback, for the command line's tests.

The CLI builds real `ChatOpenAI` clients and talks the real protocol to this server (the
stdlib's `ThreadingHTTPServer`), which answers `/v1/chat/completions` from a script,
puts `usage` in every reply, and records every request and how many overlapped. The
tests of this module check the server itself.
"""

from __future__ import annotations

import io
import json
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


@dataclass
class Reply:
    """A scripted answer: the message text, or an HTTP error status with a message."""

    content: str = ""
    status: int = 200
    error: str = ""


Script = Callable[[dict[str, Any]], "Reply | str"]


def is_judge(body: dict[str, Any]) -> bool:
    """True if the request is an LLM-judge call (it asks for the judge's JSON schema)."""
    if body.get("response_format"):
        return True
    return any("response_to_rate" in str(m.get("content", "")) for m in body.get("messages", []))


def last_user_text(body: dict[str, Any]) -> str:
    """The text of the request's last user message."""
    for message in reversed(body.get("messages", [])):
        if message.get("role") == "user":
            content = message.get("content", "")
            if isinstance(content, list):
                return " ".join(str(part.get("text", "")) for part in content)
            return str(content)
    return ""


def rated_text(body: dict[str, Any]) -> str:
    """The response a judge request asks to rate (inside the sandbox tags)."""
    match = re.search(
        r"<response_to_rate>\n?(.*?)\n?</response_to_rate>", last_user_text(body), re.S
    )
    return match.group(1) if match else ""


def judge_json(
    score: float, verdict: str = "NEEDS_IMPROVEMENT", feedback: str = "add detail"
) -> str:
    """A judge reply in the JSON shape the LLM judge asks for."""
    return json.dumps({"verdict": verdict, "score": score, "feedback": feedback})


def drafts_and_judge(scores: dict[str, float] | None = None) -> Script:
    """A generator that answers `draft N` (N counts its calls) and a judge scoring by draft.

    Args:
        scores: Score per draft text (`"draft 0"` ...); unknown drafts score 0.3.
    """
    table = scores or {}
    counter = {"n": 0}
    lock = threading.Lock()

    def script(body: dict[str, Any]) -> str:
        if is_judge(body):
            text = rated_text(body).strip()
            score = table.get(text, 0.3)
            verdict = "PASS" if score >= 1.0 else "NEEDS_IMPROVEMENT"
            return judge_json(score, verdict, f"feedback for {text}: be more specific")
        with lock:
            n = counter["n"]
            counter["n"] += 1
        return f"draft {n}"

    return script


def task_of(body: dict[str, Any]) -> str:
    """The task a generator or judge request is about (first line after `# Task`, or the prompt)."""
    text = last_user_text(body)
    match = re.search(r"# Task\n(.+)", text)
    return match.group(1).strip() if match else text.strip()


def per_task(step: float = 0.25, start: float = 0.5) -> Script:
    """Deterministic replies for batches: the answer depends only on the prompt.

    The generator answers `answer to <task> v<k>`, k being the latest attempt number its
    prompt shows (0 for the first attempt);
    the judge scores version k as `start + step * k` (PASS at 1.0).
    """

    def script(body: dict[str, Any]) -> str:
        if is_judge(body):
            match = re.search(r" v(\d+)$", rated_text(body).strip())
            k = int(match.group(1)) if match else 0
            score = min(1.0, start + step * k)
            return judge_json(
                score, "PASS" if score >= 1.0 else "NEEDS_IMPROVEMENT", f"improve v{k}"
            )
        shown = [int(n) for n in re.findall(r"## Attempt (\d+)", last_user_text(body))]
        k = max(shown, default=0)
        return f"answer to {task_of(body)} v{k}"

    return script


class ScriptedOpenAI:
    """An OpenAI-compatible chat-completions server answering from `script`.

    Args:
        script: Maps a request body to a `Reply` or the reply text.
        delay: Seconds each request takes (to observe overlapping requests).

    Attributes:
        requests: Every chat-completions request body received, in arrival order.
        max_in_flight: The most requests that were being served at the same time.
    """

    def __init__(self, script: Script, *, delay: float = 0.0, model: str = "scripted") -> None:
        self.script = script
        self.delay = delay
        self.model = model
        self.requests: list[dict[str, Any]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        """The `/v1` URL to give `--base-url`."""
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    @property
    def judge_requests(self) -> list[dict[str, Any]]:
        """The requests that were judge calls."""
        return [r for r in self.requests if is_judge(r)]

    @property
    def generator_requests(self) -> list[dict[str, Any]]:
        """The requests that were generator calls."""
        return [r for r in self.requests if not is_judge(r)]

    def __enter__(self) -> ScriptedOpenAI:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def _answer(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        with self._lock:
            self.requests.append(body)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.delay:
                time.sleep(self.delay)
            reply = self.script(body)
        finally:
            with self._lock:
                self.in_flight -= 1
        if isinstance(reply, str):
            reply = Reply(reply)
        if reply.status != 200:
            return reply.status, {
                "error": {"message": reply.error or "scripted error", "type": "test"}
            }
        prompt_tokens = sum(
            len(str(m.get("content", "")).split()) for m in body.get("messages", [])
        )
        completion_tokens = len(reply.content.split())
        return 200, {
            "id": f"chatcmpl-{len(self.requests)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", self.model),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": reply.content},
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path.rstrip("/").endswith("/models"):
                    self._send(
                        200, {"object": "list", "data": [{"id": outer.model, "object": "model"}]}
                    )
                else:
                    self._send(404, {"error": {"message": f"no route {self.path}"}})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                    return
                status, payload = outer._answer(body)
                self._send(status, payload)

        return Handler


@dataclass
class CliRun:
    """What one command-line invocation did: exit code, stdout and stderr."""

    code: int
    out: str
    err: str

    def json(self) -> Any:
        """Stdout parsed as one JSON document."""
        return json.loads(self.out)


MODEL_ENV = ("REFINE_MODEL", "OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_API_BASE")


@pytest.fixture
def cli(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Callable[..., CliRun]:
    """Run the command line in-process: `cli("run", "task", ..., stdin="a\\n")`.

    The model variables of the environment are cleared so only the test's options count.
    """
    from langgraph_refine.cli import main

    for name in MODEL_ENV:
        monkeypatch.delenv(name, raising=False)

    def run(*args: str, stdin: str | None = None) -> CliRun:
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin or ""))
        capsys.readouterr()
        code = main([str(a) for a in args])
        out, err = capsys.readouterr()
        return CliRun(code, out, err)

    return run


def assert_one_line_error(run: CliRun, *fragments: str) -> None:
    """The run failed with exactly one `langgraph-refine: ...` line on stderr, no traceback."""
    assert run.code != 0, run
    lines = [line for line in run.err.splitlines() if line.strip()]
    assert len(lines) == 1, run.err
    assert lines[0].startswith("langgraph-refine: "), run.err
    assert "Traceback" not in run.err + run.out
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


@pytest.fixture
def openai_server() -> Iterator[Callable[..., ScriptedOpenAI]]:
    """Start scripted servers on demand: `openai_server(script, delay=...)`; all stop at the end."""
    started: list[ScriptedOpenAI] = []

    def start(script: Script, **kwargs: Any) -> ScriptedOpenAI:
        server = ScriptedOpenAI(script, **kwargs).__enter__()
        started.append(server)
        return server

    yield start
    for server in started:
        server.__exit__(None, None, None)


def test_server_answers_like_openai_with_usage(
    openai_server: Callable[..., ScriptedOpenAI],
) -> None:
    from langchain_openai import ChatOpenAI

    server = openai_server(drafts_and_judge())
    model = ChatOpenAI(base_url=server.base_url, api_key="unused", model="scripted", max_retries=0)
    first, second = model.invoke("write"), model.invoke("again")
    assert (first.content, second.content) == ("draft 0", "draft 1")
    assert first.usage_metadata is not None and first.usage_metadata["total_tokens"] > 0
    assert [last_user_text(r) for r in server.requests] == ["write", "again"]


def test_server_scripts_errors_and_records_overlap(
    openai_server: Callable[..., ScriptedOpenAI],
) -> None:
    import openai
    from langchain_openai import ChatOpenAI

    server = openai_server(lambda body: Reply(status=400, error="bad request"), delay=0.2)
    model = ChatOpenAI(base_url=server.base_url, api_key="unused", model="scripted", max_retries=0)
    with pytest.raises(openai.BadRequestError, match="bad request"):
        model.invoke("x")
    errors: list[BaseException] = []

    def call() -> None:
        try:
            model.invoke("y")
        except openai.BadRequestError as exc:
            errors.append(exc)

    threads = [threading.Thread(target=call) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(errors) == 3 and server.max_in_flight == 3

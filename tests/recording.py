"""Recording and replaying real model traffic (pytest-recording + vcrpy).

Cassettes live in the top-level `cassettes/` folder, one subfolder per test module.
`make test` replays them with `--record-mode=none` and the network blocked; `make record`
starts a fresh local model server and re-records them with `--record-mode=rewrite`.

Replays must not depend on where the recording server ran, so:

- tests talk to `STABLE_BASE_URL` when replaying, and to the server named by
  `LANGGRAPH_REFINE_LOCAL_BASE_URL` when recording;
- every recorded URI is rewritten to `STABLE_BASE_URL` (the port of the recording server
  does not matter), and requests are matched without the port;
- request bodies are matched as parsed JSON, so key order and whitespace do not matter
  but every value does: a request the cassette does not hold fails the test;
- request headers other than the content type are dropped, and credential headers are
  scrubbed by name as well, so cassettes never hold secrets or machine details.
"""

from __future__ import annotations

import difflib
import json
import os
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
from langchain_core.language_models import BaseChatModel

ROOT = Path(__file__).resolve().parents[1]
CASSETTES = ROOT / "cassettes"
STABLE_BASE_URL = "http://127.0.0.1:8088/v1"
LOCAL_URL_ENV = "LANGGRAPH_REFINE_LOCAL_BASE_URL"
LOCAL_MODEL = "smollm2"
SECRET_HEADERS = (
    "authorization",
    "api-key",
    "x-api-key",
    "openai-organization",
    "openai-project",
    "cookie",
    "set-cookie",
)
KEPT_REQUEST_HEADERS = frozenset({"content-type"})
KEPT_RESPONSE_HEADERS = frozenset({"content-type"})
MATCH_ON = ("method", "scheme", "host", "path", "query", "json_body")


def base_url(record_mode: str) -> str:
    """Where the tests' model lives: the stable URL in replay, the real server in recording."""
    if record_mode == "none":
        return STABLE_BASE_URL
    url = os.environ.get(LOCAL_URL_ENV)
    if not url:
        pytest.fail(
            f"recording (--record-mode={record_mode}) needs a model server, but {LOCAL_URL_ENV} "
            "is not set; run `make record`, which starts the local model and sets it"
        )
    return url


def recorded_model(record_mode: str, **overrides: Any) -> BaseChatModel:
    """The examples' chat model, pointed at `base_url(record_mode)`, for the local model."""
    from examples._common import openai_model

    options: dict[str, Any] = {
        "base_url": base_url(record_mode),
        "model": LOCAL_MODEL,
        "api_key": "local",
        **overrides,
    }
    return openai_model(**options)


def cassette_dir(module: ModuleType) -> str:
    """The cassette folder of a test module: `cassettes/<module name>`."""
    return str(CASSETTES / module.__name__.rsplit(".", 1)[-1])


def stable_uri(uri: str) -> str:
    """`uri` with its scheme, host and port replaced by those of `STABLE_BASE_URL`."""
    stable = urlsplit(STABLE_BASE_URL)
    parts = urlsplit(uri)
    return urlunsplit((stable.scheme, stable.netloc, parts.path, parts.query, parts.fragment))


def before_record_request(request: Any) -> Any:
    """Normalise a request before it is recorded or matched: stable URI, minimal headers.

    vcrpy hands this hook a copy of the request, so changing it in place is safe.
    """
    request.uri = stable_uri(request.uri)
    for name in list(request.headers):
        if name.lower() not in KEPT_REQUEST_HEADERS:
            del request.headers[name]
    return request


def model_calls_only(request: Any) -> Any:
    """`before_record_request` for tests that also talk to a local server of their own:
    requests other than chat completions are neither recorded nor replayed (vcrpy lets
    them through to the network, which `make test` limits to loopback)."""
    if not urlsplit(request.uri).path.endswith("/chat/completions"):
        return None
    return before_record_request(request)


def before_record_response(response: dict[str, Any]) -> dict[str, Any]:
    """Keep only the content type among the response headers (drops cookies and noise)."""
    headers = response.get("headers") or {}
    response["headers"] = {k: v for k, v in headers.items() if k.lower() in KEPT_RESPONSE_HEADERS}
    return response


def parsed_body(body: Any) -> Any:
    """A request body as JSON when it is JSON, else as bytes (None for no body)."""
    if body is None:
        return None
    if hasattr(body, "read"):
        body = body.read()
    raw = body.encode() if isinstance(body, str) else bytes(body)
    try:
        return json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return raw


def json_body(r1: Any, r2: Any) -> None:
    """vcrpy matcher: the two requests' bodies are equal as parsed JSON.

    Raises:
        AssertionError: If they differ; the message shows the first differing lines.
    """
    first, second = parsed_body(r1.body), parsed_body(r2.body)
    if first == second:
        return
    diff = difflib.unified_diff(
        _pretty(second).splitlines(), _pretty(first).splitlines(), "recorded", "sent", n=1
    )
    shown = "\n".join(list(diff)[:40])
    raise AssertionError(f"request bodies differ:\n{shown}")


def _pretty(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return json.dumps(value, indent=1, sort_keys=True, ensure_ascii=False)


def vcr_config() -> dict[str, Any]:
    """The configuration every recorded test uses (see the module docstring)."""
    return {
        "filter_headers": list(SECRET_HEADERS),
        "before_record_request": before_record_request,
        "before_record_response": before_record_response,
        "match_on": list(MATCH_ON),
        "decode_compressed_response": True,
    }


def configure(vcr: Any) -> None:
    """Register the JSON body matcher on a `vcr.VCR`."""
    vcr.register_matcher("json_body", json_body)


def sent_bodies(cassette: Any) -> list[dict[str, Any]]:
    """The JSON bodies of the requests a cassette holds, in order."""
    return [parsed_body(request.body) for request in cassette.requests]


def last_user_message(body: dict[str, Any]) -> str:
    """The text of the last user message of a chat-completions request body."""
    user = [m for m in body["messages"] if m.get("role") == "user"]
    content = user[-1]["content"]
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content)
    return str(content)


def reply_texts(cassette: Any) -> list[str]:
    """The assistant text of every response a cassette holds, in order."""
    texts = []
    for response in cassette.responses:
        body = json.loads(response["body"]["string"])
        texts.append(body["choices"][0]["message"].get("content") or "")
    return texts


class RecordingProxy:
    """A loopback OpenAI endpoint that forwards each request to `upstream` from this process.

    Model calls made by another process (a `langgraph dev` server) are invisible to vcrpy,
    which patches the HTTP client of the process it runs in. Pointing that process at this
    proxy brings its traffic here: the proxy sends each request on with `httpx`, so the
    test's cassette records it (`make record`) or answers it (`make test`) like any call the
    test makes itself. Requests are forwarded one at a time, so a recording is never
    interleaved. A request that cannot be forwarded (in replay: one the cassette lacks) is
    answered with HTTP 400, which is not retried, and listed in `errors`.

    Use as a context manager; `url` is the base URL (ending in `/v1`) to give the client.
    """

    def __init__(self, upstream: str) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.upstream = upstream.rstrip("/")
        self.forwarded = 0
        self.errors: list[str] = []
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                content_type = self.headers.get("Content-Type", "application/json")
                status, reply_type, data = proxy.forward(self.path, body, content_type)
                self.send_response(status)
                self.send_header("Content-Type", reply_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def forward(self, path: str, body: bytes, content_type: str) -> tuple[int, str, bytes]:
        """Send one request upstream; returns the reply's status, content type and body."""
        import httpx

        url = self.upstream + path.removeprefix("/v1")
        try:
            with self._lock, httpx.Client(timeout=300) as client:
                reply = client.post(url, content=body, headers={"Content-Type": content_type})
                self.forwarded += 1
        except Exception as exc:
            self.errors.append(f"{type(exc).__name__}: {exc}")
            error = json.dumps({"error": {"message": str(exc)}}).encode()
            return 400, "application/json", error
        # `content` is decoded, so the Content-Encoding header is not passed on.
        return reply.status_code, reply.headers.get("content-type", "text/plain"), reply.content

    def __enter__(self) -> RecordingProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

"""`langgraph-refine mcp` as hosts meet it, through the real `mcp` client.

The server runs as its own process, started as a host starts it (over stdio: the
installed command by its absolute path, with a bare `PATH`; over streamable HTTP: one
process for the module), its model a scripted OpenAI-compatible server on loopback, or one
that takes a request and never answers (to watch a cancel close it). What is checked is
what a host meets: foreign `Host` and `Origin` refused, progress from a call's first
seconds and never more than 10 s apart, a cancel that closes the model request, `null`
refused, no model explained, messages without Python's words, a short listing, and no
traceback when a client goes away. The official conformance suite runs where Node.js 22
can be fetched (`make mcp-conformance`, as `make ui-bundler` fetches its bundler), and is
required where `LANGGRAPH_REFINE_REQUIRE_MCP_CONFORMANCE=1` (`.ci/run`).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import McpError

from tests.test_mcp import Progress, command, environment, http_session, text_of
from tests.test_server import free_port, scripted_openai

LONG = 12.0
"""Seconds the first draft of a `[long]` task takes: longer than the 10 s a host may wait."""

SLOW = 0.5
"""Seconds each model call of a `[slow]` task takes."""

ORIGIN = "http://localhost:6274"
"""An origin the HTTP server is started to allow (`--allow-origin`): the Inspector's page."""

PYTHON_WORDS = re.compile(
    r"\bNone\b|\bTrue\b|\bFalse\b|pydantic|Budget\.|REFINE_MAX|run's context|deployment|"
    r"\bmessages\b|\{'|\['|dict\b|class\b"
)
"""Words of Python or of another surface that a host's messages never hold."""


def script(body: dict[str, Any]) -> str:
    """Drafts `draft N`; the judge scores draft N at 0.3 + 0.1 N (PASS from 0.9)."""
    prompt = "\n".join(str(m.get("content")) for m in body["messages"])
    rated = re.search(r"<response_to_rate>\s*draft (\d+)\s*</response_to_rate>", prompt)
    if "[slow]" in prompt:
        time.sleep(SLOW)
    if "[long]" in prompt and not rated and "<answer>" not in prompt:
        time.sleep(LONG)  # the first draft only
    if rated:
        score = round(0.3 + 0.1 * int(rated.group(1)), 2)
        verdict = "PASS" if score >= 0.9 else "NEEDS_IMPROVEMENT"
        return json.dumps({"verdict": verdict, "score": score, "feedback": "add detail"})
    return f"draft {prompt.count('<answer>')}"


@pytest.fixture(scope="module")
def model() -> Iterator[Any]:
    with scripted_openai(script) as server:
        yield server


def installed() -> str:
    """The absolute path of the installed `langgraph-refine` command."""
    path = Path(sys.executable).parent / "langgraph-refine"
    assert path.is_file(), f"{path} is not installed"
    return str(path)


def bare_environment(**extra: str) -> dict[str, str]:
    """A GUI host's environment: a bare `PATH` without the virtual environment, no model."""
    return {"PATH": os.defpath, "HOME": os.environ.get("HOME", "/"), **extra}


@contextlib.asynccontextmanager
async def gui_session(
    args: list[str], env: dict[str, str], errlog: Path
) -> AsyncIterator[ClientSession]:
    """A stdio session with the command started as a GUI host starts it (absolute path)."""
    params = StdioServerParameters(command=installed(), args=args, env=env)
    with errlog.open("w") as log:
        async with (
            stdio_client(params, errlog=log) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session


def model_args(model: Any) -> list[str]:
    """`command`'s arguments without the interpreter's `-m langgraph_refine`."""
    return command(model)[2:]


@pytest.fixture(scope="module")
def http_server(model: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`mcp --transport streamable-http` allowing `ORIGIN`; its `/mcp` URL (stderr in `.log`)."""
    port = free_port()
    log = tmp_path_factory.mktemp("mcp-http") / "server.log"
    args = command(model, "--transport", "streamable-http", "--port", str(port))
    with log.open("w") as err:
        process = subprocess.Popen(
            [sys.executable, *args, "--allow-origin", ORIGIN], env=environment(), stderr=err
        )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError):
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            assert process.poll() is None, log.read_text()
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=10)


def server_log(tmp_path_factory: pytest.TempPathFactory) -> str:
    """What the module's HTTP server wrote on stderr so far."""
    logs = sorted(tmp_path_factory.getbasetemp().glob("mcp-http*/server.log"))
    return "\n".join(path.read_text() for path in logs)


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"},
    },
}


def post(url: str, **headers: str) -> httpx.Response:
    """An `initialize` request to `url` with these headers (`Host` and `Origin` included)."""
    sent = {"Accept": "application/json, text/event-stream", **headers}
    return httpx.post(url, json=INITIALIZE, headers=sent, timeout=10)


def test_streamable_http_refuses_a_foreign_host_or_origin_saying_why(http_server: str) -> None:
    port = http_server.split(":")[2].split("/")[0]
    # A page served from another site, or a DNS name rebound to 127.0.0.1.
    host = post(http_server, Host="evil.example")
    assert host.status_code == 421
    assert host.text.count("\n") == 1 and 'Host "evil.example" is not this server\'s' in host.text
    origin = post(http_server, Origin="http://evil.example")
    assert origin.status_code == 403
    assert origin.text.count("\n") == 1
    assert 'Origin "http://evil.example" is not allowed' in origin.text
    assert "--allow-origin http://evil.example" in origin.text
    both = post(http_server, Host="evil.example", Origin="http://evil.example")
    assert 400 <= both.status_code < 500
    # Every request, not only /mcp's.
    assert httpx.get(http_server.replace("/mcp", "/"), headers={"Host": "a.b"}).status_code == 421
    # The bound address's own forms, a program without Origin, and an allowed origin.
    for headers in (
        {},
        {"Origin": f"http://127.0.0.1:{port}"},
        {"Host": f"localhost:{port}", "Origin": f"http://localhost:{port}"},
        {"Origin": ORIGIN},
    ):
        assert post(http_server, **headers).status_code == 200, headers


def test_the_allowed_hosts_and_origins_are_the_bound_addresss() -> None:
    from langgraph_refine.cli._mcp_http import HostCheck

    loopback = HostCheck(None, host="127.0.0.1", port=8000)
    assert loopback.refusal({"host": "localhost:8000", "origin": "http://[::1]:8000"}) is None
    assert loopback.refusal({"host": "127.0.0.1:8001"}) is not None  # another port
    assert loopback.refusal({"host": "127.0.0.1:8000", "origin": "null"}) is not None
    assert loopback.refusal({}) == (421, loopback.refusal({"host": ""})[1])  # type: ignore[index]
    lan = HostCheck(None, host="192.168.1.5", port=80, origins=["http://box.lan:8080"])
    assert lan.refusal({"host": "192.168.1.5"}) is None  # port 80 may go unsaid
    assert lan.refusal({"host": "localhost:80"}) is not None  # not bound to loopback
    assert lan.refusal({"host": "box.lan:8080", "origin": "http://box.lan:8080"}) is None


def test_a_bad_allow_origin_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    from langgraph_refine.cli import main

    args = ["mcp", "--transport", "streamable-http", "--allow-origin", "evil.example"]
    assert main([*args, "--model", "m"]) == 2
    assert "--allow-origin takes an origin such as http://localhost:6274; got 'evil.example'" in (
        capsys.readouterr().err
    )


@pytest.mark.slow
async def test_a_long_call_hears_progress_from_its_first_seconds_and_never_waits_10_s(
    http_server: str,
) -> None:
    # One draft takes LONG (12 s) seconds: no step of the loop ends in that time, so what
    # the host hears then is the beat. A host that resets its timeout on progress (the
    # TypeScript SDK's resetTimeoutOnProgress) never waits more than 10 s for the next.
    progress, totals = Progress(), []

    async def heard(done: float, total: float | None, message: str | None) -> None:
        totals.append(total)
        await progress(done, total, message)

    async with http_session(http_server) as session:
        start = time.monotonic()
        arguments = {"task": "[long] Write a haiku.", "max_iterations": 0}
        result = await session.call_tool("refine", arguments, progress_callback=heard)
        end = time.monotonic()
    assert not result.isError, text_of(result)
    times = [start, *progress.times, end]
    assert progress.times[0] - start < 2.0
    assert max(b - a for a, b in itertools.pairwise(times)) < 10.0
    messages = [message for _, message in progress.seen]
    assert messages[0] == "round 0: generating"
    assert any(re.fullmatch(r"round 0: generating \(\d+ s\)", m or "") for m in messages)
    assert messages[-3:] == [
        "round 0: judging",
        "round 0: score 0.30 (best 0.30)",
        "choosing the result",
    ]
    done = [value for value, _ in progress.seen]
    assert all(a < b for a, b in itertools.pairwise(done))  # as MCP requires
    assert set(totals) == {3.0} and done[-1] <= 3.0  # write, judge, choose


@pytest.mark.slow
async def test_a_host_is_told_in_its_own_words_from_a_short_listing(
    model: Any, tmp_path: Path
) -> None:
    errlog = tmp_path / "stderr.log"
    env = bare_environment(OPENAI_API_KEY="sk-scripted")
    async with gui_session(model_args(model), env, errlog) as session:
        # Started by its absolute path with a bare PATH, as a GUI host starts it.
        [tool] = (await session.list_tools()).tools
        listed = json.dumps(tool.model_dump(mode="json", exclude_none=True))
        assert len(listed) <= 3000, len(listed)
        schema = tool.inputSchema
        assert not {"record_key", "select_top", "select_margin"} & set(schema["properties"])
        budget = schema["properties"]["budget"]["properties"]
        assert "dollars" in budget["max_cost"]["description"]
        assert budget["max_seconds"]["description"] == "Seconds."
        assert "whole call" in schema["properties"]["budget"]["description"]
        assert "per model request" in schema["properties"]["max_tokens"]["description"]
        assert schema["properties"]["max_tokens"]["maximum"] == 512  # the server's cap

        before = len(model.requests)
        refusals = {
            "max_iterations": None,
            "budget": {"max_calls": None},
            "evaluator": ["judge", None],
            "criteria": 3,
            "confirm_pass": "yes",
            "max_tokens": 100000,
            "patience": -1,
            "output_schema": "{not json",
        }
        said = {}
        for name, value in refusals.items():
            refused = await session.call_tool("refine", {"task": "Write.", name: value})
            assert refused.isError, name
            said[name] = text_of(refused)
            assert name in said[name] and not PYTHON_WORDS.search(said[name]), said[name]
        assert said["max_iterations"] == (
            "max_iterations is null: leave it out for the default, or give an integer"
        )
        assert said["budget"].startswith("budget.max_calls is null")
        assert said["evaluator"] == (
            'evaluator must be a string or an array of strings; got ["judge", null]'
        )
        # An option the server's flags set is not an argument: named, with those there are.
        flags = text_of(await session.call_tool("refine", {"task": "W.", "strategy": "chain"}))
        assert flags.startswith("unknown argument(s) 'strategy': the arguments are budget, ")
        assert said["max_tokens"] == "max_tokens must be at most 512; got 100000"
        for arguments, said_ in (
            ({"max_iterations": 1}, "task is missing: give the request to answer, as text"),
            ({"task": " "}, 'task must be the request to answer, as text; got " "'),
            ({"task": None}, "task must be the request to answer, as text; got null"),
        ):
            assert text_of(await session.call_tool("refine", arguments)) == said_
        assert len(model.requests) == before  # refused before any model call

        # Given as text, as the Inspector's command line sends values: read, then checked.
        as_text = {"task": "Write.", "max_iterations": "0", "budget": '{"max_calls": 4}'}
        read = await session.call_tool("refine", as_text)
        assert read.structuredContent is not None, text_of(read)
        assert read.structuredContent["scores"] == [0.3]
    assert "Traceback" not in errlog.read_text()


@pytest.mark.slow
async def test_without_a_model_the_tool_is_listed_and_a_call_says_how_to_set_one(
    tmp_path: Path,
) -> None:
    errlog = tmp_path / "stderr.log"
    async with gui_session(["mcp"], bare_environment(), errlog) as session:
        [tool] = (await session.list_tools()).tools
        assert tool.name == "refine"
        result = await session.call_tool("refine", {"task": "Write a haiku."})
    assert result.isError
    said = text_of(result)
    assert said.startswith("this server has no model: add --model NAME to its args")
    assert "REFINE_MODEL" in said and not PYTHON_WORDS.search(said)
    assert said in errlog.read_text()  # the host's log says it too, from the start
    assert "Traceback" not in errlog.read_text()


class HangingModel:
    """An OpenAI-compatible address that reads each request and never answers.

    It records when each request arrived and when its client closed the connection.
    """

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.arrived: list[float] = []
        self.closed: list[float] = []
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"

    def _accept(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = self.sock.accept()
                threading.Thread(target=self._hold, args=(conn,), daemon=True).start()

    def _hold(self, conn: socket.socket) -> None:
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                data += chunk
            self.arrived.append(time.monotonic())
            with contextlib.suppress(OSError):
                while conn.recv(65536):  # the body, then nothing until the client closes
                    pass
            self.closed.append(time.monotonic())

    def close(self) -> None:
        self.sock.close()


async def wait_for(condition: Any, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.01)


def cancel(request_id: int) -> types.ClientNotification:
    params = types.CancelledNotificationParams(requestId=request_id, reason="the user stopped")
    return types.ClientNotification(types.CancelledNotification(params=params))


@pytest.mark.slow
async def test_a_cancel_closes_the_model_request_in_flight_within_a_second(
    tmp_path: Path,
) -> None:
    hanging = HangingModel()
    errlog = tmp_path / "stderr.log"
    env = bare_environment(OPENAI_API_KEY="sk-scripted")
    args = ["mcp", "--model", "scripted", "--base-url", hanging.url]
    try:
        async with gui_session(args, env, errlog) as session:
            request_id = session._request_id  # the SDK numbers a session's requests
            call = asyncio.create_task(session.call_tool("refine", {"task": "Write."}))
            await wait_for(lambda: hanging.arrived, 20)
            await session.send_notification(cancel(request_id))
            cancelled = time.monotonic()
            with pytest.raises(McpError, match="cancelled"):
                await asyncio.wait_for(call, timeout=5)
            await wait_for(lambda: hanging.closed, 3)
            assert hanging.closed[0] - cancelled < 1.0
            await asyncio.sleep(1.0)
            assert len(hanging.arrived) == 1  # nothing sent after the cancel

            # A host that goes away mid-call (closes the pipe): the request closes too.
            left = asyncio.create_task(session.call_tool("refine", {"task": "Write."}))
            await wait_for(lambda: len(hanging.arrived) == 2, 20)
            left.cancel()
        await wait_for(lambda: len(hanging.closed) == 2, 5)
    finally:
        hanging.close()
    assert "Traceback" not in errlog.read_text()


@pytest.mark.slow
async def test_a_client_that_goes_away_mid_call_leaves_no_traceback(
    http_server: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    # The client's session ends while its call runs (over stdio: in the cancel test).
    async with http_session(http_server) as session:
        arguments = {"task": "[slow] Write.", "max_iterations": 3, "patience": 0}
        call = asyncio.create_task(session.call_tool("refine", arguments))
        await asyncio.sleep(3 * SLOW)
        call.cancel()
    await asyncio.sleep(1.0)  # what the server writes once the session is gone
    assert "Traceback" not in server_log(tmp_path_factory)
    # And the server still serves.
    async with http_session(http_server) as session:
        assert (await session.list_tools()).tools


CONFORMANCE = ("server-initialize", "ping", "tools-list", "server-sse-multiple-streams")
"""The official conformance suite's scenarios that test this server: those that need the
suite's own tools, resources, prompts, logging or completions do not apply (docs/mcp.md);
`dns-rebinding-protection` runs beside them (it needs the 2025-11-25 spec's suite)."""


def conformance() -> list[str] | None:
    """The command running the conformance suite on Node.js 22, fetched by npx; else None."""
    if shutil.which("npx") is None:
        return None
    with contextlib.suppress(subprocess.SubprocessError, OSError):
        found = subprocess.run(
            ["npx", "-y", "-p", "node@22", "-p", "@modelcontextprotocol/conformance", "-c",
             "command -v node; command -v conformance"],
            capture_output=True, text=True, timeout=300, check=True,
        ).stdout.split()  # fmt: skip
        if len(found) == 2:
            return found
    return None


REQUIRE_CONFORMANCE_ENV = "LANGGRAPH_REFINE_REQUIRE_MCP_CONFORMANCE"
"""Set to 1 (as .ci/run does) to make a conformance suite that cannot run fail its test."""

NO_CONFORMANCE = (
    "the MCP conformance suite needs Node.js 22, fetched with npx (make mcp-conformance: "
    "npx -y -p node@22 -p @modelcontextprotocol/conformance): npx is missing or could not "
    "fetch them"
)


def skip_without(runner: list[str] | None, environ: Mapping[str, str]) -> list[str]:
    """`runner`; else skip, saying why (fail when the environment requires the suite)."""
    if runner is not None:
        return runner
    if environ.get(REQUIRE_CONFORMANCE_ENV, "").strip() == "1":
        pytest.fail(f"{REQUIRE_CONFORMANCE_ENV}=1 but {NO_CONFORMANCE}")
    pytest.skip(NO_CONFORMANCE)


def test_a_suite_that_cannot_run_skips_saying_why_unless_required() -> None:
    assert skip_without(["node", "conformance"], {}) == ["node", "conformance"]
    with pytest.raises(pytest.skip.Exception, match=r"needs Node\.js 22, fetched with npx"):
        skip_without(None, {})
    with pytest.raises(pytest.fail.Exception, match=f"{REQUIRE_CONFORMANCE_ENV}=1 but the MCP"):
        skip_without(None, {REQUIRE_CONFORMANCE_ENV: "1"})


@pytest.mark.slow
def test_the_official_conformance_scenarios_that_apply_pass(http_server: str) -> None:
    runner = skip_without(conformance(), os.environ)
    scenarios = (*CONFORMANCE, "dns-rebinding-protection")
    running = {
        scenario: subprocess.Popen(
            [*runner, "server", "--url", http_server, "--scenario", scenario],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for scenario in scenarios  # side by side: each mostly waits on node's start
    }
    for scenario, process in running.items():
        out, _ = process.communicate(timeout=120)
        assert process.returncode == 0 and ", 0 failed" in out, (scenario, out[-2000:])


def test_the_sdks_report_of_a_client_gone_is_dropped_and_any_other_kept() -> None:
    import logging

    import anyio

    from langgraph_refine.cli._mcp_http import ClientGone

    def record(error: BaseException | None) -> logging.LogRecord:
        info = (type(error), error, None) if error is not None else None
        return logging.LogRecord("mcp", logging.ERROR, __file__, 1, "SSE writer", (), info)

    gone = ClientGone()
    assert not gone.filter(record(anyio.ClosedResourceError()))
    assert not gone.filter(record(BaseExceptionGroup("tg", [anyio.BrokenResourceError()])))
    assert not gone.filter(record(ConnectionResetError(104, "reset")))
    assert gone.filter(record(RuntimeError("a bug")))  # a real error keeps its traceback
    assert gone.filter(record(ExceptionGroup("tg", [anyio.EndOfStream(), ValueError("x")])))
    assert gone.filter(record(None))


def test_a_run_the_judge_could_not_judge_is_an_error_result_in_a_hosts_words() -> None:
    from langgraph_refine.cli._mcp import _result, round_message

    result = {
        "response": "draft 1",
        "score": None,
        "verdict": None,
        "stop_reason": "unjudged",
        "usage": {},
        "scores": [None, None],
    }
    shown = _result(result)
    assert shown.isError and shown.structuredContent == result
    said, data = text_of(shown).split("\n", 1)
    assert said.startswith("the judge could not judge two answers in a row")
    assert json.loads(data) == result and not PYTHON_WORDS.search(said)
    event = {"iteration": 1, "score": None, "best_score": None, "error": "unreadable reply"}
    assert round_message(event) == "round 1: not judged (unreadable reply)"
    assert not _result({**result, "stop_reason": "passed"}).isError


async def test_progress_rises_with_every_notification_and_stays_within_the_total() -> None:
    from langgraph_refine.cli._mcp import Reporter

    sent: list[tuple[float, float, str]] = []

    async def notify(progress: float, total: float, message: str) -> None:
        sent.append((progress, total, message))

    reporter = Reporter(notify, total=3.0)
    round_ = {"type": "round", "iteration": 0, "score": 0.5, "best_score": 0.5}
    for mode, chunk in [
        ("tasks", {"name": "prepare", "input": {}}),
        ("tasks", {"name": "prepare", "result": {}}),
        ("tasks", {"name": "generate", "input": {}}),
        ("tasks", {"name": "generate", "result": {}}),
        ("tasks", {"name": "evaluate", "input": {}}),
        ("custom", round_),
        ("tasks", {"name": "evaluate", "result": {}}),
        ("tasks", {"name": "finalize", "input": {}}),
    ]:
        await reporter.take(mode, chunk)
    await reporter.report(f"{reporter.phase} (0 s)")  # a beat at the same instant
    values = [progress for progress, _, _ in sent]
    assert [message for _, _, message in sent] == [
        "round 0: generating",
        "round 0: judging",
        "round 0: score 0.50 (best 0.50)",
        "choosing the result",
        "choosing the result (0 s)",
    ]
    assert all(a < b for a, b in itertools.pairwise(values)) and values[-1] < 3.0
    assert [int(v) for v in values] == [0, 1, 1, 2, 2]  # the steps done


async def test_the_beat_speaks_within_a_second_of_the_start_then_every_five() -> None:
    import anyio

    from langgraph_refine.cli import _mcp

    heard: list[tuple[float, str]] = []
    start = time.monotonic()

    async def notify(progress: float, total: float, message: str) -> None:
        heard.append((time.monotonic() - start, message))

    reporter = _mcp.Reporter(notify, total=3.0)
    with anyio.move_on_after(_mcp.FIRST + 0.5):  # a loop that says nothing yet
        await reporter.beat()
    assert [message for _, message in heard] == ["starting (1 s)"]
    assert _mcp.FIRST * 0.99 <= heard[0][0] < _mcp.FIRST + 0.3
    assert _mcp.BEAT <= 5.0  # so a host never waits the 10 s it may allow


@pytest.mark.parametrize(
    "name",
    ["langgraph_refine._tool", "langgraph_refine.cli._mcp", "langgraph_refine.cli._mcp_http"],
)
def test_the_docstring_examples_hold(name: str) -> None:
    import doctest
    import importlib

    failures, tried = doctest.testmod(importlib.import_module(name), verbose=False)
    assert failures == 0 and tried > 0


def test_a_model_that_cannot_be_built_is_explained_like_no_model(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from langgraph_refine.cli._mcp import NO_MODEL, unavailable
    from langgraph_refine.cli._models import ModelSettings

    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    assert unavailable(ModelSettings(model=None)) == NO_MODEL
    said = unavailable(ModelSettings(model="openai:gpt-4o-mini"))
    assert said is not None
    assert said.startswith("this server cannot build its model: --model 'openai:gpt-4o-mini': ")
    assert "OPENAI_API_KEY" in said and said.endswith("configuration and restart it")
    assert unavailable(ModelSettings(model="scripted", base_url="http://127.0.0.1:9/v1")) is None

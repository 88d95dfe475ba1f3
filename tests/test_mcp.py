"""`langgraph-refine mcp`: the loop as an MCP tool, driven by the real `mcp` client.

The server runs as its own process (the point: an MCP host starts it, over stdio, or
reaches it over streamable HTTP: one process of each, shared by the tests), its models a
scripted OpenAI-compatible server on loopback that counts the calls. A task holding
`[slow]` makes every call of its run take `SLOW` seconds, so a run outlasts a client's
timeout, and a cancelled call can be seen to stop. The tool's schema and the command's
usage errors are checked in process. What a host meets first (Host and Origin checks,
progress on long calls, a cancel closing its request, refusals in a host's words, no
model) is in `test_mcp_hosts.py`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from http.server import ThreadingHTTPServer
from typing import Any

import pytest
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import McpError

from tests.test_server import free_port, scripted_openai

SLOW = 0.3
"""Seconds each model call of a `[slow]` task takes."""


def script(body: dict[str, Any]) -> str:
    """Drafts `draft N`; the judge scores draft N at 0.3 + 0.1 N (PASS from 0.9)."""
    prompt = "\n".join(str(m.get("content")) for m in body["messages"])
    if "[slow]" in prompt:
        time.sleep(SLOW)
    rated = re.search(r"<response_to_rate>\s*draft (\d+)\s*</response_to_rate>", prompt)
    if rated:
        score = round(0.3 + 0.1 * int(rated.group(1)), 2)
        verdict = "PASS" if score >= 0.9 else "NEEDS_IMPROVEMENT"
        return json.dumps({"verdict": verdict, "score": score, "feedback": "add detail"})
    return f"draft {prompt.count('<answer>')}"


@pytest.fixture(scope="module")
def model() -> Iterator[ThreadingHTTPServer]:
    with scripted_openai(script) as server:
        yield server


def command(model: ThreadingHTTPServer, *extra: str) -> list[str]:
    url = f"http://127.0.0.1:{model.server_address[1]}/v1"
    return ["-m", "langgraph_refine", "mcp", "--model", "scripted", "--base-url", url, *extra]


def environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REFINE_", "OPENAI_"))}
    return {**env, "OPENAI_API_KEY": "sk-scripted"}


@contextlib.asynccontextmanager
async def stdio_session(model: ThreadingHTTPServer, *extra: str) -> AsyncIterator[ClientSession]:
    """A client session with `langgraph-refine mcp` started as a host starts it."""
    params = StdioServerParameters(
        command=sys.executable, args=command(model, *extra), env=environment()
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


@pytest.fixture(scope="module")
def http_server(model: ThreadingHTTPServer) -> Iterator[str]:
    """`langgraph-refine mcp --transport streamable-http` on a free port; its `/mcp` URL."""
    port = free_port()
    args = command(model, "--transport", "streamable-http", "--port", str(port))
    process = subprocess.Popen(
        [sys.executable, *args], env=environment(), stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError):
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            assert process.poll() is None, process.stderr.read() if process.stderr else ""
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=10)


@contextlib.asynccontextmanager
async def http_session(url: str) -> AsyncIterator[ClientSession]:
    async with (
        streamable_http_client(url) as (read, write, _),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


class Progress:
    """A progress callback that keeps what it was told, and when."""

    def __init__(self) -> None:
        self.seen: list[tuple[float, str | None]] = []
        self.times: list[float] = []

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self.seen.append((progress, message))
        self.times.append(time.monotonic())


def text_of(result: types.CallToolResult) -> str:
    [content] = result.content
    assert isinstance(content, types.TextContent)
    return content.text


@pytest.mark.slow
async def test_a_host_over_stdio_gets_a_json_result_progress_and_readable_refusals(
    model: ThreadingHTTPServer,
) -> None:
    async with stdio_session(model) as session:
        [tool] = (await session.list_tools()).tools
        assert tool.name == "refine"
        schema = tool.inputSchema
        assert schema["required"] == ["task"] and schema["additionalProperties"] is False
        # The run options a host may set, from the declaration; the models are the flags'.
        assert {"max_iterations", "budget", "criteria", "evaluator"} <= set(schema["properties"])
        assert not {"models", "judge_model", "messages", "strategy"} & set(schema["properties"])
        assert tool.outputSchema is not None and "scores" in tool.outputSchema["properties"]

        progress = Progress()
        before = len(model.requests)  # type: ignore[attr-defined]
        arguments = {"task": "Write a haiku.", "criteria": ["Name the season."]}
        result = await session.call_tool(
            "refine", {**arguments, "max_iterations": 2}, progress_callback=progress
        )
        assert not result.isError, text_of(result)
        output = result.structuredContent
        assert output is not None
        assert json.loads(text_of(result)) == output  # the same, as JSON text
        assert (output["response"], output["stop_reason"]) == ("draft 2", "max_iterations")
        assert (output["score"], output["verdict"]) == (0.5, "NEEDS_IMPROVEMENT")
        assert output["scores"] == [0.3, 0.4, 0.5]
        assert output["usage"]["calls"] == 6 == len(model.requests) - before  # type: ignore[attr-defined]
        # Each step as it starts (the phase) and each round's score, progress rising.
        assert [message for _, message in progress.seen] == [
            "round 0: generating",
            "round 0: judging",
            "round 0: score 0.30 (best 0.30)",
            "round 1: generating a refinement",
            "round 1: judging",
            "round 1: score 0.40 (best 0.40)",
            "round 2: generating a refinement",
            "round 2: judging",
            "round 2: score 0.50 (best 0.50)",
            "choosing the result",
        ]
        done = [value for value, _ in progress.seen]
        assert done == sorted(set(done)) and [int(v) for v in done[2::3]] == [1, 3, 5]
        judged = [
            json.dumps(body["messages"])
            for body in model.requests[before:]  # type: ignore[attr-defined]
            if "<response_to_rate>" in json.dumps(body["messages"])
        ]
        assert judged and all("Name the season." in prompt for prompt in judged)

        # A misspelt argument is refused by name, with the arguments there are.
        before = len(model.requests)  # type: ignore[attr-defined]
        typo = await session.call_tool("refine", {"task": "Write a haiku.", "max_iteration": 2})
        assert typo.isError
        assert text_of(typo).startswith("unknown argument(s) 'max_iteration': the arguments are")
        assert "max_iterations" in text_of(typo) and "task" in text_of(typo)
        # A run the loop refuses says why, before any model call.
        refused = await session.call_tool("refine", {"task": "Write.", "max_tokens": 100000})
        assert refused.isError
        assert text_of(refused) == "max_tokens must be at most 512; got 100000"
        bad = await session.call_tool("refine", {"task": "Write.", "target_score": 2})
        assert text_of(bad) == "target_score must be in [0, 1], got 2"
        empty = await session.call_tool("refine", {"task": " "})
        assert empty.isError and "task" in text_of(empty)
        assert len(model.requests) == before  # type: ignore[attr-defined]

        # Values sent as text (as the Inspector's command line sends them) are read.
        as_text = {"task": "Write.", "max_iterations": "0", "budget": '{"max_calls": 4}'}
        read = await session.call_tool("refine", as_text)
        assert read.structuredContent is not None, text_of(read)
        assert read.structuredContent["scores"] == [0.3]


@pytest.mark.slow
async def test_a_cancelled_call_stops_the_loop_and_the_server_serves_the_next(
    http_server: str, model: ThreadingHTTPServer
) -> None:
    async with http_session(http_server) as session:
        progress = Progress()
        started = asyncio.Event()

        async def on_progress(done: float, total: float | None, message: str | None) -> None:
            await progress(done, total, message)
            started.set()

        # The SDK numbers a session's requests from 0 (initialize): this call is the next.
        request_id = session._request_id
        arguments = {"task": "[slow] Write a haiku.", "max_iterations": 8, "patience": 0}
        call = asyncio.create_task(
            session.call_tool("refine", arguments, progress_callback=on_progress)
        )
        await asyncio.wait_for(started.wait(), timeout=20)  # round 0 is done
        await session.send_notification(
            types.ClientNotification(
                types.CancelledNotification(
                    params=types.CancelledNotificationParams(requestId=request_id, reason="stop")
                )
            )
        )
        with pytest.raises(McpError, match="cancelled"):
            await asyncio.wait_for(call, timeout=10)
        await asyncio.sleep(SLOW)  # a request already on its way when the call was cancelled
        sent = len(model.requests)  # type: ignore[attr-defined]
        assert sent < 2 * 9  # far fewer than the nine rounds asked for
        await asyncio.sleep(3 * SLOW)  # a loop still running would have called again
        assert len(model.requests) == sent  # type: ignore[attr-defined]
        assert len(progress.seen) == 1  # nothing further about the cancelled call

        # The server is free for the next call.
        result = await session.call_tool("refine", {"task": "Write.", "max_iterations": 0})
        assert not result.isError and result.structuredContent is not None
        assert result.structuredContent["scores"] == [0.3]


@pytest.mark.slow
async def test_progress_keeps_a_call_longer_than_the_clients_timeout_alive(
    http_server: str,
) -> None:
    # MCP clients time a call out (60 s by default); those that reset the timer on each
    # progress notification (the TypeScript SDK's `resetTimeoutOnProgress`, which the
    # Inspector uses) wait for as long as progress keeps coming. The Python SDK has no such
    # reset, so this client keeps its own: `idle` seconds without a notification fail it.
    idle = 4 * SLOW  # a round is two calls: 2 * SLOW
    progress = Progress()
    async with http_session(http_server) as session:
        start = time.monotonic()
        arguments = {"task": "[slow] Write a haiku.", "max_iterations": 3, "patience": 0}
        call = asyncio.create_task(
            session.call_tool("refine", arguments, progress_callback=progress)
        )
        while not call.done():
            last = progress.times[-1] if progress.times else start
            assert time.monotonic() - last < idle, "no progress for longer than the timeout"
            await asyncio.sleep(0.05)
        result = call.result()
    took = time.monotonic() - start
    assert not result.isError, text_of(result)
    assert took > 1.5 * idle  # longer than a client with a fixed `idle` timeout waits
    rounds = [message for _, message in progress.seen if message and ": score " in message]
    assert len(rounds) == 4 and progress.seen[-1][1] == "choosing the result"
    assert result.structuredContent is not None
    assert len(result.structuredContent["scores"]) == 4

    # The same call with a fixed timeout of `idle` seconds gives up.
    async with http_session(http_server) as session:
        with pytest.raises(McpError, match="Timed out"):
            await session.call_tool(
                "refine",
                {"task": "[slow] Write a haiku.", "max_iterations": 3, "patience": 0},
                read_timeout_seconds=timedelta(seconds=idle),
            )


@pytest.mark.slow
async def test_langchain_mcp_adapters_load_the_tool_into_an_agent(http_server: str) -> None:
    from langchain.agents import create_agent
    from langchain_core.messages import AIMessage, ToolMessage
    from langchain_mcp_adapters.client import MultiServerMCPClient

    from tests.fakes import AgentModel

    client = MultiServerMCPClient({"refine": {"transport": "streamable_http", "url": http_server}})
    [tool] = await client.get_tools()
    assert tool.name == "refine" and "max_iterations" in tool.args
    ask = AIMessage(
        "",
        tool_calls=[
            {
                "name": "refine",
                "args": {"task": "Write a haiku.", "max_iterations": 1},
                "id": "call-1",
            }
        ],
    )
    agent = create_agent(AgentModel(replies=[ask, AIMessage("Here it is.")]), tools=[tool])
    state = await agent.ainvoke({"messages": [("user", "A haiku, refined please.")]})
    [message] = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    artifact = message.artifact["structured_content"]
    assert (artifact["response"], artifact["scores"]) == ("draft 1", [0.3, 0.4])
    assert artifact["stop_reason"] == "max_iterations"
    assert json.loads(message.content[0]["text"]) == artifact  # the JSON text block


def test_the_tool_takes_the_run_options_a_host_model_can_use_in_its_words() -> None:
    from langgraph_refine._decisions._options import CONTEXT, context_key, declaration, declared
    from langgraph_refine.cli._mcp import SERVER_SETS, RefineTool, listing, option_names
    from langgraph_refine.cli._models import ModelSettings

    tool = RefineTool(None, option_names(SERVER_SETS), ModelSettings(model=None))
    schema = tool.schema()
    # Every option a run's context takes (a new one too), but those the server's flags set.
    taken = {context_key(name) for name in declared(CONTEXT) if name not in SERVER_SETS}
    assert set(schema["properties"]) == {"task"} | taken
    for name, flag in SERVER_SETS.items():  # each is the server's own flag, or none at all
        assert (flag in declaration(name).flags) if flag else not declaration(name).flags
    assert all(p["description"] for p in schema["properties"].values())
    budget = schema["properties"]["budget"]["properties"]
    assert budget["max_calls"]["type"] == "integer" and budget["max_calls"]["minimum"] == 0
    assert all(limit["description"] for limit in budget.values())
    assert schema["properties"]["max_iterations"]["type"] == "integer"
    text = json.dumps(listing(tool).model_dump(mode="json", exclude_none=True))
    assert len(text) <= 3000, len(text)
    for python in ("RefineMiddleware", "pydantic", "Unjudged", "EDITS_AUTO", "LoopOptions"):
        assert python not in text


def test_the_schema_shows_the_servers_own_defaults() -> None:
    from langgraph_refine import LoopOptions
    from langgraph_refine.cli._mcp import SERVER_SETS, RefineTool, option_names
    from langgraph_refine.cli._models import ModelSettings

    settings = ModelSettings(model=None, max_tokens=256)
    tool = RefineTool(None, option_names(SERVER_SETS), settings, LoopOptions(max_iterations=2))
    properties = tool.schema()["properties"]
    assert properties["max_iterations"]["default"] == 2  # --max-iterations 2
    assert properties["max_tokens"]["maximum"] == 256  # --max-tokens 256
    assert tool.total({}) == 7 and tool.total({"max_iterations": 0}) == 3


def test_the_command_takes_runs_model_and_check_flags_and_refuses_a_bad_transport(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from langgraph_refine.cli import main

    assert main(["mcp", "--help"]) == 0
    shown = capsys.readouterr().out
    for flag in ("--model", "--base-url", "--judge-model", "--evaluator", "--max-iterations"):
        assert flag in shown
    assert "--review" not in shown  # no person to answer a review
    assert main(["mcp", "--transport", "ftp", "--model", "m"]) == 2
    assert "--transport must be one of stdio, streamable-http; got 'ftp'" in capsys.readouterr().err
    assert main(["mcp", "--port", "0", "--model", "m"]) == 2
    assert "--port must be a port number" in capsys.readouterr().err

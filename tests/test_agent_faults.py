"""Provider faults on the agent path over the real OpenAI client, beside the graph's.

`create_agent(ChatOpenAI(...))` + `RefineMiddleware` and `refine` talk HTTP to the
scripted server of `tests/fault_server.py` (client retries off: the loop's own policy is
what is tested). The same script gives the same outcome on both paths: a 5xx, a reset
connection and a malformed body on a refinement are retried; every request the server
received is counted in the result; a 401 after paid work raises carrying `.result`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage

from langgraph_refine import RefineMiddleware, RefineResult, arefine, refine
from langgraph_refine.evaluators import llm_judge
from tests.fault_server import FaultServer, Reply, error, malformed, ok
from tests.test_faults import FAST, TASK, chat  # the graph's tests' model and policy


@pytest.fixture
def server() -> Iterator[FaultServer]:
    with FaultServer().serve() as running:
        yield running


def run(path: str, mode: str, server: FaultServer, **options: Any) -> RefineResult:
    options = {"retry_policy": FAST, "max_iterations": 1, "patience": None, **options}
    judge = llm_judge(chat(server))
    if path == "graph":
        if mode == "sync":
            return refine(chat(server), TASK, judge, **options)
        return asyncio.run(arefine(chat(server), TASK, judge, **options))
    middleware = RefineMiddleware(judge, **options)
    agent = create_agent(chat(server), tools=[], middleware=[middleware])
    request = {"messages": [HumanMessage(TASK)]}
    state = agent.invoke(request) if mode == "sync" else asyncio.run(agent.ainvoke(request))
    return middleware.result(state)


PATHS = pytest.mark.parametrize("path", ["graph", "agent"])
MODES = pytest.mark.parametrize("mode", ["sync", "async"])
DROPPED = Reply(status=200, body=b'{"id": "chatcmpl", "choi')  # cut mid-body


@PATHS
@MODES
@pytest.mark.parametrize(
    "fault",
    [error(503), DROPPED, malformed(b"<html>Bad gateway</html>", "text/html")],
    ids=["503", "truncated", "html"],
)
def test_a_fault_on_the_refinement_is_retried_and_every_request_counted(
    server: FaultServer, path: str, mode: str, fault: Reply
) -> None:
    # Draft 0, its judgment, then the refinement fails once and is retried.
    server.script(ok(), ok(), fault)
    result = run(path, mode, server)
    assert len(result.attempts) == 2
    assert result.stop_reason == "max_iterations"
    assert result.usage.calls == len(server.received) == 5


@PATHS
@MODES
def test_a_401_after_paid_work_raises_carrying_the_result(
    server: FaultServer, path: str, mode: str
) -> None:
    server.script(ok(), ok(), error(401))
    with pytest.raises(openai.AuthenticationError) as info:
        run(path, mode, server)
    result = info.value.result  # type: ignore[attr-defined]
    assert [a.response for a in result.attempts] == ["draft 1"]
    assert result.usage.calls == len(server.received) == 3

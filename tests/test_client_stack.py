"""The loop's promises on the client stack users run: `ChatOpenAI` built with its defaults.

Every test talks to a real HTTP server on loopback (`FaultServer`) through the model as a
user builds it, `ChatOpenAI(model=..., base_url=..., api_key=...)`: the OpenAI SDK retries
a failed request twice by itself and waits up to 600 s for a reply. The promises are about
what the server receives: requests counted and bounded by the budget, none open or sent
after a run returns, a cancel that closes the request in flight, a judge that cannot judge
stopping the loop. Each runs on the graph and the agent, sync and async.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import ModelFallbackMiddleware, ModelRetryMiddleware
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver

from langgraph_refine import (
    Budget,
    RefineMiddleware,
    RefineResult,
    arefine,
    create_refine_graph,
)
from langgraph_refine.evaluators import llm_judge
from tests.fault_server import FaultServer, Received, Reply, error, hang, malformed
from tests.test_faults import FAST

TASK = "Write a haiku about rivers."
PATHS = ["graph-sync", "graph-async", "agent-sync", "agent-async"]


@pytest.fixture
def server() -> Iterator[FaultServer]:
    with FaultServer().serve() as running:
        yield running


def users_model(server: FaultServer) -> ChatOpenAI:
    """The model as users build it: the SDK's own retries and timeout left as they are."""
    return ChatOpenAI(model="fault-model", base_url=server.base_url, api_key="test-key")


def loop(path: str, model: ChatOpenAI, **options: Any) -> Callable[[], RefineResult]:
    """The run of one loop on `path`, built; its judge an LLM judge on the same model."""
    if path.startswith("graph"):
        graph: Any = create_refine_graph(model, None, **options).compile(
            checkpointer=InMemorySaver()
        )
        config = {"configurable": {"thread_id": "run"}}
        ask: dict[str, Any] = {"task": TASK}

        def result(out: Any) -> RefineResult:
            return RefineResult.from_state(graph.get_state(config).values)

        if path.endswith("async"):
            return lambda: result(asyncio.run(graph.ainvoke(ask, config)))
        return lambda: result(graph.invoke(ask, config))
    else:
        middleware = RefineMiddleware(llm_judge(model), **options)
        graph = create_agent(model, tools=[], middleware=[middleware])
        ask = {"messages": [("user", TASK)]}
        result = middleware.result
    if path.endswith("async"):
        return lambda: result(asyncio.run(graph.ainvoke(ask)))
    return lambda: result(graph.invoke(ask))


def run(path: str, model: ChatOpenAI, **options: Any) -> RefineResult:
    """One loop on `path` (see `loop`); its result."""
    return loop(path, model, **options)()


def sent_since(server: FaultServer, before: int) -> list[Received]:
    return server.received[before:]


# -- max_calls bounds what the provider receives -------------------------------------------


@pytest.mark.parametrize("path", PATHS)
def test_max_calls_bounds_the_requests_of_a_model_built_with_its_defaults(
    server: FaultServer, path: str
) -> None:
    model = users_model(server)
    # The SDK alone would send the first request three times, each a call the loop never saw.
    server.script(error(500), error(500), error(500))
    result = run(path, model, budget=Budget(max_calls=6), retry_policy=FAST, patience=None)
    # Three failures and the answer, its judgment; a second answer could not be judged.
    assert len(server.received) == 5
    assert result.usage.calls == 5  # every request the provider received, failed ones too
    assert result.stop_reason == "budget_exhausted"
    # The user's object is as it was: its client still retries by itself.
    assert model.max_retries is None
    assert model.root_client.max_retries == 2


@pytest.mark.parametrize("path", PATHS)
def test_a_failing_provider_is_counted_request_for_request(server: FaultServer, path: str) -> None:
    server.script(error(503), Reply(status=408), error(429, {"retry-after": "0"}))
    result = run(path, users_model(server), retry_policy=FAST, max_iterations=1, patience=None)
    assert result.usage.calls == len(server.received) == 3 + 4  # three failures, two rounds


# -- deadlines reach the socket ------------------------------------------------------------


@pytest.mark.parametrize("path", PATHS)
def test_a_run_cut_by_max_seconds_leaves_no_request_open(server: FaultServer, path: str) -> None:
    server.judge_reply = hang(30)  # the judge's request hangs; the SDK would wait 600 s
    running = loop(path, users_model(server), budget=Budget(max_seconds=2), retry_policy=FAST)
    started = time.monotonic()
    result = running()
    returned = time.monotonic()
    assert returned - started <= 2 + 0.5
    assert result.stop_reason == "budget_exhausted"
    assert result.value.startswith("draft")  # the answer made before the deadline is kept
    time.sleep(0.1)  # the server notices a closed connection within 20 ms
    assert server.open_hangs() == []  # no request of the run is still open
    judged = [n for n, r in enumerate(server.received, 1) if r.is_judge]
    assert judged and all(server.closed[n] <= returned + 0.1 for n in judged)
    count = len(server.received)
    time.sleep(1.5)
    assert len(server.received) == count  # and none is sent after the run returned


@pytest.mark.parametrize("path", ["graph-async", "agent-async"])
def test_a_cancelled_run_closes_its_request_within_a_second(server: FaultServer, path: str) -> None:
    server.script(hang(30))
    model = users_model(server)

    async def cancelled() -> float:
        if path.startswith("graph"):
            task = asyncio.ensure_future(arefine(model, TASK, None, retry_policy=FAST))
        else:
            agent = create_agent(model, tools=[], middleware=[RefineMiddleware(llm_judge(model))])
            task = asyncio.ensure_future(agent.ainvoke({"messages": [("user", TASK)]}))
        while not server.open_hangs():
            await asyncio.sleep(0.01)
        task.cancel()
        cancelled_at = time.monotonic()
        with pytest.raises(asyncio.CancelledError):
            await task
        return cancelled_at

    cancelled_at = asyncio.run(cancelled())
    deadline = cancelled_at + 1.0
    while time.monotonic() < deadline and 1 not in server.closed:
        time.sleep(0.01)
    assert server.closed[1] - cancelled_at <= 1.0
    assert len(server.received) == 1  # nothing was sent again


CTRL_C = textwrap.dedent(
    """
    import sys
    from langchain_openai import ChatOpenAI
    from langgraph_refine import Budget, refine
    model = ChatOpenAI(model="fault-model", base_url=sys.argv[1], api_key="test-key")
    budget = Budget(max_seconds=float(sys.argv[2])) if sys.argv[2] != "none" else None
    print("started", flush=True)
    try:
        refine(model, "Write.", None, budget=budget)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
    """
)


@pytest.mark.parametrize("max_seconds", ["none", "60"], ids=["no_deadline", "deadline"])
def test_ctrl_c_closes_the_request_in_flight_within_a_second(
    server: FaultServer, max_seconds: str
) -> None:
    server.script(hang(30))
    child = subprocess.Popen(
        [sys.executable, "-c", CTRL_C, server.base_url, max_seconds],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        # A suite started in the background ignores SIGINT, and so would the child.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        end = time.monotonic() + 30
        while not server.open_hangs() and time.monotonic() < end:
            time.sleep(0.01)
        assert server.open_hangs() == [1]
        child.send_signal(signal.SIGINT)
        interrupted_at = time.monotonic()
        while 1 not in server.closed and time.monotonic() < interrupted_at + 1.5:
            time.sleep(0.01)
        assert server.closed[1] - interrupted_at <= 1.0
        out, _ = child.communicate(timeout=10)
        assert "interrupted" in out
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


# -- a judge that cannot judge stops the loop ----------------------------------------------


@pytest.mark.parametrize("path", PATHS)
def test_a_judge_whose_replies_are_unreadable_stops_the_loop(
    server: FaultServer, path: str
) -> None:
    server.judge_reply = malformed(b'{"choices": [{"message": {"content": "no json')
    result = run(path, users_model(server), retry_policy=FAST, max_iterations=9, patience=None)
    assert result.stop_reason == "unjudged"
    assert len(result.attempts) == 2
    assert all(a.evaluation is None and a.error for a in result.attempts)
    assert result.value == result.attempts[-1].response  # none judged: the last
    judged = [r for r in server.received if r.is_judge]
    assert len(judged) <= 2 * FAST.max_attempts  # retries and re-asks never multiply
    assert result.usage.calls == len(server.received)


@pytest.mark.parametrize("path", ["graph-sync", "agent-async"])
def test_a_judge_that_always_fails_costs_at_most_the_policy_tries(
    server: FaultServer, path: str
) -> None:
    server.judge_reply = error(503)
    result = run(path, users_model(server), retry_policy=FAST, max_iterations=9, patience=None)
    assert result.stop_reason == "unjudged"
    judged = [r for r in server.received if r.is_judge]
    assert len(judged) == 2 * FAST.max_attempts  # 4 tries an answer, no re-judgment on top


@pytest.mark.parametrize("path", ["graph-sync", "agent-sync"])
def test_an_unjudged_answer_between_judged_ones_does_not_stop_the_loop(
    server: FaultServer, path: str
) -> None:
    # One answer's judgments fail (four tries), the next ones are judged: the loop goes on.
    server.script(Reply(), *[error(503)] * FAST.max_attempts)
    result = run(path, users_model(server), retry_policy=FAST, max_iterations=2, patience=None)
    assert result.stop_reason == "max_iterations"
    assert [a.evaluation is not None for a in result.attempts] == [False, True, True]
    assert result.value == result.attempts[1].response  # the best judged one


# -- LangChain's middleware around RefineMiddleware ----------------------------------------


def retried(
    server: FaultServer, max_calls: int, max_retries: int, on_failure: str
) -> tuple[Any, RefineMiddleware]:
    """An agent whose model step LangChain's retry middleware wraps, around the loop's."""
    model = users_model(server)
    refine_mw = RefineMiddleware(
        llm_judge(model), budget=Budget(max_calls=max_calls), retry_policy=FAST
    )
    retry = ModelRetryMiddleware(
        max_retries=max_retries, initial_delay=0.0, jitter=False, on_failure=on_failure
    )
    return create_agent(model, tools=[], middleware=[retry, refine_mw]), refine_mw


@pytest.mark.parametrize("path", ["sync", "async"])
@pytest.mark.parametrize("on_failure", ["continue", "error"])
def test_a_retry_middleware_around_the_loop_is_counted_and_bounded(
    server: FaultServer, on_failure: str, path: str
) -> None:
    server.script(*[error(500)] * 40)
    agent, refine_mw = retried(server, max_calls=10, max_retries=3, on_failure=on_failure)
    out = invoked(agent, path)
    # The retries around the loop's own are counted; the budget refuses the 10th request
    # (an answer it would buy could not be judged).
    assert len(server.received) == 9
    assert refine_mw.result(out).usage.calls == 9
    assert refine_mw.result(out).stop_reason == "budget_exhausted"


@pytest.mark.parametrize("path", ["sync", "async"])
@pytest.mark.parametrize("on_failure", ["continue", "error"])
def test_a_retry_middleware_giving_up_ends_the_loop_with_model_error(
    server: FaultServer, on_failure: str, path: str
) -> None:
    server.script(*[error(500)] * 40)
    agent, refine_mw = retried(server, max_calls=30, max_retries=2, on_failure=on_failure)
    sent = 3 * FAST.max_attempts  # the middleware's three tries, each the loop's four
    if on_failure == "error":
        with pytest.raises(Exception) as raised:
            invoked(agent, path)
        result = raised.value.result  # type: ignore[attr-defined]
    else:
        result = refine_mw.result(invoked(agent, path))
    assert len(server.received) == sent
    assert result.usage.calls == sent
    assert result.stop_reason == "model_error"


@pytest.mark.parametrize("path", ["sync", "async"])
def test_a_fallback_middleware_around_the_loop_is_counted(server: FaultServer, path: str) -> None:
    server.script(*[error(500)] * FAST.max_attempts)  # the first model's step fails
    model = users_model(server)
    fallback = ChatOpenAI(model="fallback-model", base_url=server.base_url, api_key="test-key")
    refine_mw = RefineMiddleware(
        llm_judge(model), budget=Budget(max_calls=10), retry_policy=FAST, max_iterations=0
    )
    agent = create_agent(model, tools=[], middleware=[ModelFallbackMiddleware(fallback), refine_mw])
    result = refine_mw.result(invoked(agent, path))
    # Four failed tries of the first model, the fallback's answer, its judgment.
    assert [r.body["model"] for r in server.received if not r.is_judge] == [
        "fault-model"
    ] * FAST.max_attempts + ["fallback-model"]
    assert result.usage.calls == len(server.received) == FAST.max_attempts + 2
    assert result.value.startswith("draft")
    assert fallback.root_client.max_retries == 2  # the user's fallback, unchanged


def invoked(agent: Any, path: str) -> Any:
    ask = {"messages": [("user", TASK)]}
    return asyncio.run(agent.ainvoke(ask)) if path == "async" else agent.invoke(ask)


def test_a_payload_error_from_aiohttp_in_a_cause_chain_is_transient() -> None:
    aiohttp = pytest.importorskip("aiohttp")
    from langgraph_refine._calls._retry import is_transient

    wrapped = RuntimeError("the reply could not be read")
    wrapped.__cause__ = aiohttp.ClientPayloadError("Response payload is not completed")
    assert is_transient(wrapped)
    transfer = aiohttp.http_exceptions.TransferEncodingError("Not enough data for satisfy")
    wrapped.__cause__ = aiohttp.ClientPayloadError(str(transfer))
    wrapped.__cause__.__cause__ = transfer
    assert is_transient(wrapped)


# -- the copy the loop holds ---------------------------------------------------------------


def test_the_loop_holds_a_copy_of_chat_anthropic_with_its_retries_off() -> None:
    anthropic = pytest.importorskip("langchain_anthropic")
    from langgraph_refine._calls._clients import held

    model = anthropic.ChatAnthropic(model="claude-x", api_key="k", base_url="http://127.0.0.1:9")
    copy = held(model)
    assert copy.max_retries == 0 and copy._client.max_retries == 0
    assert model.max_retries == 2 and model._client.max_retries == 2  # the user's, unchanged
    assert held(model) is copy  # one copy per model: its connections are reused


def test_a_model_whose_retries_the_loop_cannot_take_over_is_named_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from langgraph_refine._calls._clients import held
    from tests.fakes import ScriptedChatModel

    class Retrying(ScriptedChatModel):
        max_retries: int = 3

    model = Retrying(replies=["x"])
    with caplog.at_level("WARNING", logger="langgraph_refine"):
        assert held(model) is model
        held(Retrying(replies=["y"]))
    warnings = [r.getMessage() for r in caplog.records if "Retrying" in r.getMessage()]
    assert len(warnings) == 1
    assert "max_retries=3" in warnings[0] and "max_retries=0" in warnings[0]
    plain = ScriptedChatModel(replies=["x"])
    assert held(plain) is plain  # no retries of its own: called as it is


def test_the_users_own_http_client_is_kept(server: FaultServer) -> None:
    import httpx

    from langgraph_refine._calls._clients import held

    seen: list[str] = []
    client = httpx.Client(event_hooks={"request": [lambda request: seen.append(request.url.path)]})
    model = ChatOpenAI(
        model="fault-model", base_url=server.base_url, api_key="test-key", http_client=client
    )
    held(model).invoke("hello")
    assert seen == ["/v1/chat/completions"]  # sent through the user's client
    assert held(model).root_client.max_retries == 0

"""Retry policy: transient provider errors are retried with backoff, other 4xx fail at once."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from langgraph.types import RetryPolicy

from langgraph_refine import Budget, GeneratorNode, arefine, refine
from langgraph_refine._calls._retry import (
    DEFAULT_RETRY_POLICY,
    is_transient,
    retry_after_seconds,
    retry_wait,
)
from tests.fakes import scores


class FakeResponse:
    def __init__(self, status: int, headers: dict[str, str] | None = None) -> None:
        self.status_code = status
        self.headers = headers or {}


class HTTPError(Exception):
    def __init__(self, status: int, headers: dict[str, str] | None = None) -> None:
        super().__init__(f"Error code: {status}")
        self.status_code = status
        self.response = FakeResponse(status, headers)


class APIConnectionError(Exception):
    """Named like openai's, which the policy recognises by name."""


@pytest.mark.parametrize("status", [408, 409, 429, 500, 502, 503, 504])
def test_transient_statuses(status: int) -> None:
    assert is_transient(HTTPError(status))


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_other_4xx_are_not_retried(status: int) -> None:
    assert not is_transient(HTTPError(status))


def test_connection_errors_and_timeouts_are_transient() -> None:
    assert is_transient(ConnectionResetError())
    assert is_transient(TimeoutError())
    assert is_transient(APIConnectionError("boom"))
    assert not is_transient(ValueError("bad"))


def test_retry_after_parsing() -> None:
    assert retry_after_seconds(HTTPError(429, {"retry-after": "2"})) == 2.0
    assert retry_after_seconds(HTTPError(429, {"retry-after-ms": "250"})) == 0.25
    assert retry_after_seconds(HTTPError(429, {"retry-after": "soon"})) is None
    assert retry_after_seconds(HTTPError(429, {"retry-after": "100000"})) == 60.0
    assert retry_after_seconds(HTTPError(429)) is None


def flaky(errors: list[Exception]) -> Any:
    calls: list[float] = []

    def gen(state: Any) -> str:
        calls.append(time.monotonic())
        if len(calls) <= len(errors):
            raise errors[len(calls) - 1]
        return "ok"

    gen.calls = calls  # type: ignore[attr-defined]
    return gen


def test_500_then_success_completes() -> None:
    gen = flaky([HTTPError(500)])
    result = refine(gen, "t", scores(1.0))
    assert result.value == "ok"
    assert len(gen.calls) == 2


def test_429_honours_retry_after() -> None:
    gen = flaky([HTTPError(429, {"retry-after": "1"})])
    fast = RetryPolicy(initial_interval=0.01, jitter=False, retry_on=DEFAULT_RETRY_POLICY.retry_on)
    refine(gen, "t", scores(1.0), retry_policy=fast)
    assert gen.calls[1] - gen.calls[0] >= 1.0


def test_401_fails_at_once_naming_status_and_node() -> None:
    gen = flaky([HTTPError(401)])
    with pytest.raises(
        HTTPError, match=r"generator failed on attempt 0 in node 'generate' \(HTTP 401\)"
    ):
        refine(gen, "t", scores(1.0))
    assert len(gen.calls) == 1


def test_attempts_are_bounded() -> None:
    gen = flaky([HTTPError(503)] * 10)
    policy = RetryPolicy(initial_interval=0.01, max_attempts=3, jitter=False, retry_on=is_transient)
    with pytest.raises(HTTPError, match="503"):
        refine(gen, "t", scores(1.0), retry_policy=policy)
    assert len(gen.calls) == 3


def test_retry_policy_none_disables_retries() -> None:
    gen = flaky([HTTPError(500)])
    with pytest.raises(HTTPError):
        refine(gen, "t", scores(1.0), retry_policy=None)
    assert len(gen.calls) == 1


def test_evaluator_is_retried_too() -> None:
    calls: list[int] = []

    def ev(response: str, state: Any) -> float:
        calls.append(1)
        if len(calls) == 1:
            raise HTTPError(502)
        return 1.0

    fast = RetryPolicy(initial_interval=0.01, jitter=False, retry_on=is_transient)
    assert refine(lambda s: "x", "t", ev, retry_policy=fast).score == 1.0
    assert len(calls) == 2


FAST = RetryPolicy(initial_interval=0.01, jitter=False, retry_on=is_transient)


def test_a_node_retries_its_own_call_and_its_update_counts_the_failed_one() -> None:
    # Outside any graph (no task, no runtime): the retry happens inside the node's step,
    # so the failed call is counted in the update the node returns, and nowhere else.
    gen = flaky([HTTPError(503)])
    update = GeneratorNode(gen, retry_policy=FAST).invoke({"task": "t", "attempts": []})
    assert len(gen.calls) == 2
    assert update["pending"]["usage"]["calls"] == 2


def test_only_the_failed_candidate_call_is_sent_again() -> None:
    invocations: list[int] = []

    def gen(state: Any) -> str:
        invocations.append(1)
        if len(invocations) == 2:  # the second candidate's first try
            raise HTTPError(502)
        return f"draft {len(invocations)}"

    result = refine(gen, "t", scores(0.5), max_iterations=0, candidates=2, retry_policy=FAST)
    assert len(invocations) == 3  # the first candidate is not sampled again
    assert result.usage.calls == 3
    assert [c.response for c in result.attempts[0].candidates] == ["draft 1", "draft 3"]


def test_a_retry_under_a_time_limit_runs_in_a_worker_thread_and_is_counted() -> None:
    # With `max_seconds` a sync call runs in a thread of its own; its retry is counted by
    # the same step's meter, whatever thread it ran in.
    threads: list[int] = []
    gen = flaky([HTTPError(500)])

    def in_thread(state: Any) -> str:
        threads.append(threading.get_ident())
        return str(gen(state))

    result = refine(
        in_thread,
        "t",
        scores(0.5),
        max_iterations=1,
        patience=None,
        budget=Budget(max_seconds=60),
        retry_policy=FAST,
    )
    assert threading.get_ident() not in threads and len(threads) == 3
    assert result.usage.calls == 3  # round 0: the failed call and its retry; round 1


async def test_concurrent_loops_each_count_their_own_failed_calls() -> None:
    async def loop(failures: int) -> Any:
        sent: list[int] = []

        async def gen(state: Any) -> str:
            sent.append(1)
            await asyncio.sleep(0)  # let the other loop run between the calls
            if len(sent) <= failures:
                raise HTTPError(503)
            return "ok"

        policy = RetryPolicy(initial_interval=0.01, jitter=False, retry_on=is_transient)
        result = await arefine(gen, "t", scores(0.5), max_iterations=0, retry_policy=policy)
        return result.usage.calls, len(sent)

    counted = await asyncio.gather(loop(0), loop(1), loop(2))
    assert counted == [(1, 1), (2, 2), (3, 3)]


def test_a_failed_comparison_is_retried_in_its_step_and_counted() -> None:
    asked: list[int] = []

    def comparer(task: str, first: str, second: str) -> str:
        asked.append(1)
        if len(asked) == 1:
            raise HTTPError(429)
        return "first"

    result = refine(
        lambda s: f"draft {len(s['attempts'])}",
        "t",
        scores(0.5, 0.5),
        max_iterations=1,
        patience=None,
        select="pairwise",
        comparer=comparer,
        retry_policy=FAST,
    )
    comparisons = len(result.metadata["selection"]["comparisons"])
    assert len(asked) == 2 * comparisons + 1  # each pair in both orders, and the failure
    assert result.usage.calls == 2 + len(asked)  # two generations, every comparer call


def test_the_wait_before_a_retry_is_the_backoff_and_the_servers_retry_after() -> None:
    policy = RetryPolicy(initial_interval=0.5, backoff_factor=2.0, max_interval=3.0, jitter=False)
    error = HTTPError(503)
    assert [retry_wait(error, policy, tries) for tries in (1, 2, 3, 4)] == [0.5, 1.0, 2.0, 3.0]
    assert retry_wait(HTTPError(429, {"retry-after": "2"}), policy, 1) == 2.5
    assert retry_wait(HTTPError(429, {"retry-after": "30"}), policy, 1) == 3.5  # capped
    jittered = retry_wait(error, policy._replace(jitter=True), 1)
    assert 0.5 <= jittered <= 1.5


# -- the transient rule reads the whole chain ---------------------------------------------


def _raised(exc: BaseException) -> BaseException:
    """`exc` as raised (with a traceback), for rules that read where it was raised."""
    try:
        raise exc
    except BaseException as caught:
        return caught


class ReadError(Exception):
    """Named as httpcore's and httpx's transport error (no import needed)."""


class RemoteProtocolError(Exception):
    """Named as httpcore's: the server closed the connection mid-reply."""


class ServerDisconnectedError(Exception):
    """Named as aiohttp's: the server closed the connection."""


def test_a_transport_error_wrapped_by_a_client_is_transient() -> None:
    causes = (
        ReadError("read"),
        RemoteProtocolError("closed"),
        ServerDisconnectedError("gone"),
        ConnectionResetError("rst"),
    )
    for cause in causes:
        wrapper = RuntimeError("the client failed")
        wrapper.__cause__ = cause
        assert is_transient(wrapper), cause
        context = ValueError("while handling it")
        context.__context__ = cause
        assert is_transient(context), cause


def test_an_exception_group_holding_a_transport_error_is_transient() -> None:
    assert is_transient(ExceptionGroup("tasks", [ValueError("x"), ReadError("r")]))
    assert not is_transient(ExceptionGroup("tasks", [ValueError("x"), KeyError("k")]))


def test_the_outermost_status_decides() -> None:
    class BadRequest(Exception):
        status_code = 400

    wrapper = BadRequest("context too long")
    wrapper.__context__ = ConnectionResetError("an earlier, handled reset")
    assert not is_transient(wrapper)


def test_a_body_that_cannot_be_read_is_transient_and_a_user_error_is_not() -> None:
    import json

    try:
        json.loads('{"choices": [')
    except json.JSONDecodeError as exc:
        assert is_transient(exc)
    assert not is_transient(_raised(ValueError("the caller's own bug")))
    assert not is_transient(_raised(IndexError("the caller's own index")))


def test_a_chain_that_loops_is_read_once() -> None:
    first, second = RuntimeError("a"), RuntimeError("b")
    first.__context__, second.__context__ = second, first
    assert not is_transient(first)

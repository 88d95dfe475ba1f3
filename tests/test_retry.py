"""Retry policy: transient provider errors are retried with backoff, other 4xx fail at once."""

from __future__ import annotations

import time
from typing import Any

import pytest
from langgraph.types import RetryPolicy

from langgraph_refine import refine
from langgraph_refine._calls._retry import DEFAULT_RETRY_POLICY, is_transient, retry_after_seconds
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

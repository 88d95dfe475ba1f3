"""The budget's meter: every model call under a loop node counts, retries included, and
`max_seconds` is a hard ceiling; `Retry-After` is honoured only before a retry."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from langchain_openai import ChatOpenAI
from langgraph.types import RetryPolicy

from langgraph_refine import Budget, BudgetExhaustedError, Evaluation, arefine, refine
from langgraph_refine._calls._retry import is_transient
from tests import test_faults as faults
from tests.fakes import ScriptedChatModel
from tests.fault_server import FaultServer, error, hang, ok
from tests.test_faults import FAST, server

__all__ = ["server"]  # a fixture, used by name


def chat(server: FaultServer, **kwargs: Any) -> ChatOpenAI:
    return faults.chat(server, **{"timeout": 10.0, **kwargs})


def test_a_model_call_inside_a_user_evaluator_counts_and_is_refused_past_the_limit() -> None:
    grader = ScriptedChatModel(replies=["0.3", "0.4", "0.5", "0.6"])

    def evaluator(response: str, state: Any) -> float:
        grader.invoke(f"Grade: {response}")  # no config: inherits the node's, and its meter
        return 0.2

    result = refine(
        lambda state: "draft", "t", evaluator, budget=Budget(max_calls=3), patience=None
    )
    # generate (1) -> evaluator's call (2) -> generate (3) -> evaluator's call refused.
    assert len(grader.calls) == 1
    assert result.usage.calls == 3
    assert result.stop_reason == "budget_exhausted"
    assert [a.evaluation is not None for a in result.attempts] == [True, False]


def test_an_evaluator_call_past_the_limit_raises_with_exact_usage() -> None:
    grader = ScriptedChatModel(replies=["0.3", "0.4"])

    def evaluator(response: str, state: Any) -> float:
        grader.invoke("grade")
        return 0.2

    with pytest.raises(BudgetExhaustedError) as info:
        refine(
            lambda state: "draft",
            "t",
            evaluator,
            budget=Budget(max_calls=2),
            on_budget_exhausted="raise",
            patience=None,
        )
    assert info.value.result.usage.calls == 2
    assert len(grader.calls) == 1


def test_retried_calls_each_count_and_the_budget_refuses_the_next(server: FaultServer) -> None:
    server.script(error(500), error(500), error(500), ok())
    result = refine(
        chat(server), "t", lambda r, s: 0.1, budget=Budget(max_calls=2), retry_policy=FAST
    )
    # Two requests were sent (both failed); the third would exceed max_calls=2.
    assert len(server.received) == 2
    assert result.stop_reason == "budget_exhausted"
    assert result.usage.calls == 2
    assert result.attempts == []


def test_a_successful_retry_reports_every_call_sent(server: FaultServer) -> None:
    server.script(error(503), ok())
    result = refine(chat(server), "t", lambda r, s: 1.0, retry_policy=FAST)
    assert len(server.received) == 2
    assert result.usage.calls == 2  # the failed request counts too
    assert result.attempts[0].usage.calls == 2


def test_judge_calls_and_their_tokens_are_counted(server: FaultServer) -> None:
    result = refine(chat(server), "t", None, max_iterations=1, patience=None)
    assert result.usage.calls == 4 == len(server.received)
    assert result.usage.total_tokens == 4 * 15  # the fault server reports 15 per call


def test_max_seconds_cuts_off_a_hanging_call_and_keeps_the_best(server: FaultServer) -> None:
    server.script(ok(), hang(20.0))
    started = time.monotonic()
    result = refine(
        chat(server),
        "t",
        lambda r, s: Evaluation(score=0.3, feedback="more"),
        budget=Budget(max_seconds=1.5),
        patience=None,
    )
    elapsed = time.monotonic() - started
    assert elapsed < 6.0  # not the 10 s client timeout, nor the 20 s hang
    assert result.stop_reason == "budget_exhausted"
    assert result.value == "draft 1"
    assert result.score == 0.3
    assert result.usage.seconds >= 1.5


def test_max_seconds_cuts_off_a_hanging_call_async(server: FaultServer) -> None:
    server.script(ok(), hang(20.0))

    async def main() -> Any:
        return await arefine(
            chat(server), "t", lambda r, s: 0.3, budget=Budget(max_seconds=1.5), patience=None
        )

    started = time.monotonic()
    result = asyncio.run(main())
    assert time.monotonic() - started < 6.0
    assert (result.stop_reason, result.value) == ("budget_exhausted", "draft 1")


def test_no_retry_after_wait_without_a_retry(server: FaultServer) -> None:
    import openai

    server.script(error(429, {"retry-after": "4"}))
    started = time.monotonic()
    with pytest.raises(openai.RateLimitError):
        refine(chat(server), "t", lambda r, s: 1.0, retry_policy=None)
    assert time.monotonic() - started < 2.0


def test_retry_after_is_capped_by_the_policy_and_skipped_on_the_last_attempt(
    server: FaultServer,
) -> None:
    import openai

    policy = RetryPolicy(
        initial_interval=0.01, max_interval=0.3, max_attempts=2, jitter=False, retry_on=is_transient
    )
    server.script(error(429, {"retry-after": "4"}), error(429, {"retry-after": "4"}))
    started = time.monotonic()
    with pytest.raises(openai.RateLimitError):
        refine(chat(server), "t", lambda r, s: 1.0, retry_policy=policy)
    elapsed = time.monotonic() - started
    assert len(server.received) == 2
    assert elapsed < 2.0  # one capped wait (0.3 s), none after the last attempt
    gap = server.received[1].at - server.received[0].at
    assert gap >= 0.3


def test_usage_before_the_step_is_summed_when_a_limit_first_reads_it() -> None:
    from langgraph_refine import Usage
    from langgraph_refine._calls._budget import BudgetMeter

    sums: list[int] = []

    def spent() -> Usage:
        sums.append(1)
        return Usage(calls=2)

    meter = BudgetMeter(Budget(max_calls=3), spent)
    assert sums == []  # not summed at construction
    assert meter.total().calls == 2
    meter.check()  # 2 of 3 calls: not reached
    meter.calls += 1
    with pytest.raises(Exception, match="max_calls"):
        meter.check()
    assert meter.spent_before == Usage(calls=2) and sums == [1]  # summed once

"""Provider faults, over the real OpenAI client against a scripted server on loopback.

The model is a real `ChatOpenAI` (client retries off, so the loop's own retry policy is
what is tested) talking HTTP to `tests/fault_server.py`, which answers each request as
the test scripts it: 5xx, 429 with `retry-after`, 401 and other 4xx, a hang past the
client timeout, a malformed body. Transient faults are retried with backoff and the loop
completes (a malformed 200 body too); other 4xx fail at once, naming the status and the node;
with a checkpointer, a run that failed mid-loop resumes without redoing evaluated work.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import RetryPolicy

from langgraph_refine import Evaluation, create_refine_graph, refine
from langgraph_refine._calls._retry import DEFAULT_RETRY_POLICY, is_transient
from langgraph_refine.evaluators import llm_judge
from tests.fault_server import FaultServer, completion, error, hang, malformed, ok

TASK = "Write a haiku about retries."
# Fast backoff with the library's own classification: tests measure what the policy
# retries (and the server's Retry-After), not how long the default backoff sleeps.
FAST = RetryPolicy(
    initial_interval=0.01, backoff_factor=1.0, max_attempts=4, jitter=False, retry_on=is_transient
)


@pytest.fixture
def server() -> Iterator[FaultServer]:
    with FaultServer().serve() as running:
        yield running


def chat(server: FaultServer, **kwargs: Any) -> ChatOpenAI:
    options: dict[str, Any] = {"max_retries": 0, "timeout": 5.0, **kwargs}
    return ChatOpenAI(
        base_url=server.base_url,
        api_key="test-key",
        model="fault-model",
        **options,
    )


def perfect(response: str, state: Any) -> float:
    return 1.0


# -- transient faults are retried, and the loop completes ---------------------------------------


def test_500_then_200_completes_with_the_default_policy(server: FaultServer) -> None:
    server.script(error(500), ok())
    result = refine(chat(server), TASK, perfect)
    assert (result.value, result.stop_reason) == ("draft 2", "target_reached")
    assert len(server.received) == 2
    # Both requests carried the same prompt: the retry re-ran the same step.
    assert server.received[0].body == server.received[1].body


@pytest.mark.parametrize("status", [408, 409, 429, 500, 502, 503, 504])
def test_every_transient_status_is_retried(server: FaultServer, status: int) -> None:
    server.script(error(status), error(status), ok())
    result = refine(chat(server), TASK, perfect, retry_policy=FAST)
    assert result.value == "draft 3"
    assert len(server.received) == 3


def test_429_waits_for_retry_after(server: FaultServer) -> None:
    server.script(error(429, {"retry-after": "1"}), ok())
    result = refine(chat(server), TASK, perfect, retry_policy=FAST)
    assert result.value == "draft 2"
    first, second = server.received
    # The policy's own backoff is 0.01 s here: the wait is the server's Retry-After.
    assert second.at - first.at >= 1.0


def test_a_judge_call_is_retried_in_the_evaluate_node(server: FaultServer) -> None:
    server.script(ok(), error(503), ok())
    judge = llm_judge(chat(server))
    result = refine(chat(server), TASK, judge, max_iterations=0, retry_policy=FAST)
    assert [r.is_judge for r in server.received] == [False, True, True]
    assert result.attempts[0].evaluation is not None
    assert result.attempts[0].evaluation.feedback == "Add a concrete example."
    assert result.usage.calls == 3  # every request sent counts, the failed one too


def test_a_hang_past_the_client_timeout_is_retried(server: FaultServer) -> None:
    server.script(hang(5.0), ok())
    started = time.monotonic()
    result = refine(chat(server, timeout=0.5), TASK, perfect, retry_policy=FAST)
    assert result.value == "draft 2"
    assert len(server.received) == 2
    assert time.monotonic() - started < 4.0  # the hang was cut at the timeout


def test_hangs_fail_after_bounded_attempts(server: FaultServer) -> None:
    server.script(*[hang(5.0)] * 3)
    policy = RetryPolicy(initial_interval=0.01, max_attempts=3, jitter=False, retry_on=is_transient)
    started = time.monotonic()
    with pytest.raises(openai.APITimeoutError, match=r"node 'generate'"):
        refine(chat(server, timeout=0.5), TASK, perfect, retry_policy=policy)
    assert len(server.received) == 3
    assert time.monotonic() - started < 4.0


def test_an_unreachable_server_is_retried_then_fails() -> None:
    with FaultServer().serve() as gone:
        url = gone.base_url  # a port that nobody listens on once the block ends
    model = ChatOpenAI(base_url=url, api_key="k", model="m", max_retries=0)
    policy = RetryPolicy(initial_interval=0.01, max_attempts=2, jitter=False, retry_on=is_transient)
    with pytest.raises(openai.APIConnectionError, match=r"generator failed on attempt 0"):
        refine(model, TASK, perfect, retry_policy=policy)


# -- other faults fail at once --------------------------------------------------------------------


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_other_4xx_fail_at_once_naming_status_and_node(server: FaultServer, status: int) -> None:
    server.script(error(status))
    with pytest.raises(openai.APIStatusError) as info:
        refine(chat(server), TASK, perfect)  # the default policy
    assert str(info.value).startswith(f"Error code: {status}")  # the provider's own message
    assert f"generator failed on attempt 0 in node 'generate' (HTTP {status})" in (
        info.value.__notes__
    )
    assert len(server.received) == 1


def test_401_from_the_judge_names_the_evaluate_node(server: FaultServer) -> None:
    server.script(ok(), error(401))
    with pytest.raises(openai.AuthenticationError) as info:
        refine(chat(server), TASK, llm_judge(chat(server)))
    assert "evaluator failed on attempt 0 in node 'evaluate' (HTTP 401)" in info.value.__notes__
    assert [r.is_judge for r in server.received] == [False, True]


MALFORMED = pytest.mark.parametrize(
    ("body", "content_type"),
    [
        (b"<html>Bad gateway</html>", "text/html"),
        (b"not json", "application/json"),
        (b'{"id": "x", "object": "chat.completion", "created": 0}', "application/json"),
        (
            b'{"id": "x", "choices": [], "created": 0, "object": "chat.completion"}',
            "application/json",
        ),
        (b'{"id": "x", "object": "chat.comp', "application/json"),  # truncated
    ],
    ids=["html", "not-json", "no-choices", "empty-choices", "truncated"],
)


@MALFORMED
def test_a_malformed_body_is_retried_like_a_dropped_connection(
    server: FaultServer, body: bytes, content_type: str
) -> None:
    # A 200 reply that cannot be read is transient: the next reply is usually whole.
    server.script(malformed(body, content_type))
    result = refine(chat(server), TASK, perfect, retry_policy=FAST)
    assert result.value == "draft 2"
    assert len(server.received) == 2


@MALFORMED
def test_malformed_bodies_fail_after_the_policy_s_tries_naming_the_node(
    server: FaultServer, body: bytes, content_type: str
) -> None:
    server.script(*[malformed(body, content_type)] * 4)
    with pytest.raises(Exception, match=r"generator failed on attempt 0 in node 'generate'"):
        refine(chat(server), TASK, perfect, retry_policy=FAST)
    assert len(server.received) == 4  # the policy's max_attempts, no more


def test_a_reply_with_a_lone_surrogate_is_kept_with_a_replacement_character(
    server: FaultServer,
) -> None:
    # Valid JSON ("\\ud800") that no UTF-8 writer takes: the reply is kept, not dropped.
    body = completion("x", "fault-model").replace(b'"x"', b'"a\\ud800b"')
    server.script(malformed(body))
    result = refine(chat(server), TASK, perfect)
    assert result.value == "a\ufffdb"
    assert len(server.received) == 1


def test_the_openai_exceptions_are_classified() -> None:
    """The real exception types, as the openai client raises them, against the policy."""
    import httpx2

    request = httpx2.Request("POST", "http://127.0.0.1/v1/chat/completions")

    def status(cls: type[openai.APIStatusError], code: int) -> openai.APIStatusError:
        return cls("x", response=httpx2.Response(code, request=request), body=None)

    assert is_transient(openai.APITimeoutError(request=request))
    assert is_transient(openai.APIConnectionError(request=request))
    assert is_transient(status(openai.InternalServerError, 500))
    assert is_transient(status(openai.RateLimitError, 429))
    assert is_transient(status(openai.ConflictError, 409))
    assert not is_transient(status(openai.AuthenticationError, 401))
    assert not is_transient(status(openai.BadRequestError, 400))
    # A 200 reply the client could not validate is a malformed body: retried.
    assert is_transient(
        openai.APIResponseValidationError(httpx2.Response(200, request=request), None)
    )
    assert DEFAULT_RETRY_POLICY.retry_on is is_transient


# -- with a checkpointer, no evaluated attempt is lost ------------------------------------------


def judged(server: FaultServer) -> Any:
    return create_refine_graph(
        chat(server),
        llm_judge(chat(server)),
        max_iterations=2,
        patience=None,
        strategy="chain",  # round 2 shows both earlier attempts (memory of the chain)
        retry_policy=RetryPolicy(
            initial_interval=0.01, max_attempts=2, jitter=False, retry_on=is_transient
        ),
    )


def test_a_failed_round_resumes_without_redoing_evaluated_attempts(
    server: FaultServer, tmp_path: Path
) -> None:
    # Rounds 0 and 1 succeed (generate + judge each); round 2's generation fails twice,
    # which exhausts the retry policy.
    server.script(ok(), ok(), ok(), ok(), error(503), error(503))
    config: Any = {"configurable": {"thread_id": "faults"}}
    with SqliteSaver.from_conn_string(str(tmp_path / "runs.sqlite")) as saver:
        graph = judged(server).compile(checkpointer=saver)
        with pytest.raises(openai.InternalServerError, match=r"attempt 2 in node 'generate'"):
            graph.invoke({"task": TASK}, config)
        before = graph.get_state(config)
        assert before.next == ("generate",)
        kept = before.values["attempts"]
        assert [a.response for a in kept] == ["draft 1", "draft 3"]
        assert all(a.evaluation is not None for a in kept)
        sent_before = len(server.received)
        assert sent_before == 6

        # The provider has recovered (the script is used up): resume the same thread.
        final = graph.invoke(None, config)
        attempts = graph.get_state(config).values["attempts"]

    resumed = server.received[sent_before:]
    assert [r.is_judge for r in resumed] == [False, True]  # round 2 only
    # Round 2's prompt shows the two kept attempts with their feedback.
    assert "draft 1" in resumed[0].prompt and "draft 3" in resumed[0].prompt
    assert attempts[:2] == kept
    assert [a.response for a in attempts] == ["draft 1", "draft 3", "draft 7"]
    assert final["response"] == "draft 1"  # equal scores: the earliest attempt is best


def test_a_judge_failure_keeps_the_generated_attempt(server: FaultServer, tmp_path: Path) -> None:
    # Round 1's judge call is refused (401, not retried); the attempt it was judging was
    # generated and checkpointed, so resuming judges it without generating it again.
    server.script(ok(), ok(), ok(), error(401))
    config: Any = {"configurable": {"thread_id": "judge-fault"}}
    with SqliteSaver.from_conn_string(str(tmp_path / "runs.sqlite")) as saver:
        graph = judged(server).compile(checkpointer=saver)
        with pytest.raises(openai.AuthenticationError, match=r"node 'evaluate' \(HTTP 401\)"):
            graph.invoke({"task": TASK}, config)
        assert graph.get_state(config).next == ("evaluate",)
        sent_before = len(server.received)
        graph.invoke(None, config)
        attempts = graph.get_state(config).values["attempts"]

    resumed = server.received[sent_before:]
    assert resumed[0].is_judge  # the resumed run starts by judging attempt 1 again
    assert "draft 3" in resumed[0].prompt
    assert [a.response for a in attempts][:2] == ["draft 1", "draft 3"]
    assert sum(not r.is_judge for r in server.received) == len(attempts)  # no regeneration
    assert all(isinstance(a.evaluation, Evaluation) for a in attempts)

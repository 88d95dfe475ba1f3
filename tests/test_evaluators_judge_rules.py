"""The LLM judge's second-round rules: contradicting replies, bare scores, the reply
template, context-length errors, and budget stops passing through untouched."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from langchain_openai import ChatOpenAI

from langgraph_refine import refine
from langgraph_refine._calls._budget import BudgetStop
from langgraph_refine._decisions._prompts import (
    JUDGE_CONTRADICTION_NOTE,
    JUDGE_INSTRUCTIONS,
    JUDGE_UNREADABLE_NOTE,
)
from langgraph_refine.evaluators import llm_judge
from langgraph_refine.evaluators._judge import contradiction, read_reply
from tests.fakes import ScriptedChatModel, judge_reply
from tests.fault_server import FaultServer, Reply

STATE = {"task": "Write one sentence about owls."}


# -- a verdict that contradicts its score -------------------------------------------------------


@pytest.mark.parametrize(
    ("verdict", "score", "conflicts"),
    [
        ("PASS", 0.0, True),
        ("PASS", 0.49, True),
        ("PASS", 0.5, False),
        ("FAIL", 0.51, True),
        ("FAIL", 0.9, True),
        ("FAIL", 0.5, False),
        ("NEEDS_IMPROVEMENT", 0.0, False),
        ("NEEDS_IMPROVEMENT", 1.0, False),
        (None, 0.0, False),
    ],
)
def test_contradiction_rule(verdict: Any, score: float, conflicts: bool) -> None:
    assert (contradiction(verdict, score) is not None) is conflicts


def test_a_contradicting_reply_is_asked_once_more_and_a_consistent_one_is_kept() -> None:
    model = ScriptedChatModel(
        replies=[judge_reply(0.0, "PASS", "copied"), judge_reply(0.8, "PASS", "good")]
    )
    result = llm_judge(model).evaluate("Owls hoot at night.", STATE)
    assert (result.verdict, result.score, result.feedback) == ("PASS", 0.8, "good")
    assert len(model.calls) == 2
    assert result.details["judge_calls"] == 2
    assert "contradiction" not in result.details
    retry = str(model.calls[1][1].content)
    assert retry.endswith(
        JUDGE_CONTRADICTION_NOTE.format(
            conflict="verdict PASS with score 0.00 (PASS needs a score of at least 0.5)"
        )
    )
    assert "contradicts itself" in result.details["judge_errors"][0]


def test_a_reply_that_still_contradicts_loses_its_verdict_and_keeps_its_score() -> None:
    model = ScriptedChatModel(replies=[judge_reply(9, "FAIL", "weak"), judge_reply(7, "fail")])
    result = llm_judge(model).evaluate("Owls hoot.", STATE)
    assert len(model.calls) == 2
    assert result.verdict is None
    assert result.score == pytest.approx(0.7)  # the latest reply's score stands
    assert result.feedback == "fix it"
    note = result.details["contradiction"]
    assert "FAIL with score 0.70" in note
    assert "verdict was dropped" in note and "score kept" in note


async def test_the_async_path_applies_the_same_rule() -> None:
    model = ScriptedChatModel(replies=[judge_reply(0.1, "PASS")])
    result = await llm_judge(model).aevaluate("Owls hoot.", STATE)
    assert (result.verdict, result.score) == (None, 0.1)
    assert "PASS with score 0.10" in result.details["contradiction"]
    assert len(model.calls) == 2


def test_a_contradiction_then_an_unreadable_reply_keeps_the_first_score() -> None:
    model = ScriptedChatModel(replies=[judge_reply(0.2, "PASS", "thin"), "no idea"])
    result = llm_judge(model).evaluate("Owls hoot.", STATE)
    assert len(model.calls) == 2
    assert (result.verdict, result.score, result.feedback) == (None, 0.2, "thin")
    assert "no consistent reply when asked again" in result.details["contradiction"]


def test_an_unreadable_reply_then_a_contradiction_makes_no_third_call() -> None:
    model = ScriptedChatModel(replies=["no idea", judge_reply(0.9, "FAIL")])
    result = llm_judge(model).evaluate("Owls hoot.", STATE)
    assert len(model.calls) == 2
    assert (result.verdict, result.score) == (None, 0.9)
    assert "FAIL with score 0.90" in result.details["contradiction"]


def test_the_retry_after_a_contradiction_counts_as_a_model_call() -> None:
    generator = ScriptedChatModel(replies=["Owls hoot."])
    judge = ScriptedChatModel(replies=[judge_reply(0.0, "PASS"), judge_reply(0.95, "PASS")])
    result = refine(generator, "Write about owls.", llm_judge(judge), max_iterations=0)
    assert result.stop_reason == "passed"
    assert len(judge.calls) == 2
    # The loop's usage sees every judge call through LangChain's callbacks.
    assert result.usage.calls == 3


# -- a reply that is only a score ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "score", "scale"),
    [
        ("7", 0.7, "0-10"),
        ("  7.\n", 0.7, "0-10"),
        ("0.85", 0.85, "0-1"),
        ("0.85.", 0.85, "0-1"),
        ("1", 1.0, "0-1"),
        ("8.5/10", 0.85, "explicit"),
        ("**8/10**", 0.8, "explicit"),
        ("3 out of 5", 0.6, "explicit"),
        ("85%", 0.85, "explicit"),
        ("85 %.", 0.85, "explicit"),
        ("85", 0.85, "0-100"),
        ("9.5", 0.95, "0-10"),
    ],
)
def test_a_bare_score_is_read_on_its_scale(text: str, score: float, scale: str) -> None:
    model = ScriptedChatModel(structured=False, replies=[text])
    result = llm_judge(model).evaluate("Owls hoot.", STATE)
    assert result.score == pytest.approx(score)
    assert result.details["scale"] == scale
    assert result.verdict is None
    assert result.feedback == "The judge gave only a score, no feedback."
    assert "score only" in result.details["note"]
    assert len(model.calls) == 1


def test_a_bare_score_also_counts_when_the_structured_parse_fails() -> None:
    model = ScriptedChatModel(replies=["6/10"])  # not JSON: the schema parse fails
    result = llm_judge(model).evaluate("Owls hoot.", STATE)
    assert (result.score, result.details["parsed_from"]) == (0.6, "text")


@pytest.mark.parametrize("text", ["7 apples", "seven", "7, 8", "score 7 or 8", "-", "."])
def test_text_with_more_than_a_score_is_not_a_bare_score(text: str) -> None:
    reading, _ = read_reply(text)
    assert reading is None or reading.raw_score != 7


def test_a_reply_that_repeats_a_numeric_response_is_no_score() -> None:
    reading, error = read_reply("4", "4")
    assert reading is None
    assert error


# -- the reply template -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        JUDGE_INSTRUCTIONS,
        JUDGE_UNREADABLE_NOTE.format(reason="found no verdict or score in the reply"),
        JUDGE_CONTRADICTION_NOTE.format(conflict=contradiction("PASS", 0.0)),
    ],
)
def test_the_reply_format_is_described_without_example_values(text: str) -> None:
    # No JSON example and no placeholder value a small model could copy back.
    assert "{" not in text and "}" not in text
    assert "..." not in text
    assert not re.search(r'"(feedback|verdict|score)"\s*:', text)
    reading, _ = read_reply(text)
    assert reading is None
    assert "feedback" in text and "verdict" in text and "score" in text


def test_the_instructions_say_how_verdict_and_score_agree() -> None:
    assert "at least 0.5 for PASS" in JUDGE_INSTRUCTIONS
    assert "at most 0.5 for FAIL" in JUDGE_INSTRUCTIONS


# -- a response too long for the judge's context ----------------------------------------------


def context_error(message: str) -> openai.BadRequestError:
    request = httpx.Request("POST", "http://127.0.0.1/v1/chat/completions")
    body = {"message": message, "type": "invalid_request_error", "code": "context_length_exceeded"}
    return openai.BadRequestError(message, response=httpx.Response(400, request=request), body=body)


def test_a_context_length_error_makes_that_attempt_fail_and_asks_for_less() -> None:
    model = ScriptedChatModel(replies=[context_error("This model's maximum context length...")])
    result = llm_judge(model).evaluate("word " * 5000, STATE)
    assert (result.verdict, result.score) == ("FAIL", 0.0)
    assert "shorter response" in result.feedback
    assert "BadRequestError" in result.details["context_length_error"]
    assert "max_eval_chars" in result.details["note"]
    assert len(model.calls) == 1  # no retry: the same prompt would overflow again


async def test_a_context_length_error_on_the_async_path() -> None:
    model = ScriptedChatModel(replies=[context_error("maximum context length is 2048 tokens")])
    result = await llm_judge(model).aevaluate("long", STATE)
    assert (result.verdict, result.score) == ("FAIL", 0.0)


def test_other_bad_requests_still_propagate() -> None:
    request = httpx.Request("POST", "http://127.0.0.1/v1/chat/completions")
    error = openai.BadRequestError(
        "unknown parameter", response=httpx.Response(400, request=request), body=None
    )
    with pytest.raises(openai.BadRequestError, match="unknown parameter"):
        llm_judge(ScriptedChatModel(replies=[error])).evaluate("x", STATE)


@pytest.fixture
def server() -> Iterator[FaultServer]:
    with FaultServer().serve() as running:
        yield running


def llama_cpp_overflow() -> Reply:
    """The 400 llama.cpp's server sends when a request does not fit the slot's context."""
    body = {
        "error": {
            "code": 400,
            "message": "the request exceeds the available context size, try increasing it",
            "type": "exceed_context_size_error",
            "n_prompt_tokens": 2300,
            "n_ctx": 2048,
        }
    }
    return Reply(status=400, body=json.dumps(body).encode())


def test_over_http_the_loop_goes_on_after_the_judge_overflows(server: FaultServer) -> None:
    def chat() -> ChatOpenAI:
        return ChatOpenAI(
            base_url=server.base_url, api_key="k", model="m", max_retries=0, timeout=5.0
        )

    # generation, judge (overflow), refinement, judge (the server's default reply)
    server.script(Reply(), llama_cpp_overflow())
    result = refine(chat(), "Write a haiku.", llm_judge(chat()), max_iterations=1)
    assert len(server.received) == 4
    first = result.attempts[0].evaluation
    assert first is not None
    assert (first.verdict, first.score) == ("FAIL", 0.0)
    assert "exceeds the available context size" in first.details["context_length_error"]
    # The refinement round saw the request for a shorter response.
    assert server.received[2].is_judge is False
    assert "shorter response" in server.received[2].prompt
    assert result.stop_reason == "max_iterations"
    assert result.score_history == [0.0, 0.4]


# -- budget stops pass through ------------------------------------------------------------------


@pytest.mark.parametrize("structured", [True, False])
def test_a_budget_stop_raised_by_the_model_call_propagates_untouched(structured: bool) -> None:
    stop = BudgetStop("max_calls=2 reached (2 calls made)")
    model = ScriptedChatModel(structured=structured, replies=[stop])
    with pytest.raises(BudgetStop) as raised:
        llm_judge(model).evaluate("x", STATE)
    assert raised.value is stop
    assert len(model.calls) == 1

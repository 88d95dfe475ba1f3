"""`combine`: weighted mean, labelled feedback, per-part details, verdicts, bad weights."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest

from langgraph_refine import Evaluation
from langgraph_refine.evaluators import (
    CombinedEvaluator,
    combine,
    contains_all,
    llm_judge,
    word_count,
)
from tests.fakes import ScriptedChatModel, judge_reply

STATE = {"task": "t"}


def fixed(score: float, feedback: str = "", verdict: Any = None, name: str = "part") -> Any:
    def evaluate(response: str, state: Any) -> Evaluation:
        return Evaluation(score=score, feedback=feedback, verdict=verdict)

    evaluate.__name__ = name
    return evaluate


def test_equal_weights_by_default() -> None:
    result = combine(fixed(1.0), fixed(0.5), fixed(0.0)).evaluate("r", STATE)
    assert result.score == pytest.approx(0.5)


def test_weighted_mean() -> None:
    ev = combine(fixed(1.0), fixed(0.0), weights=[3, 1])
    assert ev.evaluate("r", STATE).score == pytest.approx(0.75)
    ev = combine(fixed(0.2), fixed(0.8), weights=[0.0, 2.0])
    assert ev.evaluate("r", STATE).score == pytest.approx(0.8)


def test_feedback_is_labelled_per_part() -> None:
    ev = combine(word_count(3, 5), contains_all(["owl", "lamp"]))
    result = ev.evaluate("an owl", STATE)
    lines = result.feedback.splitlines()
    assert lines[0] == (
        "[word_count] score 0.67: The response has 2 words, but it must have 3-5 words: "
        "add at least 1 word."
    )
    assert lines[1].startswith('[contains_all] score 0.50: Missing 1 of 2 required words: "lamp"')


def test_part_without_feedback_says_so() -> None:
    result = combine(fixed(1.0, name="quiet")).evaluate("r", STATE)
    assert result.feedback == "[quiet] score 1.00: no issues"


def test_per_part_scores_in_details() -> None:
    ev = combine(word_count(1, 2), contains_all(["x1"]), weights=[2, 1])
    result = ev.evaluate("x1", STATE)
    assert result.details["scores"] == {"word_count": 1.0, "contains_all": 1.0}
    parts = result.details["parts"]
    assert [p["name"] for p in parts] == ["word_count", "contains_all"]
    assert [p["weight"] for p in parts] == [2.0, 1.0]
    assert parts[0]["details"] == {"words": 1, "min_words": 1, "max_words": 2}


def test_repeated_names_get_numbered_labels() -> None:
    ev = combine(word_count(1, 2), word_count(5, 9))
    result = ev.evaluate("one", STATE)
    assert list(result.details["scores"]) == ["word_count", "word_count#2"]
    assert "[word_count#2] score 0.20" in result.feedback


@pytest.mark.parametrize(
    ("verdicts", "scores", "expected"),
    [
        ((None, None), (0.5, 0.5), None),
        (("FAIL", "PASS"), (0.1, 1.0), "FAIL"),
        (("PASS", "PASS"), (0.9, 0.8), "PASS"),
        (("PASS", None), (0.9, 1.0), "PASS"),  # a deterministic part at 1.0 passes
        (("PASS", None), (0.9, 0.7), "NEEDS_IMPROVEMENT"),
        (("NEEDS_IMPROVEMENT", None), (0.5, 1.0), "NEEDS_IMPROVEMENT"),
    ],
)
def test_combined_verdict(
    verdicts: tuple[Any, Any], scores: tuple[float, float], expected: Any
) -> None:
    parts = [fixed(s, verdict=v) for s, v in zip(scores, verdicts, strict=True)]
    assert combine(*parts).evaluate("r", STATE).verdict == expected


def test_model_calling_parts_make_the_combination_call_models() -> None:
    judge = llm_judge(ScriptedChatModel())
    assert combine(judge, word_count(1, 2)).calls_model is True
    assert combine(word_count(1, 2)).calls_model is False


def test_parts_may_be_chat_models_and_callables() -> None:
    model = ScriptedChatModel(replies=[judge_reply(0.4, feedback="more owls")])
    ev = combine(model, lambda r, s: 1.0)
    result = ev.evaluate("r", STATE)
    assert result.score == pytest.approx(0.7)
    assert "[llm_judge] score 0.40: more owls" in result.feedback
    assert "[<lambda>] score 1.00" in result.feedback


async def test_async_parts_run_concurrently() -> None:
    running: list[int] = []
    peak: list[int] = []

    async def slow(response: str, state: Any) -> float:
        running.append(1)
        peak.append(len(running))
        await asyncio.sleep(0.05)
        running.pop()
        return 0.5

    result = await combine(slow, slow, slow).aevaluate("r", STATE)
    assert result.score == 0.5
    assert max(peak) == 3


def test_returns_a_combined_evaluator() -> None:
    assert isinstance(combine(fixed(1.0)), CombinedEvaluator)


@pytest.mark.parametrize(
    ("weights", "message"),
    [
        ([1], "got 2 evaluators but 1 weights"),
        ([1, 2, 3], "got 2 evaluators but 3 weights"),
        ([1, -1], "must be finite non-negative numbers, not all zero"),
        ([0, 0], "not all zero"),
        ([1, math.nan], "finite"),
        ([1, math.inf], "finite"),
        ([True, 1], "finite non-negative numbers"),
        (["1", 1], "finite non-negative numbers"),
    ],
)
def test_bad_weights(weights: list[Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        combine(fixed(1.0), fixed(0.0), weights=weights)


def test_needs_an_evaluator() -> None:
    with pytest.raises(ValueError, match="at least one evaluator"):
        combine()


def test_parts_must_be_evaluators() -> None:
    with pytest.raises(ValueError, match=r"combine\(\) part 2 must be callable"):
        combine(fixed(1.0), 42)

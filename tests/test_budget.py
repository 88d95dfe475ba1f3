"""Budget: checked before every model call; stop or raise with the best result so far."""

from __future__ import annotations

from typing import Any

import pytest

from langgraph_refine import Budget, BudgetExhaustedError, Usage, create_refine_graph, refine
from tests.fakes import ScriptedChatModel, judge_reply, scores


def test_max_calls_counts_generator_calls_with_callable_evaluator() -> None:
    calls: list[int] = []

    def gen(state: Any) -> str:
        calls.append(1)
        return "x"

    result = refine(gen, "t", scores(0.1, 0.2, 0.3, 0.4), budget=Budget(max_calls=2), patience=None)
    assert len(calls) == 2
    assert result.stop_reason == "budget_exhausted"
    assert result.usage.calls == 2
    assert len(result.attempts) == 2
    assert all(a.evaluation is not None for a in result.attempts)


def test_judge_calls_count_two_per_round() -> None:
    model = ScriptedChatModel(replies=["answer", judge_reply(0.2), "answer 2", judge_reply(0.3)])
    result = refine(model, "t", None, budget=Budget(max_calls=4), patience=None, max_iterations=9)
    assert len(model.calls) == 4
    assert result.usage.calls == 4
    assert result.stop_reason == "budget_exhausted"
    assert len(result.attempts) == 2


def test_no_answer_is_paid_for_that_the_budget_cannot_judge() -> None:
    model = ScriptedChatModel(replies=["answer", judge_reply(0.2), "answer 2", judge_reply(0.3)])
    result = refine(model, "t", None, budget=Budget(max_calls=3), patience=None, max_iterations=9)
    # generate, judge; a second answer would leave no call for its judgment: not asked.
    assert len(model.calls) == 2
    assert result.stop_reason == "budget_exhausted"
    assert [a.evaluation is not None for a in result.attempts] == [True]
    assert result.value == "answer"
    assert result.score_history == [0.2]
    # With a judge that calls no model, the last call is spent on an answer.
    result = refine(
        ScriptedChatModel(replies=["a", "b"]),
        "t",
        scores(0.2, 0.3),
        budget=Budget(max_calls=3),
        patience=None,
        max_iterations=9,
    )
    assert len(result.attempts) == 3


def test_max_tokens_from_usage_metadata() -> None:
    model = ScriptedChatModel(replies=["x"], input_tokens=40, output_tokens=10)  # 50 per call
    result = refine(model, "t", scores(0.1), budget=Budget(max_tokens=120), patience=None)
    # 50, 100 (< 120, so a third call is allowed), 150 -> stop
    assert len(model.calls) == 3
    assert result.usage.total_tokens == 150
    assert result.stop_reason == "budget_exhausted"


def test_zero_budget_makes_no_call() -> None:
    model = ScriptedChatModel(replies=["x"])
    result = refine(model, "t", scores(1.0), budget=Budget(max_calls=0))
    assert model.calls == []
    assert result.stop_reason == "budget_exhausted"
    assert result.value == "" and result.score is None


def test_max_seconds_counts_time_spent_generating() -> None:
    import time

    def slow(state: Any) -> str:
        time.sleep(0.05)
        return "x"

    result = refine(
        slow, "t", scores(0.1), budget=Budget(max_seconds=0.12), patience=None, max_iterations=50
    )
    assert 1 <= len(result.attempts) <= 4
    assert result.stop_reason == "budget_exhausted"


def test_raise_mode_carries_best_result() -> None:
    with pytest.raises(BudgetExhaustedError) as info:
        refine(
            lambda s: f"d{len(s['attempts'])}",
            "t",
            scores(0.4, 0.7, 0.1),
            budget=Budget(max_calls=3),
            on_budget_exhausted="raise",
            patience=None,
        )
    result = info.value.result
    assert result.value == "d1"
    assert result.score == 0.7
    assert result.stop_reason == "budget_exhausted"
    assert len(result.attempts) == 3


def test_budget_limits_that_are_not_reached_do_not_stop() -> None:
    result = refine(
        lambda s: "x", "t", scores(0.1, 0.95), budget=Budget(max_calls=10, max_tokens=10**6)
    )
    assert result.stop_reason == "target_reached"


@pytest.mark.parametrize("field", ["max_calls", "max_tokens", "max_seconds"])
def test_negative_budget_is_rejected(field: str) -> None:
    with pytest.raises(ValueError, match=field):
        Budget(**{field: -1})


def test_budget_exceeded_names_the_limit() -> None:
    assert "max_calls=2" in (Budget(max_calls=2).exceeded(Usage(calls=2)) or "")
    assert Budget(max_calls=2).exceeded(Usage(calls=1)) is None


def test_on_budget_exhausted_must_be_known() -> None:
    with pytest.raises(ValueError, match="on_budget_exhausted"):
        create_refine_graph(lambda s: "x", scores(1.0), on_budget_exhausted="explode")  # type: ignore[arg-type]

"""Budget validation, `from_state` on unfinished states, option errors and recursion limits."""

from __future__ import annotations

import uuid
from typing import Any, get_args

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.errors import GraphRecursionError

from langgraph_refine import (
    Attempt,
    Budget,
    Evaluation,
    RefineResult,
    arefine,
    create_refine_graph,
    refine,
)
from langgraph_refine._decisions._memory import MemoryMode
from langgraph_refine._decisions._options import HumanReview, OnBudgetExhausted
from langgraph_refine._state import PromptForm, Strategy
from tests.fakes import ScriptedChatModel, scores

# -- Budget ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("max_calls", True),
        ("max_calls", False),
        ("max_tokens", False),
        ("max_tokens", True),
        ("max_seconds", True),
        ("max_seconds", float("nan")),
        ("max_calls", -1),
        ("max_tokens", -100),
        ("max_seconds", -0.5),
        ("max_calls", 2.5),
        ("max_tokens", 1e3),
        ("max_calls", "3"),
        ("max_seconds", "10"),
        ("max_tokens", [100]),
    ],
)
def test_budget_rejects_invalid_limits_naming_the_field(field: str, value: Any) -> None:
    with pytest.raises(ValueError) as caught:
        Budget(**{field: value})
    assert f"Budget.{field}" in str(caught.value)
    assert repr(value) in str(caught.value)


@pytest.mark.parametrize(
    "limits",
    [
        {},
        {"max_calls": 0},
        {"max_calls": 6, "max_tokens": 20_000},
        {"max_seconds": 0},
        {"max_seconds": 2},
        {"max_seconds": 1.5},
    ],
)
def test_budget_accepts_valid_limits(limits: dict[str, Any]) -> None:
    budget = Budget(**limits)
    for field, value in limits.items():
        assert getattr(budget, field) == value


def test_budget_coerce() -> None:
    assert Budget.coerce({"max_calls": 3, "max_seconds": 2.0}) == Budget(
        max_calls=3, max_seconds=2.0
    )
    assert Budget.coerce({}) == Budget()
    assert Budget.coerce(None) is None
    budget = Budget(max_tokens=10)
    assert Budget.coerce(budget) is budget


@pytest.mark.parametrize(
    ("value", "named"),
    [
        ({"max_calls": True}, "max_calls"),
        ({"max_seconds": float("nan")}, "max_seconds"),
        ({"calls": 3}, "calls"),
        ("max_calls=3", "str"),
        (3, "int"),
    ],
)
def test_budget_coerce_rejects_bad_values(value: Any, named: str) -> None:
    with pytest.raises(ValueError, match=named):
        Budget.coerce(value)


def test_create_refine_graph_rejects_a_budget_of_another_type() -> None:
    with pytest.raises(ValueError, match="budget"):
        create_refine_graph(ScriptedChatModel(), scores(0.1), budget={"max_calls": 3})  # type: ignore[arg-type]


# -- RefineResult.from_state on a state that has not stopped -------------------------------


def evaluated(index: int, score: float, response: str | None = None) -> Attempt:
    return Attempt(
        index=index, response=response or f"r{index}", evaluation=Evaluation(score=score)
    )


def test_from_state_without_a_stop_reason_has_none() -> None:
    result = RefineResult.from_state(
        {"task": "t", "attempts": [evaluated(0, 0.4), evaluated(1, 0.7)]}
    )
    assert result.stop_reason is None
    assert result.converged is False
    assert result.metadata["stop_reason"] is None
    assert result.metadata["converged"] is False
    assert result.value == "r1"
    assert result.score == 0.7
    assert result.iterations == 1


def test_from_state_with_an_empty_stop_reason_has_none() -> None:
    result = RefineResult.from_state(
        {"task": "t", "attempts": [evaluated(0, 0.4)], "stop_reason": ""}
    )
    assert result.stop_reason is None
    assert result.converged is False


def test_from_state_with_nothing_evaluated() -> None:
    result = RefineResult.from_state({"task": "t", "attempts": []})
    assert result.stop_reason is None
    assert result.value == ""
    assert result.score is None
    assert result.converged is False


def paused_review(mode: str) -> Any:
    graph = create_refine_graph(
        ScriptedChatModel(replies=["r0", "r1"]),
        scores(0.3, 0.5),
        human_review=mode,  # type: ignore[arg-type]
        max_iterations=1,
        patience=None,
    ).compile(checkpointer=InMemorySaver())
    cfg: dict[str, Any] = {"configurable": {"thread_id": str(uuid.uuid4())}}
    graph.invoke({"task": "t"}, cfg)
    snapshot = graph.get_state(cfg)
    assert snapshot.next == ("review",)
    return snapshot  # a snapshot says the thread is paused; its values alone cannot


def test_from_state_of_a_paused_every_round_review_has_no_stop_reason() -> None:
    result = RefineResult.from_state(paused_review("every_round"))
    assert result.stop_reason is None
    assert result.converged is False
    assert result.value == "r0"


def test_from_state_of_a_paused_final_review_has_no_stop_reason() -> None:
    # The loop has not stopped: the reviewer may still ask for another round.
    result = RefineResult.from_state(paused_review("final"))
    assert [a.response for a in result.attempts] == ["r0", "r1"]
    assert result.value == "r1"
    assert result.stop_reason is None
    assert result.converged is False


# -- allowed values in errors come from the Literal types -----------------------------------


@pytest.mark.parametrize(
    ("option", "literal"),
    [
        ("strategy", Strategy),
        ("memory", MemoryMode),
        ("human_review", HumanReview),
        ("on_budget_exhausted", OnBudgetExhausted),
        ("prompt_form", PromptForm),
    ],
)
def test_option_errors_list_the_literal_values(option: str, literal: Any) -> None:
    with pytest.raises(ValueError) as caught:
        create_refine_graph(ScriptedChatModel(), scores(0.1), **{option: "bogus"})
    message = str(caught.value)
    assert option in message
    assert "'bogus'" in message
    allowed = get_args(literal)
    assert allowed
    for value in allowed:
        assert repr(value) in message


def test_strategy_error_lists_the_three_strategies() -> None:
    with pytest.raises(ValueError, match="strategy") as caught:
        create_refine_graph(ScriptedChatModel(), scores(0.1), strategy="bogus")  # type: ignore[arg-type]
    for value in ("'chain'", "'explore'", "'sample'"):
        assert value in str(caught.value)


@pytest.mark.parametrize(
    ("option", "value"),
    [("max_attempt_chars", 0), ("max_attempt_chars", True), ("candidates", 0), ("name", "")],
)
def test_bounded_options_fail_naming_the_option(option: str, value: Any) -> None:
    with pytest.raises(ValueError, match=option):
        create_refine_graph(ScriptedChatModel(), scores(0.1), **{option: value})


# -- long loops and the recursion limit -------------------------------------------------------


def counting_generator() -> Any:
    calls: list[int] = []

    def generate(state: Any) -> str:
        calls.append(1)
        return f"r{len(calls) - 1}"

    generate.calls = calls  # type: ignore[attr-defined]
    return generate


def test_twelve_iterations_run_thirteen_generations() -> None:
    generate = counting_generator()
    result = refine(generate, "t", scores(0.1), max_iterations=12, patience=None)
    assert len(generate.calls) == 13
    assert len(result.attempts) == 13
    assert result.stop_reason == "max_iterations"


async def test_twelve_iterations_run_thirteen_generations_async() -> None:
    generate = counting_generator()
    result = await arefine(generate, "t", scores(0.1), max_iterations=12, patience=None)
    assert len(generate.calls) == 13
    assert result.stop_reason == "max_iterations"


def test_twelve_iterations_with_a_final_review() -> None:
    generate = counting_generator()
    reviews: list[dict[str, Any]] = []

    def approve(payload: dict[str, Any]) -> dict[str, Any]:
        reviews.append(payload)
        return {"action": "approve"}

    result = refine(
        generate,
        "t",
        scores(0.1),
        max_iterations=12,
        patience=None,
        human_review="final",
        reviewer=approve,
    )
    assert len(generate.calls) == 13
    assert len(reviews) == 1
    assert result.stop_reason == "approved"


def test_twelve_iterations_with_every_round_review() -> None:
    generate = counting_generator()
    result = refine(
        generate,
        "t",
        scores(0.1),
        max_iterations=12,
        patience=None,
        human_review="every_round",
        reviewer=lambda payload: {"action": "continue"},
    )
    assert len(generate.calls) == 13
    assert result.stop_reason == "max_iterations"


def test_an_explicit_recursion_limit_wins() -> None:
    # 13 rounds are 28 graph steps (prepare, 13 x generate + evaluate, finalize).
    generate = counting_generator()
    result = refine(
        generate,
        "t",
        scores(0.1),
        max_iterations=12,
        patience=None,
        config={"recursion_limit": 30},
    )
    assert len(generate.calls) == 13
    assert result.stop_reason == "max_iterations"
    # A limit too small for the loop is the caller's choice: it is not raised for them.
    generate = counting_generator()
    with pytest.raises(GraphRecursionError):
        refine(
            generate,
            "t",
            scores(0.1),
            max_iterations=12,
            patience=None,
            config={"recursion_limit": 10},
        )
    assert len(generate.calls) < 13


# -- the result's summary -------------------------------------------------------------------


def test_result_repr_is_one_short_line() -> None:
    long_text = "The Turing test asks whether a machine can pass for a human. " * 10
    texts = iter(["short draft", long_text])
    result = refine(
        lambda state: next(texts), "Explain.", scores(0.4, 0.8), max_iterations=1, patience=None
    )
    shown = repr(result)
    assert str(result) == shown and "\n" not in shown
    assert shown.startswith("RefineResult(value='The Turing test asks whether a machine")
    assert f"({len(long_text)} chars)" in shown
    assert "score=0.8" in shown and "verdict=None" in shown
    assert "stop_reason='max_iterations'" in shown and "iterations=1" in shown
    assert "best_index=1" in shown and "usage='2 calls, 0 tokens" in shown
    assert "Attempt(" not in shown and len(shown) < 300


def test_best_index_is_a_field_and_metadata_holds_the_contract_keys() -> None:
    texts = iter(["a", "b", "c"])
    result = refine(
        lambda state: next(texts),
        "t",
        scores(0.4, 0.9, 0.5),
        target_score=1.0,
        patience=None,
        max_iterations=2,
    )
    assert result.best_index == 1 and result.value == "b"
    assert result.metadata == {
        "iterations": 2,
        "converged": False,
        "score_history": [0.4, 0.9, 0.5],
        "stop_reason": "max_iterations",
    }

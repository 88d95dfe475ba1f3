"""Per-run options through the graph's `context_schema`; validated options; results."""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from langgraph_refine import (
    Attempt,
    Budget,
    Evaluation,
    RefineContext,
    RefineResult,
    create_refine_graph,
    refine,
)
from tests.fakes import ScriptedChatModel, scores


def graph_and_model(**options: Any) -> tuple[Any, ScriptedChatModel]:
    model = ScriptedChatModel(replies=[f"draft {i}" for i in range(9)])
    graph = create_refine_graph(
        model, scores(0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7), patience=None, **options
    ).compile()
    return graph, model


def test_the_graph_declares_its_context_schema() -> None:
    builder = create_refine_graph(lambda s: "x", lambda r, s: 1.0)
    assert builder.context_schema is RefineContext


def test_max_iterations_per_run() -> None:
    graph, model = graph_and_model(max_iterations=6)
    state = graph.invoke({"task": "t"}, context={"max_iterations": 1})
    assert len(model.calls) == 2
    assert state["response"] == "draft 1"


def test_target_budget_and_strategy_per_run() -> None:
    graph, model = graph_and_model(max_iterations=6)
    graph.invoke({"task": "t"}, context={"target_score": 0.3})
    assert len(model.calls) == 3
    graph, model = graph_and_model(max_iterations=6)
    out = graph.invoke({"task": "t"}, context={"budget": {"max_calls": 2}}, output_keys=["usage"])
    assert len(model.calls) == 2 and out["usage"].calls == 2
    graph, model = graph_and_model(max_iterations=2, strategy="chain")
    graph.invoke({"task": "t"}, context={"strategy": "sample"})
    assert all(len(call) == 1 and call[0].content == "t" for call in model.calls)


@pytest.mark.parametrize(
    ("context", "message"),
    [
        ({"max_iterations": -1}, "max_iterations"),
        ({"strategy": "greedy"}, "strategy must be one of 'chain', 'explore', 'sample'"),
        ({"budget": {"max_calls": True}}, "Budget.max_calls"),
        ({"budget": {"calls": 3}}, "unknown field"),
        ({"temperature": 0.3}, "unknown run context key"),
        ({"target_score": 2}, "target_score"),
    ],
)
def test_an_invalid_run_option_fails_before_any_model_call(
    context: dict[str, Any], message: str
) -> None:
    graph, model = graph_and_model()
    with pytest.raises(ValueError, match=message):
        graph.invoke({"task": "t"}, context=context)
    assert model.calls == []


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("max_calls", True),
        ("max_tokens", False),
        ("max_seconds", float("nan")),
        ("max_calls", -1),
        ("max_seconds", "10"),
        ("max_calls", 2.5),
    ],
)
def test_budget_rejects_booleans_nan_negative_and_non_numbers(field: str, value: Any) -> None:
    with pytest.raises(ValueError, match=f"Budget.{field} must be"):
        Budget(**{field: value})


def test_budget_from_a_dict() -> None:
    assert Budget.coerce({"max_calls": 3}) == Budget(max_calls=3)
    assert Budget.coerce(None) is None


def test_a_state_that_has_not_stopped_has_no_stop_reason() -> None:
    attempt = Attempt(index=0, response="r", evaluation=Evaluation(score=0.4))
    result = RefineResult.from_state({"task": "t", "attempts": [attempt]})
    assert result.stop_reason is None and result.converged is False
    # A paused review is not stopped either.
    graph = create_refine_graph(
        lambda s: "draft", scores(0.3), human_review="final", max_iterations=0
    ).compile(checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "p"}}
    graph.invoke({"task": "t"}, config)
    paused = RefineResult.from_state(graph.get_state(config).values)
    assert paused.stop_reason == "max_iterations"  # the rule that sent it to review
    assert RefineResult.from_state({"task": "t", "attempts": []}).stop_reason is None


@pytest.mark.parametrize(
    ("option", "value", "listed"),
    [
        ("strategy", "bogus", "'chain', 'explore', 'sample'"),
        ("prompt_form", "chat", "'messages', 'single'"),
        ("human_review", "always", "None, 'final', 'every_round'"),
        ("on_budget_exhausted", "panic", "'stop', 'raise'"),
        ("memory", "most", "'all', 'last', 'best_and_last'"),
    ],
)
def test_allowed_values_come_from_the_literals(option: str, value: str, listed: str) -> None:
    with pytest.raises(ValueError, match=listed):
        create_refine_graph(lambda s: "x", lambda r, s: 1.0, **{option: value})


def test_many_iterations_never_hit_the_recursion_limit() -> None:
    result = refine(lambda s: "x", "t", scores(0.1), max_iterations=40, patience=None)
    assert len(result.attempts) == 41
    reviewed = refine(
        lambda s: "x",
        "t",
        scores(0.1),
        max_iterations=30,
        patience=None,
        human_review="final",
        reviewer=lambda payload: {"action": "approve"},
    )
    assert (len(reviewed.attempts), reviewed.stop_reason) == (31, "approved")


def test_an_explicit_recursion_limit_wins() -> None:
    from langgraph.errors import GraphRecursionError

    with pytest.raises(GraphRecursionError):
        refine(
            lambda s: "x",
            "t",
            scores(0.1),
            max_iterations=40,
            patience=None,
            config={"recursion_limit": 10},
        )

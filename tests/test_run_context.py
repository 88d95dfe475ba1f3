"""Per-run options: `graph.invoke(input, context={...})` through the graph's `context_schema`.

Each key overrides the built option for that run only; an invalid value fails with
`ValueError` before any model call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from langgraph_refine import Budget, RefineContext, create_refine_graph
from langgraph_refine._result import RESULT_KEYS
from tests.fakes import ScriptedChatModel, scores

TASK = "Write a limerick."


def loop(evaluator: Any = None, **options: Any) -> tuple[Any, ScriptedChatModel]:
    """A compiled loop with a recording model; by default never satisfied, no plateau."""
    model = ScriptedChatModel(replies=[f"r{i}" for i in range(10)])
    options.setdefault("max_iterations", 4)
    options.setdefault("patience", None)
    graph = create_refine_graph(model, evaluator or scores(0.1), **options).compile()
    return graph, model


def run(graph: Any, **kwargs: Any) -> dict[str, Any]:
    """Invoke the loop and return its full state (the loop's own keys included)."""
    out: dict[str, Any] = graph.invoke({"task": TASK}, output_keys=RESULT_KEYS, **kwargs)
    return out


def test_the_context_schema_is_refine_context() -> None:
    builder = create_refine_graph(ScriptedChatModel(), scores(0.1))
    assert builder.context_schema is RefineContext
    assert builder.compile().builder.context_schema is RefineContext
    assert set(RefineContext.__annotations__) == {
        "target_score",
        "max_iterations",
        "patience",
        "min_delta",
        "budget",
        "strategy",
        "evaluator",
        "judge_model",
        "max_tokens",
        "record_key",
        "output_schema",
        "select",
        "select_top",
        "select_margin",
        "confirm_pass",
        "require_calibration",
        "criteria",
        "on_evaluator_error",
        "edits",
        "models",
    }


def test_max_iterations_per_run() -> None:
    graph, model = loop()
    out = run(graph, context={"max_iterations": 1})
    assert len(out["attempts"]) == 2
    assert len(model.calls) == 2
    assert out["stop_reason"] == "max_iterations"


def test_the_context_applies_to_its_run_only() -> None:
    graph, model = loop()
    run(graph, context={"max_iterations": 0})
    assert len(model.calls) == 1
    out = run(graph)
    assert len(out["attempts"]) == 5  # the built max_iterations=4
    assert len(model.calls) == 6


def test_target_score_per_run() -> None:
    graph, _ = loop(scores(0.3, 0.6, 0.7), target_score=0.9)
    out = run(graph, context={"target_score": 0.5})
    assert out["stop_reason"] == "target_reached"
    assert len(out["attempts"]) == 2
    assert out["response"] == "r1"


def test_patience_and_min_delta_per_run() -> None:
    graph, _ = loop(scores(0.3, 0.35, 0.4, 0.45, 0.5))
    out = run(graph, context={"patience": 1, "min_delta": 0.1})
    # r1 raised the best by 0.05, not more than min_delta: one stalled round is enough.
    assert out["stop_reason"] == "plateau"
    assert len(out["attempts"]) == 2


def test_budget_per_run() -> None:
    graph, model = loop()
    out = run(graph, context={"budget": {"max_calls": 2}})
    assert out["stop_reason"] == "budget_exhausted"
    assert len(model.calls) == 2
    assert out["usage"].calls == 2


def test_a_run_can_lift_the_built_budget() -> None:
    limited, limited_model = loop(budget=Budget(max_calls=1), max_iterations=2)
    assert run(limited)["stop_reason"] == "budget_exhausted"
    out = run(limited, context={"budget": None})
    assert out["stop_reason"] == "max_iterations"
    assert len(limited_model.calls) == 1 + 3


def test_strategy_per_run() -> None:
    graph, model = loop(strategy="chain", max_iterations=2)
    assert [a.parent for a in run(graph)["attempts"]] == [None, 0, 1]
    out = run(graph, context={"strategy": "sample"})
    assert [a.parent for a in out["attempts"]] == [None, None, None]
    assert [len(call) for call in model.calls[3:]] == [1, 1, 1]
    assert all(call[0].text == TASK for call in model.calls[3:])


def test_a_context_object_with_attributes() -> None:
    @dataclass
    class Settings:
        max_iterations: int = 0

    graph, model = loop()
    out = run(graph, context=Settings())
    assert len(out["attempts"]) == 1
    assert len(model.calls) == 1


@pytest.mark.parametrize(
    ("context", "named"),
    [
        ({"max_iterations": -1}, "max_iterations"),
        ({"max_iterations": 1.5}, "max_iterations"),
        ({"target_score": 2.0}, "target_score"),
        ({"patience": -1}, "patience"),
        ({"min_delta": -0.1}, "min_delta"),
        ({"strategy": "x"}, "strategy"),
        ({"budget": {"max_calls": True}}, "max_calls"),
        ({"budget": {"max_calls": -3}}, "max_calls"),
        ({"budget": {"max_call": 3}}, "max_call"),
        ({"budget": "3 calls"}, "budget"),
        ({"max_iteration": 2}, "max_iteration"),
        ({"memory": "all"}, "memory"),
    ],
)
def test_an_invalid_context_fails_before_any_model_call(
    context: dict[str, Any], named: str
) -> None:
    graph, model = loop()
    with pytest.raises(ValueError, match=named):
        graph.invoke({"task": TASK}, context=context)
    assert model.calls == []


async def test_an_invalid_context_fails_before_any_model_call_async() -> None:
    graph, model = loop()
    with pytest.raises(ValueError, match="strategy"):
        await graph.ainvoke({"task": TASK}, context={"strategy": "beam"})
    assert model.calls == []


async def test_context_per_run_async() -> None:
    graph, model = loop()
    out = await graph.ainvoke(
        {"task": TASK}, context={"max_iterations": 1}, output_keys=RESULT_KEYS
    )
    assert len(out["attempts"]) == 2
    assert len(model.calls) == 2

"""Errors in user code name the attempt; with a checkpointer the loop resumes the failed step."""

from __future__ import annotations

import math
from typing import Any

import pytest

from langgraph_refine import Evaluation, create_refine_graph, refine
from tests.fakes import scores


@pytest.mark.parametrize("bad", [1.5, -0.1, math.nan, math.inf])
def test_score_out_of_range_names_the_value(bad: float) -> None:
    with pytest.raises(ValueError, match=f"score {bad!r}") as info:
        refine(lambda s: "x", "t", lambda r, s: bad)
    assert "evaluator failed on attempt 0 in node 'evaluate'" in info.value.__notes__


def test_evaluation_out_of_range_is_rejected_at_construction() -> None:
    with pytest.raises(ValueError, match="got 13"):
        Evaluation(score=13)


def test_evaluator_returning_wrong_type() -> None:
    with pytest.raises(TypeError, match="return a float in \\[0, 1\\] or an Evaluation"):
        refine(lambda s: "x", "t", lambda r, s: "great")


def test_generator_returning_wrong_type() -> None:
    with pytest.raises(TypeError, match="return a string or an AIMessage"):
        refine(lambda s: 42, "t", scores(1.0))


def test_generator_exception_names_the_attempt() -> None:
    def gen(state: Any) -> str:
        if len(state["attempts"]) == 2:
            raise RuntimeError("model fell over")
        return "x"

    with pytest.raises(RuntimeError) as info:
        refine(gen, "t", scores(0.1), patience=None)
    # The error keeps its own message; where it happened is added as a note.
    assert str(info.value) == "model fell over"
    assert "generator failed on attempt 2 in node 'generate'" in info.value.__notes__


def test_evaluator_exception_names_the_attempt() -> None:
    def ev(response: str, state: Any) -> float:
        if len(state["attempts"]) == 1:
            raise KeyError("missing")
        return 0.1

    with pytest.raises(KeyError, match="evaluator failed on attempt 1"):
        refine(lambda s: "x", "t", ev, patience=None)


def test_failure_resumes_from_the_failed_step_without_losing_evaluated_attempts(
    checkpointer: Any, thread: Any
) -> None:
    generated: list[int] = []
    evaluated: list[str] = []
    fail = {"evaluate": True}

    def gen(state: Any) -> str:
        generated.append(len(state["attempts"]))
        return f"draft {len(state['attempts'])}"

    def ev(response: str, state: Any) -> float:
        if response == "draft 2" and fail["evaluate"]:
            raise ConnectionAbortedError("judge down")  # not a transient-error type: no retry
        evaluated.append(response)
        return {"draft 0": 0.2, "draft 1": 0.4, "draft 2": 0.95}[response]

    graph = create_refine_graph(gen, ev, retry_policy=None).compile(checkpointer=checkpointer)
    with pytest.raises(ConnectionAbortedError, match="attempt 2"):
        graph.invoke({"task": "t"}, thread, durability="sync")
    state = graph.get_state(thread)
    assert state.next == ("evaluate",)
    assert [a.index for a in state.values["attempts"]] == [0, 1]
    assert state.values["pending"].response == "draft 2"

    fail["evaluate"] = False
    out = graph.invoke(None, thread, durability="sync")
    assert out["response"] == "draft 2"
    assert generated == [0, 1, 2]  # the pending attempt was not generated again
    assert evaluated == ["draft 0", "draft 1", "draft 2"]
    final = graph.get_state(thread).values
    assert [a.index for a in final["attempts"]] == [0, 1, 2]
    assert final["stop_reason"] == "target_reached"

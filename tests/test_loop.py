"""Loop semantics from the contract: attempts, stop rules in order, best result, events."""

from __future__ import annotations

from typing import Any

import pytest

from langgraph_refine import Evaluation, RefineResult, create_refine_graph, refine
from tests.fakes import ScriptedChatModel, scores


def counter_generator() -> Any:
    calls: list[int] = []

    def generate(state: Any) -> str:
        calls.append(len(state["attempts"]))
        return f"draft {len(state['attempts'])}"

    generate.calls = calls  # type: ignore[attr-defined]
    return generate


def test_first_generation_is_attempt_zero_and_every_attempt_is_evaluated() -> None:
    gen = counter_generator()
    ev = scores(0.1, 0.2, 0.3)
    result = refine(gen, "task", ev, max_iterations=2, patience=None)
    assert [a.index for a in result.attempts] == [0, 1, 2]
    assert all(a.evaluation is not None for a in result.attempts)
    assert ev.calls == ["draft 0", "draft 1", "draft 2"]  # the last attempt too
    assert result.stop_reason == "max_iterations"
    assert result.iterations == 2


def test_at_most_one_plus_max_iterations_generations() -> None:
    gen = counter_generator()
    result = refine(
        gen, "task", scores(0.1, 0.2, 0.3, 0.4, 0.5, 0.6), max_iterations=4, patience=None
    )
    assert len(gen.calls) == 5
    assert result.iterations == 4


def test_max_iterations_zero_generates_once() -> None:
    gen = counter_generator()
    result = refine(gen, "task", scores(0.1), max_iterations=0)
    assert len(gen.calls) == 1
    assert result.stop_reason == "max_iterations"
    assert result.iterations == 0


def test_pass_verdict_stops_first_even_below_target() -> None:
    ev = lambda r, s: Evaluation(score=0.2, verdict="PASS")  # noqa: E731
    result = refine(counter_generator(), "task", ev, target_score=0.9)
    assert result.stop_reason == "passed"
    assert result.converged
    assert len(result.attempts) == 1


def test_target_reached() -> None:
    result = refine(counter_generator(), "task", scores(0.5, 0.9), target_score=0.9)
    assert result.stop_reason == "target_reached"
    assert result.value == "draft 1"
    assert result.score == 0.9
    assert result.converged


def test_passed_is_checked_before_target_reached() -> None:
    ev = lambda r, s: Evaluation(score=1.0, verdict="PASS")  # noqa: E731
    assert refine(counter_generator(), "t", ev).stop_reason == "passed"


def test_target_reached_checked_before_max_iterations() -> None:
    result = refine(counter_generator(), "t", scores(0.1, 0.95), max_iterations=1)
    assert result.stop_reason == "target_reached"


def test_max_iterations_checked_before_plateau() -> None:
    # Round 1 stalls (patience=1 would fire) but it is also the last allowed generation.
    result = refine(counter_generator(), "t", scores(0.5, 0.5), max_iterations=1, patience=1)
    assert result.stop_reason == "max_iterations"


def test_plateau_after_patience_non_improving_rounds() -> None:
    result = refine(counter_generator(), "t", scores(0.5, 0.4, 0.5), max_iterations=10, patience=2)
    assert result.stop_reason == "plateau"
    assert len(result.attempts) == 3
    assert not result.converged


def test_plateau_counter_resets_on_improvement() -> None:
    result = refine(
        counter_generator(), "t", scores(0.1, 0.1, 0.3, 0.3, 0.3), max_iterations=10, patience=2
    )
    assert result.score_history == [0.1, 0.1, 0.3, 0.3, 0.3]
    assert result.stop_reason == "plateau"


def test_min_delta_requires_improvement_larger_than_delta() -> None:
    result = refine(
        counter_generator(),
        "t",
        scores(0.5, 0.55, 0.58),
        max_iterations=10,
        patience=2,
        min_delta=0.1,
    )
    assert result.stop_reason == "plateau"
    assert len(result.attempts) == 3


def test_patience_none_disables_plateau() -> None:
    result = refine(counter_generator(), "t", scores(0.5), max_iterations=6, patience=None)
    assert result.stop_reason == "max_iterations"
    assert len(result.attempts) == 7


def test_best_result_is_kept_after_regression() -> None:
    result = refine(
        counter_generator(), "t", scores(0.3, 0.8, 0.4), max_iterations=2, patience=None
    )
    assert result.value == "draft 1"
    assert result.score == 0.8
    assert result.best_index == 1


def test_ties_go_to_the_earlier_attempt() -> None:
    result = refine(
        counter_generator(), "t", scores(0.6, 0.6, 0.6), max_iterations=2, patience=None
    )
    assert result.value == "draft 0"


def test_pass_outranks_higher_score() -> None:
    evaluations = iter(
        [Evaluation(score=0.95, verdict="NEEDS_IMPROVEMENT"), Evaluation(score=0.4, verdict="PASS")]
    )
    result = refine(counter_generator(), "t", lambda r, s: next(evaluations), target_score=1.0)
    assert result.stop_reason == "passed"
    assert result.value == "draft 1"
    assert result.verdict == "PASS"


def test_result_fields_and_metadata() -> None:
    result = refine(counter_generator(), "t", scores(0.2, 0.4, 0.9))
    assert isinstance(result, RefineResult)
    assert result.score_history == [0.2, 0.4, 0.9]
    assert result.iterations == len(result.attempts) - 1 == 2
    assert result.metadata["iterations"] == 2
    assert result.metadata["converged"] is True
    assert result.metadata["score_history"] == [0.2, 0.4, 0.9]
    assert result.metadata["stop_reason"] == "target_reached"
    assert result.usage.calls == 3  # callable evaluator calls no model


def test_float_score_becomes_evaluation() -> None:
    result = refine(counter_generator(), "t", lambda r, s: 0.95)
    evaluation = result.attempts[0].evaluation
    assert evaluation == Evaluation(score=0.95)


def test_graph_is_uncompiled_state_graph_with_named_nodes() -> None:
    from langgraph.graph import StateGraph

    builder = create_refine_graph(counter_generator(), scores(1.0))
    assert isinstance(builder, StateGraph)
    assert {"prepare", "generate", "evaluate", "finalize"} <= set(builder.nodes)
    assert "review" not in builder.nodes
    assert (
        "review"
        in create_refine_graph(counter_generator(), scores(1.0), human_review="final").nodes
    )


def test_graph_output_is_the_best_response() -> None:
    graph = create_refine_graph(
        counter_generator(), scores(0.3, 0.7, 0.1), max_iterations=2
    ).compile()
    out = graph.invoke({"task": "t"})
    assert out["response"] == "draft 1"


def test_custom_stream_events() -> None:
    graph = create_refine_graph(
        counter_generator(), scores(0.3, 0.7), target_score=0.7, name="essay"
    ).compile()
    events = [e for e in graph.stream({"task": "t"}, stream_mode="custom")]
    rounds = [e for e in events if e["type"] == "round"]
    stops = [e for e in events if e["type"] == "stop"]
    assert [r["iteration"] for r in rounds] == [0, 1]
    assert [r["score"] for r in rounds] == [0.3, 0.7]
    assert [r["best_score"] for r in rounds] == [0.3, 0.7]
    for r in rounds:
        assert {"verdict", "feedback"} <= set(r)
        assert r["name"] == "essay"
    assert len(stops) == 1 and stops[0]["stop_reason"] == "target_reached"
    assert events[-1] is stops[0]


def test_feedback_and_earlier_attempts_reach_the_chat_model_generator() -> None:
    model = ScriptedChatModel(replies=["first answer", "second answer", "third answer"])
    feedback = iter(["too short: add an example", "needs a conclusion"])
    ev = lambda r, s: Evaluation(score=0.3, feedback=next(feedback, "more"))  # noqa: E731
    refine(model, "Explain recursion.", ev, max_iterations=2, patience=None, strategy="chain")
    assert model.prompts[0] == "Explain recursion."
    second = model.prompts[1]
    assert "Explain recursion." in second
    assert "first answer" in second and "too short: add an example" in second
    third = model.prompts[2]
    assert "second answer" in third and "needs a conclusion" in third


def test_usage_counts_tokens_from_chat_model() -> None:
    model = ScriptedChatModel(replies=["a"], input_tokens=7, output_tokens=3)
    result = refine(model, "t", scores(0.1, 0.2), max_iterations=1, patience=None)
    assert result.usage.calls == 2
    assert result.usage.input_tokens == 14
    assert result.usage.output_tokens == 6
    assert result.usage.total_tokens == 20


def test_refine_called_many_times_in_one_process() -> None:
    model = ScriptedChatModel(replies=["x"])
    results = [refine(model, f"task {i}", scores(1.0)) for i in range(5)]
    assert all(r.stop_reason == "target_reached" for r in results)
    assert len(model.calls) == 5


@pytest.mark.parametrize("task", ["", "   ", "\n\t"])
def test_empty_task_raises_before_any_model_call(task: str) -> None:
    model = ScriptedChatModel(replies=["x"])
    with pytest.raises(ValueError, match="task"):
        refine(model, task, scores(1.0))
    assert model.calls == []


def test_empty_task_through_the_graph_raises_before_any_model_call() -> None:
    model = ScriptedChatModel(replies=["x"])
    graph = create_refine_graph(model, scores(1.0)).compile()
    with pytest.raises(ValueError, match="non-empty"):
        graph.invoke({"task": "  "})
    assert model.calls == []


def test_thread_reuse_starts_a_fresh_loop() -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    graph = create_refine_graph(counter_generator(), scores(0.95)).compile(
        checkpointer=InMemorySaver()
    )
    cfg = {"configurable": {"thread_id": "t1"}}
    graph.invoke({"task": "first"}, cfg)
    graph.invoke({"task": "second"}, cfg)
    state = graph.get_state(cfg).values
    assert state["task"] == "second"
    assert [a.index for a in state["attempts"]] == [0]
    assert state["usage"].calls == 1

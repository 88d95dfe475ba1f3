"""Human review: the interrupt payload, every resume action, malformed answers, no repeated calls.

Interrupt tests go in three steps: invoke until the loop pauses, inspect the paused state
(`get_state(cfg).next`, the `__interrupt__` payload), resume with `Command(resume=...)`.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from langgraph_refine import (
    Budget,
    Evaluation,
    RefineResult,
    ReviewInputError,
    arefine,
    create_refine_graph,
    refine,
)
from tests.fakes import ScriptedChatModel, judge_reply

PAYLOAD_KEYS = {"task", "response", "score", "feedback", "iteration", "stop_reason"}


class Scores:
    """A callable evaluator: a fixed score and feedback per response text; records calls."""

    def __init__(self, table: dict[str, float]) -> None:
        self.table = table
        self.calls: list[str] = []

    def __call__(self, response: str, state: Any) -> Evaluation:
        self.calls.append(response)
        return Evaluation(score=self.table[response], feedback=f"feedback on {response}")


def thread() -> dict[str, Any]:
    return {"configurable": {"thread_id": str(uuid.uuid4())}}


def paused(graph: Any, cfg: dict[str, Any]) -> dict[str, Any]:
    """Check the loop is paused in `review` with exactly one interrupt; return its payload."""
    snapshot = graph.get_state(cfg)
    assert snapshot.next == ("review",)
    assert len(snapshot.interrupts) == 1
    payload: dict[str, Any] = snapshot.interrupts[0].value
    return payload


def final_review_graph(
    replies: list[str], table: dict[str, float], checkpointer: Any = None, **options: Any
) -> tuple[Any, ScriptedChatModel, Scores]:
    model = ScriptedChatModel(replies=replies)
    evaluator = Scores(table)
    options.setdefault("human_review", "final")
    graph = create_refine_graph(model, evaluator, **options).compile(
        checkpointer=checkpointer if checkpointer is not None else InMemorySaver()
    )
    return graph, model, evaluator


# Three attempts; the middle one is the best, so "best" and "latest" differ.
REPLIES = ["draft A", "draft B", "draft C", "draft D", "draft E"]
TABLE = {"draft A": 0.3, "draft B": 0.6, "draft C": 0.4, "draft D": 0.8, "draft E": 0.5}
# Reviewers' edits are evaluated like any attempt.
TABLE |= {"my own haiku": 0.5, "final": 0.7, "fixed": 0.9, "edited by a human": 0.8}


def start_final_review(checkpointer: Any = None) -> tuple[Any, ScriptedChatModel, Scores, Any]:
    graph, model, evaluator = final_review_graph(
        REPLIES, TABLE, checkpointer, max_iterations=2, patience=None
    )
    cfg = thread()
    out = graph.invoke({"task": "Write a haiku."}, cfg)
    assert "__interrupt__" in out
    return graph, model, evaluator, cfg


# -- the payload ---------------------------------------------------------------------------


def test_final_review_pauses_when_the_loop_would_stop_with_the_best_attempt() -> None:
    graph, model, evaluator, cfg = start_final_review()
    payload = paused(graph, cfg)
    assert payload.keys() >= PAYLOAD_KEYS
    assert payload["task"] == "Write a haiku."
    assert payload["response"] == "draft B"  # the best, not the latest ("draft C")
    assert payload["score"] == 0.6
    assert payload["feedback"] == "feedback on draft B"
    assert payload["iteration"] == 2
    assert payload["stop_reason"] == "max_iterations"
    assert "error" not in payload
    # Nothing is finished yet: no response written, every attempt evaluated once.
    assert "response" not in graph.get_state(cfg).values
    assert evaluator.calls == ["draft A", "draft B", "draft C"]
    assert len(model.calls) == 3


def test_interrupt_value_in_the_output_equals_the_pending_one() -> None:
    graph, _model, _evaluator = final_review_graph(REPLIES, TABLE, max_iterations=0)
    cfg = thread()
    out = graph.invoke({"task": "t"}, cfg)
    [interrupt] = out["__interrupt__"]
    assert interrupt.value == paused(graph, cfg)
    assert interrupt.value["response"] == "draft A"
    assert interrupt.value["iteration"] == 0


def test_final_review_happens_once_per_stop_not_every_round() -> None:
    graph, _model, evaluator = final_review_graph(
        REPLIES, TABLE, max_iterations=4, patience=None, target_score=0.75
    )
    cfg = thread()
    graph.invoke({"task": "t"}, cfg)
    payload = paused(graph, cfg)
    # Rounds 0-2 ran without a pause; round 3 reached the target.
    assert evaluator.calls == ["draft A", "draft B", "draft C", "draft D"]
    assert payload["stop_reason"] == "target_reached"
    assert payload["response"] == "draft D"


# -- the actions -----------------------------------------------------------------------------


def test_approve_stops_with_the_reviewed_response() -> None:
    graph, model, evaluator, cfg = start_final_review()
    out = graph.invoke(Command(resume={"action": "approve"}), cfg)
    assert out["response"] == "draft B"
    assert "__interrupt__" not in out
    snapshot = graph.get_state(cfg)
    assert snapshot.next == ()
    result = RefineResult.from_state(snapshot.values)
    assert result.stop_reason == "approved"
    assert result.value == "draft B"
    assert result.converged
    assert len(model.calls) == 3 and len(evaluator.calls) == 3


def test_edit_stops_with_the_edited_text() -> None:
    graph, model, evaluator, cfg = start_final_review()
    out = graph.invoke(Command(resume={"action": "edit", "response": "my own haiku"}), cfg)
    assert out["response"] == "my own haiku"
    result = RefineResult.from_state(graph.get_state(cfg).values)
    assert result.stop_reason == "edited"
    assert result.value == "my own haiku"
    assert not result.converged
    # The edit is an attempt of its own, evaluated: the result's score is the edit's,
    # not the reviewed attempt's (draft B, 0.6).
    assert len(model.calls) == 3 and evaluator.calls[-1] == "my own haiku"
    edit = result.attempts[-1]
    assert (edit.index, edit.move, edit.parent, edit.response) == (3, "edit", 1, "my own haiku")
    assert (result.score, result.feedback) == (0.5, "feedback on my own haiku")
    assert result.score_history == [0.3, 0.6, 0.4, 0.5]
    assert graph.get_state(cfg).next == ()  # no second review


def test_reject_stops_with_the_best_attempt() -> None:
    graph, model, _evaluator, cfg = start_final_review()
    out = graph.invoke(Command(resume={"action": "reject"}), cfg)
    assert out["response"] == "draft B"  # the best, not the latest "draft C"
    result = RefineResult.from_state(graph.get_state(cfg).values)
    assert result.stop_reason == "rejected"
    assert result.value == "draft B"
    assert not result.converged
    assert len(model.calls) == 3


def test_revise_runs_exactly_one_more_round_past_max_iterations_with_the_feedback() -> None:
    graph, model, evaluator, cfg = start_final_review()
    assert paused(graph, cfg)["stop_reason"] == "max_iterations"

    out = graph.invoke(
        Command(resume={"action": "revise", "feedback": "Mention the autumn moon."}), cfg
    )
    # One more generation and one more evaluation, although max_iterations was reached.
    assert len(model.calls) == 4
    assert evaluator.calls == ["draft A", "draft B", "draft C", "draft D"]
    assert "Mention the autumn moon." in model.prompts[3]
    assert all("autumn moon" not in prompt for prompt in model.prompts[:3])
    # Then the stop rules apply (max_iterations again) and the review asks again.
    assert "__interrupt__" in out
    payload = paused(graph, cfg)
    assert payload["stop_reason"] == "max_iterations"
    assert payload["iteration"] == 3
    assert payload["response"] == "draft D"  # the revision scored best
    assert "error" not in payload
    attempts = graph.get_state(cfg).values["attempts"]
    assert [a.index for a in attempts] == [0, 1, 2, 3]
    assert attempts[3].instruction == "Mention the autumn moon."

    out = graph.invoke(Command(resume={"action": "approve"}), cfg)
    assert out["response"] == "draft D"
    assert len(model.calls) == 4  # approving ran no model call


def test_revise_twice_runs_one_round_each() -> None:
    graph, model, _evaluator, cfg = start_final_review()
    graph.invoke(Command(resume={"action": "revise", "feedback": "first note"}), cfg)
    graph.invoke(Command(resume={"action": "revise", "feedback": "second note"}), cfg)
    assert len(model.calls) == 5
    assert "first note" in model.prompts[3]
    assert "second note" in model.prompts[4]
    assert "# Reviewer request" not in model.prompts[2]
    payload = paused(graph, cfg)
    assert payload["iteration"] == 4
    # The revision asked for last is shown (a human's request outranks the best score),
    # with the best beside it.
    assert (payload["response"], payload["attempt"]) == ("draft E", 4)
    assert payload["best_attempt"] == 3
    description = payload["action_requests"][0]["description"]
    # Rounds from 1 (the payload's `attempt` and `best_attempt` are indexes, 4 and 3).
    assert description.startswith("The revised answer (round 5), scored 0.50 of 1.")
    assert "The best answer so far is round 4, scored 0.80 of 1." in description
    graph.invoke(Command(resume={"action": "reject"}), cfg)
    assert RefineResult.from_state(graph.get_state(cfg).values).stop_reason == "rejected"


def test_revise_then_the_stop_rules_decide_again() -> None:
    # The first stop is target_reached; the revision scores PASS, so the loop stops as
    # "passed" and the reviewer is asked again about it.
    model = ScriptedChatModel(replies=["good", "revised"])

    def evaluate(response: str, state: Any) -> Evaluation:
        if response == "revised":
            return Evaluation(score=0.7, verdict="PASS", feedback="fine")
        return Evaluation(score=0.95, feedback="ok")

    graph = create_refine_graph(model, evaluate, human_review="final").compile(
        checkpointer=InMemorySaver()
    )
    cfg = thread()
    graph.invoke({"task": "t"}, cfg)
    assert paused(graph, cfg)["stop_reason"] == "target_reached"
    graph.invoke(Command(resume={"action": "revise", "feedback": "shorter"}), cfg)
    payload = paused(graph, cfg)
    assert payload["stop_reason"] == "passed"
    assert payload["response"] == "revised"  # PASS outranks the higher score
    assert len(model.calls) == 2


def test_continue_is_not_an_action_of_final_review() -> None:
    graph, model, _evaluator, cfg = start_final_review()
    out = graph.invoke(Command(resume={"action": "continue"}), cfg)
    [interrupt] = out["__interrupt__"]
    assert "continue" in interrupt.value["error"]
    assert "'approve'" in interrupt.value["error"]
    assert paused(graph, cfg)["error"] == interrupt.value["error"]
    assert len(model.calls) == 3
    graph.invoke(Command(resume={"action": "approve"}), cfg)
    assert graph.get_state(cfg).values["stop_reason"] == "approved"


# -- every_round -----------------------------------------------------------------------------


def every_round_graph(**options: Any) -> tuple[Any, ScriptedChatModel, Scores, Any]:
    graph, model, evaluator = final_review_graph(
        REPLIES, TABLE, human_review="every_round", patience=None, **options
    )
    cfg = thread()
    graph.invoke({"task": "t"}, cfg)
    return graph, model, evaluator, cfg


def test_every_round_pauses_after_each_evaluation_about_that_attempt() -> None:
    graph, model, evaluator, cfg = every_round_graph(max_iterations=3)
    seen = []
    for expected in ["draft A", "draft B", "draft C"]:
        payload = paused(graph, cfg)
        assert payload.keys() >= PAYLOAD_KEYS
        assert payload["response"] == expected  # the attempt just evaluated, best or not
        assert payload["score"] == TABLE[expected]
        assert payload["feedback"] == f"feedback on {expected}"
        assert payload["stop_reason"] is None  # the stop rules would refine
        assert len(evaluator.calls) == len(seen) + 1
        seen.append(payload["iteration"])
        graph.invoke(Command(resume={"action": "continue"}), cfg)
    assert seen == [0, 1, 2]
    payload = paused(graph, cfg)
    assert payload["response"] == "draft D"
    assert payload["stop_reason"] == "max_iterations"
    # "continue" at a stop: the stop rules' decision stands.
    out = graph.invoke(Command(resume={"action": "continue"}), cfg)
    assert out["response"] == "draft D"  # best of A..D
    result = RefineResult.from_state(graph.get_state(cfg).values)
    assert result.stop_reason == "max_iterations"
    assert len(model.calls) == 4


def test_every_round_continue_at_a_regression_keeps_the_best() -> None:
    graph, _model, _evaluator, cfg = every_round_graph(max_iterations=2)
    for _ in range(3):
        graph.invoke(Command(resume={"action": "continue"}), cfg)
    result = RefineResult.from_state(graph.get_state(cfg).values)
    assert result.stop_reason == "max_iterations"
    assert result.value == "draft B"


def test_every_round_approve_takes_the_reviewed_attempt_even_if_not_best() -> None:
    graph, model, _evaluator, cfg = every_round_graph(max_iterations=4)
    graph.invoke(Command(resume={"action": "continue"}), cfg)  # A
    graph.invoke(Command(resume={"action": "continue"}), cfg)  # B (best so far)
    assert paused(graph, cfg)["response"] == "draft C"
    out = graph.invoke(Command(resume={"action": "approve"}), cfg)
    assert out["response"] == "draft C"
    assert graph.get_state(cfg).values["stop_reason"] == "approved"
    assert len(model.calls) == 3


def test_every_round_revise_runs_one_round_with_the_feedback() -> None:
    graph, model, _evaluator, cfg = every_round_graph(max_iterations=0)
    assert paused(graph, cfg)["stop_reason"] == "max_iterations"
    graph.invoke(Command(resume={"action": "revise", "feedback": "add a title"}), cfg)
    assert len(model.calls) == 2
    assert "add a title" in model.prompts[1]
    payload = paused(graph, cfg)
    assert payload["response"] == "draft B"
    assert payload["iteration"] == 1
    assert payload["stop_reason"] == "max_iterations"
    graph.invoke(Command(resume={"action": "edit", "response": "final"}), cfg)
    assert RefineResult.from_state(graph.get_state(cfg).values).value == "final"


# -- malformed resume values ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        ({"action": "publish"}, "'publish'"),
        ({"action": "edit"}, "'response'"),
        ({"action": "edit", "response": "   "}, "'response'"),
        ({"action": "edit", "response": 42}, "'response'"),
        ({"action": "revise"}, "'feedback'"),
        ({"action": "revise", "feedback": ""}, "'feedback'"),
        ({"feedback": "no action"}, "'action'"),
        ("  ", "empty text"),  # text is read as an answer (`from_text`): this says nothing
        ("edit:", "nothing after 'edit:'"),
        ({"action": None}, "None"),
        (42, "42"),
        (["approve"], "['approve']"),
    ],
)
def test_malformed_resume_keeps_the_review_pending_with_an_error(value: Any, needle: str) -> None:
    graph, model, evaluator, cfg = start_final_review()
    before = paused(graph, cfg)
    out = graph.invoke(Command(resume=value), cfg)
    [interrupt] = out["__interrupt__"]
    payload = paused(graph, cfg)
    assert payload == interrupt.value
    assert needle in payload["error"]  # the message shows what was wrong
    assert "Command(resume=" in payload["error"] or "resume again" in payload["error"]
    assert {k: v for k, v in payload.items() if k != "error"} == before  # same review
    assert len(model.calls) == 3 and len(evaluator.calls) == 3  # nothing re-run
    assert "stop_reason" not in graph.get_state(cfg).values or graph.get_state(cfg).values[
        "stop_reason"
    ] == ("max_iterations")

    out = graph.invoke(Command(resume={"action": "edit", "response": "fixed"}), cfg)
    assert out["response"] == "fixed"
    assert graph.get_state(cfg).next == ()
    assert graph.get_state(cfg).values["stop_reason"] == "edited"
    assert len(model.calls) == 3


def test_an_empty_resume_map_leaves_the_review_pending() -> None:
    # LangGraph reads a dict resume value keyed by interrupt ids as an id -> value map;
    # an empty dict is an empty map: nothing is answered and the same review stays.
    graph, model, _evaluator, cfg = start_final_review()
    before = paused(graph, cfg)
    graph.invoke(Command(resume={}), cfg)
    assert paused(graph, cfg) == before
    graph.invoke(Command(resume={"action": "reject"}), cfg)
    assert graph.get_state(cfg).values["stop_reason"] == "rejected"
    assert len(model.calls) == 3


def test_bad_values_are_never_replayed_into_later_answers() -> None:
    graph, model, evaluator, cfg = start_final_review()
    graph.invoke(Command(resume={"action": "first-bad"}), cfg)
    assert "first-bad" in paused(graph, cfg)["error"]
    graph.invoke(Command(resume={"action": "edit"}), cfg)
    error = paused(graph, cfg)["error"]
    assert "'response'" in error and "first-bad" not in error
    graph.invoke(Command(resume={"action": "revise", "feedback": "one more"}), cfg)
    # The revision round ran once and a fresh review (no stale error) is pending.
    assert len(model.calls) == 4
    payload = paused(graph, cfg)
    assert "error" not in payload
    assert payload["iteration"] == 3
    graph.invoke(Command(resume={"action": "nope"}), cfg)
    assert "nope" in paused(graph, cfg)["error"]
    graph.invoke(Command(resume={"action": "approve"}), cfg)
    assert graph.get_state(cfg).values["stop_reason"] == "approved"
    assert len(model.calls) == 4 and len(evaluator.calls) == 4


def test_review_input_error_names_value_and_fix() -> None:
    from langgraph_refine import ReviewNode

    node = ReviewNode("final")
    with pytest.raises(ReviewInputError, match=r"'approve', 'edit', 'reject', 'revise'"):
        node.apply({"response": "x"}, {"action": "continue"})
    with pytest.raises(ReviewInputError, match="needs a non-empty string 'feedback'"):
        node.apply({"response": "x"}, {"action": "revise", "feedback": None})
    assert issubclass(ReviewInputError, ValueError)
    assert ReviewNode("every_round").apply({"response": "x"}, {"action": "continue"}) == {}


# -- resuming never repeats a completed model call -----------------------------------------


def test_resuming_never_repeats_a_model_call_with_an_llm_judge() -> None:
    generator = ScriptedChatModel(replies=["v1", "v2", "v3"])
    judge = ScriptedChatModel(
        replies=[judge_reply(0.4, feedback="more detail"), judge_reply(0.5), judge_reply(0.6)]
    )
    graph = create_refine_graph(
        generator, judge_model=judge, max_iterations=1, patience=None, human_review="final"
    ).compile(checkpointer=InMemorySaver())
    cfg = thread()
    graph.invoke({"task": "t"}, cfg)
    assert (len(generator.calls), len(judge.calls)) == (2, 2)
    graph.invoke(Command(resume={"action": "bogus"}), cfg)
    assert (len(generator.calls), len(judge.calls)) == (2, 2)
    graph.invoke(Command(resume={"action": "revise", "feedback": "be bold"}), cfg)
    assert (len(generator.calls), len(judge.calls)) == (3, 3)
    assert "be bold" in generator.prompts[2]
    graph.invoke(Command(resume={"action": "approve"}), cfg)
    assert (len(generator.calls), len(judge.calls)) == (3, 3)
    values = graph.get_state(cfg).values
    assert values["response"] == "v3"
    assert values["usage"].calls == 6


def test_every_round_resumes_never_repeat_calls() -> None:
    graph, model, evaluator, cfg = every_round_graph(max_iterations=4)
    for step in range(1, 4):
        assert len(model.calls) == step and len(evaluator.calls) == step
        graph.invoke(Command(resume={"action": "continue"}), cfg)
    graph.invoke(Command(resume={"action": "reject"}), cfg)
    assert len(model.calls) == 4 and evaluator.calls == ["draft A", "draft B", "draft C", "draft D"]


# -- the same over real checkpointers (strict msgpack) ---------------------------------------


def test_review_round_trip_over_real_checkpointers(checkpointer: Any) -> None:
    graph, model, evaluator, cfg = start_final_review(checkpointer)
    graph.invoke(Command(resume={"action": "edit"}), cfg)
    assert "'response'" in paused(graph, cfg)["error"]
    graph.invoke(Command(resume={"action": "revise", "feedback": "use five words"}), cfg)
    assert "use five words" in model.prompts[3]
    payload = paused(graph, cfg)
    assert payload["iteration"] == 3 and "error" not in payload
    out = graph.invoke(Command(resume={"action": "approve"}), cfg)
    assert out["response"] == "draft D"
    assert len(model.calls) == 4 and len(evaluator.calls) == 4
    result = RefineResult.from_state(graph.get_state(cfg).values)
    assert result.stop_reason == "approved"
    assert [a.index for a in result.attempts] == [0, 1, 2, 3]


# -- refine(reviewer=...) and the async path -----------------------------------------------


def test_refine_with_a_reviewer_callable() -> None:
    seen: list[dict[str, Any]] = []
    answers = iter(
        [
            {"action": "revise", "feedback": "rhyme please"},
            {"action": "edit", "response": "edited by a human"},
        ]
    )

    def reviewer(payload: dict[str, Any]) -> dict[str, Any]:
        seen.append(payload)
        return next(answers)

    model = ScriptedChatModel(replies=REPLIES)
    result = refine(
        model,
        "t",
        Scores(TABLE),
        max_iterations=1,
        patience=None,
        human_review="final",
        reviewer=reviewer,
    )
    assert result.stop_reason == "edited"
    assert result.value == "edited by a human"
    assert [p["iteration"] for p in seen] == [1, 2]
    assert "rhyme please" in model.prompts[2]
    assert len(model.calls) == 3


@pytest.mark.parametrize("answer", [{"action": "looks good"}, None, "approve", {}])
def test_refine_raises_on_a_bad_reviewer_answer_and_the_review_stays_pending(
    answer: Any,
) -> None:
    saver = InMemorySaver()
    model = ScriptedChatModel(replies=REPLIES)
    evaluator = Scores(TABLE)
    options: dict[str, Any] = {"max_iterations": 1, "patience": None, "human_review": "final"}
    asked: list[dict[str, Any]] = []

    def bad_reviewer(payload: dict[str, Any]) -> Any:
        asked.append(payload)
        return answer

    with pytest.raises(ReviewInputError) as info:
        refine(
            model,
            "t",
            evaluator,
            checkpointer=saver,
            thread_id="r",
            reviewer=bad_reviewer,
            **options,
        )
    assert repr(answer) in str(info.value)
    assert len(asked) == 1  # not asked again and again
    assert len(model.calls) == 2

    # Calling again on the same thread continues the pending review: no model call repeats.
    result = refine(
        model,
        "t",
        evaluator,
        checkpointer=saver,
        thread_id="r",
        reviewer=lambda payload: {"action": "approve"},
        **options,
    )
    assert result.stop_reason == "approved"
    assert result.value == "draft B"
    assert len(model.calls) == 2 and len(evaluator.calls) == 2


async def test_arefine_with_an_async_reviewer() -> None:
    async def reviewer(payload: dict[str, Any]) -> dict[str, Any]:
        return {"action": "approve"}

    model = ScriptedChatModel(replies=REPLIES)
    result = await arefine(
        model,
        "t",
        Scores(TABLE),
        max_iterations=2,
        patience=None,
        human_review="final",
        reviewer=reviewer,
    )
    assert result.stop_reason == "approved"
    assert result.value == "draft B"
    assert len(model.calls) == 3


async def test_async_three_step_review() -> None:
    graph, model, _evaluator = final_review_graph(REPLIES, TABLE, max_iterations=1)
    cfg = thread()
    out = await graph.ainvoke({"task": "t"}, cfg)
    assert out["__interrupt__"][0].value["response"] == "draft B"
    assert (await graph.aget_state(cfg)).next == ("review",)
    out = await graph.ainvoke(Command(resume={"action": "oops"}), cfg)
    assert "oops" in out["__interrupt__"][0].value["error"]
    out = await graph.ainvoke(Command(resume={"action": "reject"}), cfg)
    assert out["response"] == "draft B"
    assert len(model.calls) == 2


def test_stop_event_reports_the_review_decision() -> None:
    graph, _model, _evaluator, cfg = start_final_review()
    events = [
        chunk
        for chunk in graph.stream(Command(resume={"action": "approve"}), cfg, stream_mode="custom")
    ]
    stops = [e for e in events if e.get("type") == "stop"]
    assert len(stops) == 1 and stops[0]["stop_reason"] == "approved"
    assert not [e for e in events if e.get("type") == "round"]  # no round re-run


def test_human_review_example() -> None:
    from examples.human_review import main, scripted_reviewer

    too_short = "A harbour."
    calm = " ".join(["Calm boats rest by the sea while gulls wake"] * 3)
    model = ScriptedChatModel(replies=[too_short, too_short, too_short, calm])
    result = main(model, reviewer=scripted_reviewer())
    assert result.stop_reason == "approved"
    assert result.value == calm
    assert len(model.calls) == 4  # three rounds, then the one revision
    assert "Make it calmer and mention the sea." in model.prompts[3]


# -- budget stops ------------------------------------------------------------------------------


def test_final_review_also_follows_a_budget_stop() -> None:
    from langgraph_refine import Budget

    graph, model, _evaluator = final_review_graph(
        REPLIES, TABLE, max_iterations=4, patience=None, budget=Budget(max_calls=2)
    )
    cfg = thread()
    graph.invoke({"task": "t"}, cfg)
    payload = paused(graph, cfg)
    assert payload["stop_reason"] == "budget_exhausted"
    assert payload["response"] == "draft B"
    # A revision cannot buy more calls: the budget stops it before any model call.
    graph.invoke(Command(resume={"action": "revise", "feedback": "again"}), cfg)
    assert paused(graph, cfg)["stop_reason"] == "budget_exhausted"
    assert len(model.calls) == 2
    graph.invoke(Command(resume={"action": "approve"}), cfg)
    result = RefineResult.from_state(graph.get_state(cfg).values)
    assert (result.stop_reason, result.value) == ("approved", "draft B")


def test_budget_raise_skips_the_review() -> None:
    from langgraph_refine import Budget, BudgetExhaustedError

    graph, _model, _evaluator = final_review_graph(
        REPLIES,
        TABLE,
        max_iterations=4,
        patience=None,
        budget=Budget(max_calls=1),
        on_budget_exhausted="raise",
    )
    cfg = thread()
    with pytest.raises(BudgetExhaustedError) as info:
        graph.invoke({"task": "t"}, cfg)
    assert info.value.result.value == "draft A"
    assert not graph.get_state(cfg).interrupts


# -- an edit is evaluated -------------------------------------------------------------------


def test_an_edit_is_judged_and_the_judge_call_counts() -> None:
    judge = ScriptedChatModel(
        replies=[judge_reply(0.4), judge_reply(0.6), judge_reply(0.95, verdict="PASS")]
    )
    generator = ScriptedChatModel(replies=["draft A", "draft B"])
    graph = create_refine_graph(
        generator, judge_model=judge, max_iterations=1, patience=None, human_review="final"
    ).compile(checkpointer=InMemorySaver())
    cfg = thread()
    graph.invoke({"task": "Write a haiku."}, cfg)
    graph.invoke(Command(resume={"action": "edit", "response": "my haiku"}), cfg)
    result = RefineResult.from_state(graph.get_state(cfg).values)
    assert "my haiku" in str(judge.calls[-1][-1].content)  # the judge saw the edit
    assert (result.value, result.score, result.verdict) == ("my haiku", 0.95, "PASS")
    assert result.stop_reason == "edited"  # whatever the edit scores, the reviewer decided
    assert result.usage.calls == 5  # two rounds of generate + judge, and the edit's judge
    assert result.best_index == 2


def test_an_edit_past_the_budget_has_no_score() -> None:
    judge = ScriptedChatModel(replies=[judge_reply(0.4), judge_reply(0.6)])
    generator = ScriptedChatModel(replies=["draft A", "draft B"])
    graph = create_refine_graph(
        generator,
        judge_model=judge,
        max_iterations=1,
        patience=None,
        human_review="final",
        budget=Budget(max_calls=4),
    ).compile(checkpointer=InMemorySaver())
    cfg = thread()
    graph.invoke({"task": "Write a haiku."}, cfg)
    graph.invoke(Command(resume={"action": "edit", "response": "my haiku"}), cfg)
    result = RefineResult.from_state(graph.get_state(cfg).values)
    assert len(judge.calls) == 2  # no call past the budget
    assert (result.value, result.stop_reason) == ("my haiku", "edited")
    assert (result.score, result.verdict, result.feedback) == (None, None, "")
    assert result.attempts[-1].evaluation is None and result.attempts[-1].move == "edit"
    assert result.score_history == [0.4, 0.6]


def test_every_round_edit_is_evaluated_then_ends() -> None:
    graph, model, evaluator, cfg = every_round_graph(max_iterations=4)
    out = graph.invoke(Command(resume={"action": "edit", "response": "fixed"}), cfg)
    assert out["response"] == "fixed" and "__interrupt__" not in out
    result = RefineResult.from_state(graph.get_state(cfg).values)
    assert (result.stop_reason, result.score, evaluator.calls[-1]) == ("edited", 0.9, "fixed")
    assert len(model.calls) == 1


# -- a review needs a checkpointer ----------------------------------------------------------


def test_human_review_without_a_checkpointer_fails_before_any_model_call() -> None:
    model = ScriptedChatModel(replies=["draft"])
    graph = create_refine_graph(model, lambda r, s: 0.5, human_review="final").compile()
    with pytest.raises(ValueError, match=r"human_review needs a checkpointer.*compile"):
        graph.invoke({"task": "Write a haiku."})
    assert model.calls == []  # nothing spent


def test_a_reviewed_loop_inside_a_checkpointed_parent_is_fine() -> None:
    from langgraph.graph import START, StateGraph
    from typing_extensions import TypedDict

    class Parent(TypedDict):
        task: str
        response: str

    loop = create_refine_graph(
        ScriptedChatModel(replies=["draft"]),
        lambda r, s: 0.5,
        human_review="final",
        max_iterations=0,
    ).compile()  # no checkpointer of its own: the parent's is used
    parent = StateGraph(Parent).add_node("refine", loop).add_edge(START, "refine")
    parent = parent.compile(checkpointer=InMemorySaver())
    cfg = thread()
    assert "__interrupt__" in parent.invoke({"task": "t"}, cfg)
    assert parent.invoke(Command(resume={"action": "approve"}), cfg)["response"] == "draft"

"""`confirm_pass=True`: a stop on PASS or the target stands only if a second judgment agrees."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from langgraph_refine import Budget, Evaluation, arefine, create_refine_graph, refine
from tests.fakes import ScriptedChatModel, judge_reply

TASK = "Name three primes."


def judged(*evaluations: Evaluation) -> Any:
    """A callable evaluator returning the evaluations in order, recording what it judged."""
    queue = list(evaluations)
    seen: list[str] = []

    def evaluate(response: str, state: Any) -> Evaluation:
        seen.append(response)
        return queue.pop(0)

    evaluate.seen = seen  # type: ignore[attr-defined]
    return evaluate


LENIENT = Evaluation(score=0.95, verdict="PASS", feedback="perfect")
STRICT = Evaluation(score=0.4, verdict="NEEDS_IMPROVEMENT", feedback="4 is not prime")


def test_a_disagreeing_second_judgment_keeps_the_loop_going_with_its_feedback() -> None:
    generator = ScriptedChatModel(replies=["2, 3, 4", "2, 3, 5"])
    evaluator = judged(LENIENT, STRICT, LENIENT, LENIENT)
    result = refine(generator, TASK, evaluator, confirm_pass=True, strategy="chain")
    assert evaluator.seen == ["2, 3, 4", "2, 3, 4", "2, 3, 5", "2, 3, 5"]
    assert result.stop_reason == "passed" and result.value == "2, 3, 5"
    first = result.attempts[0].evaluation
    assert first is not None and (first.score, first.feedback) == (0.4, "4 is not prime")
    assert first.details["first_judgment"] == {
        "score": 0.95,
        "verdict": "PASS",
        "feedback": "perfect",
    }
    # The refinement round was asked with the second judgment's feedback.
    assert "4 is not prime" in generator.prompts[1]
    last = result.attempts[1].evaluation
    assert last is not None and last.details["confirmation"]["verdict"] == "PASS"


def test_without_confirmation_the_lenient_pass_stops_at_once() -> None:
    evaluator = judged(LENIENT, STRICT)
    result = refine(ScriptedChatModel(replies=["2, 3, 4"]), TASK, evaluator)
    assert result.stop_reason == "passed" and evaluator.seen == ["2, 3, 4"]


def test_a_target_score_stop_is_confirmed_too() -> None:
    high, low = Evaluation(score=0.92), Evaluation(score=0.5, feedback="shorter")
    evaluator = judged(high, low, high, Evaluation(score=0.91))
    result = refine(
        ScriptedChatModel(replies=["a", "b"]), TASK, evaluator, confirm_pass=True, strategy="chain"
    )
    assert result.stop_reason == "target_reached" and len(result.attempts) == 2
    assert [a.score for a in result.attempts] == [0.5, 0.92]
    assert len(evaluator.seen) == 4


def test_a_second_judgment_that_fails_the_rules_can_still_stop_on_max_iterations() -> None:
    evaluator = judged(LENIENT, STRICT)
    result = refine(
        ScriptedChatModel(replies=["2, 3, 4"]), TASK, evaluator, confirm_pass=True, max_iterations=0
    )
    assert result.stop_reason == "max_iterations" and result.score == 0.4


def test_the_confirming_judge_call_counts_against_the_budget() -> None:
    generator = ScriptedChatModel(replies=["2, 3, 5"])
    judge = ScriptedChatModel(replies=[judge_reply(0.95, "PASS", "good")])
    result = refine(generator, TASK, judge_model=judge, confirm_pass=True)
    assert result.stop_reason == "passed" and len(judge.calls) == 2
    assert result.usage.calls == 3
    # With one call left after the first judgment, no confirmation can be made: the run
    # stops on the budget, the evaluation says why.
    tight = ScriptedChatModel(replies=[judge_reply(0.95, "PASS", "good")])
    stopped = refine(
        ScriptedChatModel(replies=["2, 3, 5"]),
        TASK,
        judge_model=tight,
        confirm_pass=True,
        budget=Budget(max_calls=2),
    )
    assert stopped.stop_reason == "budget_exhausted" and len(tight.calls) == 1
    evaluation = stopped.attempts[0].evaluation
    assert evaluation is not None
    assert evaluation.details["confirmation"] == "not made: the budget ran out"
    assert stopped.usage.calls == 2


def test_async_runs_confirm_the_same_way() -> None:
    evaluator = judged(LENIENT, STRICT, LENIENT, LENIENT)

    async def evaluate(response: str, state: Any) -> Evaluation:
        result: Evaluation = evaluator(response, state)
        return result

    result = asyncio.run(
        arefine(
            ScriptedChatModel(replies=["x", "y"]),
            TASK,
            evaluate,
            confirm_pass=True,
            strategy="chain",
        )
    )
    assert result.value == "y" and len(evaluator.seen) == 4


def test_the_run_context_turns_confirmation_on_and_bad_values_are_refused() -> None:
    evaluator = judged(LENIENT, STRICT, LENIENT, LENIENT)
    graph = create_refine_graph(
        ScriptedChatModel(replies=["x", "y"]), evaluator, strategy="chain"
    ).compile()
    state = graph.invoke({"task": TASK}, context={"confirm_pass": True})
    assert state["response"] == "y" and len(evaluator.seen) == 4
    with pytest.raises(ValueError, match="confirm_pass must be True or False, got 'yes'"):
        graph.invoke({"task": TASK}, context={"confirm_pass": "yes"})
    with pytest.raises(ValueError, match="confirm_pass must be True or False"):
        create_refine_graph(ScriptedChatModel(), evaluator, confirm_pass=1)  # type: ignore[arg-type]


def test_cli_confirm_pass_is_passed_to_the_loop() -> None:
    from langgraph_refine.cli._shared import SharedFlags

    options = SharedFlags(
        evaluator=["words:1-5"], loop={"confirm_pass": True, "target_score": 0.9}, memory="last"
    ).options()
    kwargs = options.graph_kwargs(lambda: None)  # type: ignore[arg-type,return-value]
    assert kwargs["confirm_pass"] is True
    assert json.dumps(kwargs["target_score"]) == "0.9"
    # Not given: left to the library's default, not written out.
    plain = SharedFlags(
        evaluator=["words:1-5"], loop={"confirm_pass": False}, memory="last"
    ).options()
    assert "confirm_pass" not in plain.graph_kwargs(lambda: None)  # type: ignore[arg-type,return-value]

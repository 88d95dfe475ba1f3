"""openevals evaluators, with the real `openevals` package: accepted anywhere an evaluator is.

`create_llm_as_judge` on the real local model is the recorded example
`examples/openevals_judge.py` (tests/test_examples.py).
"""

from __future__ import annotations

import functools
from typing import Any

import pytest
from openevals.exact import exact_match, exact_match_async

from langgraph_refine import RefineMiddleware, arefine, evaluators, refine
from langgraph_refine.evaluators import OpenEvalsEvaluator
from langgraph_refine.evaluators._combine import as_evaluator
from tests.fakes import AgentModel, ScriptedChatModel

TASK = "Name the capital of France, one word."


def test_exact_match_from_openevals_drives_the_loop() -> None:
    model = ScriptedChatModel(replies=["Lyon", "Paris"])
    evaluator = functools.partial(exact_match, reference_outputs="Paris")
    result = refine(model, TASK, evaluator, max_iterations=2, patience=None)
    assert result.score_history == [0.0, 1.0]  # its boolean score counts as 0.0 / 1.0
    assert result.value == "Paris"
    assert result.stop_reason == "target_reached"
    assert result.attempts[0].evaluation is not None
    assert result.attempts[0].evaluation.details["results"][0]["key"] == "exact_match"


async def test_an_async_openevals_evaluator_runs_in_arefine() -> None:
    evaluator = functools.partial(exact_match_async, reference_outputs="Paris")
    result = await arefine(ScriptedChatModel(replies=["Paris"]), TASK, evaluator)
    assert result.score == 1.0


def test_inputs_is_the_task_and_outputs_the_response_and_comment_the_feedback() -> None:
    calls: list[dict[str, Any]] = []

    def concise(*, inputs: Any, outputs: Any, **kwargs: Any) -> dict[str, Any]:
        calls.append({"inputs": inputs, "outputs": outputs, **kwargs})
        return {"key": "concise", "score": 0.4, "comment": "Say it in one word."}

    model = ScriptedChatModel(replies=["It is Paris, of course.", "Paris"])
    result = refine(model, TASK, concise, max_iterations=1, patience=None)
    assert calls[0] == {"inputs": TASK, "outputs": "It is Paris, of course."}
    assert result.attempts[0].evaluation is not None
    assert result.attempts[0].evaluation.feedback == "Say it in one word."
    assert "Say it in one word." in str(model.calls[1][-1].content)  # the next round sees it


def test_several_results_are_averaged_and_labelled_with_their_keys() -> None:
    def two(*, inputs: Any, outputs: Any) -> list[dict[str, Any]]:
        return [
            {"key": "correct", "score": True, "comment": "right city"},
            {"key": "concise", "score": 0.5, "comment": None},
        ]

    evaluation = as_evaluator(two).evaluate("Paris", {"task": TASK})
    assert evaluation.score == 0.75
    assert evaluation.feedback == (
        "[correct] score 1.00: right city\n[concise] score 0.50: no comment"
    )


def test_openevals_evaluators_combine_with_the_others() -> None:
    match = functools.partial(exact_match, reference_outputs="Paris")
    evaluation = evaluators.combine(match, evaluators.word_count(1, 1)).evaluate("Paris", {})
    assert evaluation.score == 1.0
    assert set(evaluation.details["scores"]) == {"exact_match", "word_count"}


def test_an_openevals_evaluator_works_in_the_middleware() -> None:
    from langchain.agents import create_agent

    match = functools.partial(exact_match, reference_outputs="Paris")
    agent = create_agent(
        AgentModel(replies=["Lyon", "Paris"]), tools=[], middleware=[RefineMiddleware(match)]
    )
    out = agent.invoke({"messages": [("human", TASK)]})
    assert out["messages"][-1].text == "Paris"


def test_a_keyword_the_loop_cannot_give_fails_when_built() -> None:
    with pytest.raises(ValueError, match=r"needs reference_outputs.*functools.partial"):
        refine(ScriptedChatModel(), TASK, exact_match)


@pytest.mark.parametrize("bad", [1.5, None, "high"])
def test_a_score_outside_zero_one_is_refused(bad: Any) -> None:
    def wild(*, outputs: Any) -> dict[str, Any]:
        return {"key": "wild", "score": bad}

    with pytest.raises(ValueError, match="must be a boolean or a number in"):
        OpenEvalsEvaluator(wild).evaluate("x", {})


def test_a_reply_that_is_no_result_is_refused() -> None:
    with pytest.raises(TypeError, match="returns"):
        OpenEvalsEvaluator(lambda *, outputs: 0.5).evaluate("x", {})

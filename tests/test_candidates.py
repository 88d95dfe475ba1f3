"""Several candidates per round: each evaluated, the best kept, feedback on the best."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from langgraph_refine import Budget, Evaluation, arefine, create_refine_graph, refine
from tests.fakes import ScriptedChatModel, judge_reply


def keyword_score(response: str, state: Any) -> Evaluation:
    words = ["apple", "ladder", "orchard"]
    present = [w for w in words if w in response]
    missing = [w for w in words if w not in response]
    return Evaluation(score=len(present) / 3, feedback=f"missing: {', '.join(missing)}")


def test_best_candidate_becomes_the_attempt() -> None:
    model = ScriptedChatModel(replies=["apple", "apple ladder", "nothing", "apple ladder orchard"])
    result = refine(model, "t", keyword_score, candidates=2, max_iterations=1, target_score=1.0)
    first = result.attempts[0]
    assert first.response == "apple ladder"
    assert [c.response for c in first.candidates] == ["apple", "apple ladder"]
    assert [c.evaluation.score for c in first.candidates if c.evaluation] == pytest.approx(
        [1 / 3, 2 / 3]
    )
    assert result.value == "apple ladder orchard"
    assert result.stop_reason == "target_reached"
    assert result.usage.calls == 4
    # The refinement prompt shows the best candidate and its feedback only.
    assert "apple ladder" in model.prompts[2] and "missing: orchard" in model.prompts[2]


def test_candidates_count_against_the_call_budget() -> None:
    model = ScriptedChatModel(replies=["a"])
    result = refine(
        model, "t", keyword_score, candidates=3, budget=Budget(max_calls=5), patience=None
    )
    assert len(model.calls) == 5  # 3, then only the 2 the budget allows
    assert len(result.attempts[1].candidates) == 2
    assert result.stop_reason == "budget_exhausted"


def test_judge_budget_runs_out_between_candidates() -> None:
    model = ScriptedChatModel(replies=["c1", "c2", judge_reply(0.3), judge_reply(0.6)])
    result = refine(model, "t", None, candidates=2, budget=Budget(max_calls=3))
    attempt = result.attempts[0]
    assert [c.evaluation is not None for c in attempt.candidates] == [True, False]
    assert attempt.response == "c1"
    assert result.stop_reason == "budget_exhausted"


async def test_async_candidates_are_generated_concurrently() -> None:
    import asyncio

    running = itertools.count()
    peak = {"n": 0, "now": 0}

    async def gen(state: Any) -> str:
        peak["now"] += 1
        peak["n"] = max(peak["n"], peak["now"])
        await asyncio.sleep(0.02)
        peak["now"] -= 1
        return f"apple {next(running)}"

    result = await arefine(gen, "t", keyword_score, candidates=4, max_iterations=0)
    assert peak["n"] == 4
    assert len(result.attempts[0].candidates) == 4


def test_invalid_candidates() -> None:
    with pytest.raises(ValueError, match="candidates must be an integer >= 1, got 0"):
        create_refine_graph(lambda s: "x", keyword_score, candidates=0)

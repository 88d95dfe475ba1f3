# ruff: noqa: F811 - pytest fixtures are imported from the helper module
"""Unjudged is not failed: an attempt its evaluator could not judge is kept apart.

When the evaluator cannot judge (it raises `evaluators.Unjudged`, an LLM judge's replies stay
unreadable, a judge model's call keeps failing with a transient error), the attempt has
score None and `Attempt.error`; the error never reaches the generator, the round does not
count towards `patience`, the next move refines the best judged attempt, the final choice is
among judged attempts, and `on_evaluator_error` chooses retry, skip or raise. Graph and
agent alike, sync and async.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langgraph.types import RetryPolicy

from langgraph_refine import Budget, Evaluation, RefineMiddleware, arefine, refine
from langgraph_refine.evaluators import Unjudged, llm_judge
from tests.fakes import AgentModel, ScriptedChatModel
from tests.test_cli_helpers import (  # noqa: F401 - fixtures
    cli,
    is_judge,
    judge_json,
    last_user_text,
    openai_server,
    rated_text,
)

TASK = "Describe the Eiffel Tower."
REASON = "the grading service is down"
SCORES = {"a": 0.5, "b": 0.4, "c": 0.3, "d": 0.45, "good": 0.95}


class Grader:
    """Scores by answer; answers starting with "x" cannot be judged (a few times, or always)."""

    def __init__(self, fails: int = 10**6) -> None:
        self.fails, self.calls = fails, []  # type: ignore[var-annotated]

    def __call__(self, response: str, state: Any) -> Evaluation:
        self.calls.append(response)
        if response.startswith("x") and self.fails > 0:
            self.fails -= 1
            raise Unjudged(REASON)
        return Evaluation(
            score=SCORES.get(response.lstrip("x"), 0.2), feedback=f"improve {response}"
        )


def shape(result: Any) -> list[tuple[Any, ...]]:
    return [(a.response, a.move, a.parent, a.score, a.error) for a in result.attempts]


def test_an_unjudged_attempt_is_kept_apart_and_its_error_never_reaches_the_generator() -> None:
    generator = ScriptedChatModel(replies=["a", "xa", "b"])
    result = refine(
        generator, TASK, Grader(), max_iterations=2, on_evaluator_error="skip", patience=None
    )
    assert shape(result) == [
        ("a", "sample", None, 0.5, None),
        ("xa", "refine", 0, None, REASON),
        ("b", "refine", 0, 0.4, None),  # the best judged attempt is refined, not the unjudged
    ]
    assert all(REASON not in prompt for prompt in generator.prompts)
    assert "<answer>\nxa" not in generator.prompts[2]
    assert (result.value, result.best_index, result.score) == ("a", 0, 0.5)
    assert result.score_history == [0.5, 0.4]


def test_an_unjudged_round_is_no_round_without_improvement() -> None:
    generator = ScriptedChatModel(replies=["a", "xa", "b", "c"])
    result = refine(
        generator, TASK, Grader(), max_iterations=5, patience=1, on_evaluator_error="skip"
    )
    # Round 1 is unjudged: only round 2 (0.4 < 0.5) fails to improve, so the plateau comes there.
    assert [a.response for a in result.attempts] == ["a", "xa", "b"]
    assert result.stop_reason == "plateau"


def test_with_nothing_judged_the_next_move_samples_and_the_last_attempt_is_the_result() -> None:
    generator = ScriptedChatModel(replies=["xa", "xb"])
    result = refine(generator, TASK, Grader(), max_iterations=1, on_evaluator_error="skip")
    assert [(a.move, a.parent) for a in result.attempts] == [("sample", None), ("sample", None)]
    assert result.stop_reason == "max_iterations"
    assert (result.value, result.score, result.best_index) == ("xb", None, None)


def test_retry_judges_the_same_answer_again_then_keeps_it_unjudged() -> None:
    grader = Grader(fails=1)
    result = refine(ScriptedChatModel(replies=["xa"]), TASK, grader, max_iterations=0)
    assert grader.calls == ["xa", "xa"]
    assert result.attempts[0].score == 0.5 and result.attempts[0].error is None

    always = Grader()
    result = refine(ScriptedChatModel(replies=["xa"]), TASK, always, max_iterations=0)
    assert always.calls == ["xa"] * 3  # the first judgment and two more
    assert (result.attempts[0].score, result.attempts[0].error) == (None, REASON)


def test_skip_keeps_it_unjudged_at_once() -> None:
    grader = Grader()
    refine(
        ScriptedChatModel(replies=["xa"]), TASK, grader, max_iterations=0, on_evaluator_error="skip"
    )
    assert grader.calls == ["xa"]


def test_raise_raises_with_the_result_so_far() -> None:
    with pytest.raises(Unjudged, match=REASON) as caught:
        refine(
            ScriptedChatModel(replies=["a", "xb"]),
            TASK,
            Grader(),
            max_iterations=2,
            on_evaluator_error="raise",
        )
    result = caught.value.result  # type: ignore[attr-defined]
    assert result.value == "a" and result.score == 0.5


def test_a_bug_in_the_users_evaluator_still_raises_with_the_result() -> None:
    def buggy(response: str, state: Any) -> float:
        if response == "b":
            raise KeyError("oops")
        return 0.5

    with pytest.raises(KeyError) as caught:
        refine(ScriptedChatModel(replies=["a", "b"]), TASK, buggy, max_iterations=2)
    assert caught.value.result.value == "a"  # type: ignore[attr-defined]


def test_an_unreadable_llm_judge_retries_within_the_budget_then_leaves_it_unjudged() -> None:
    judge = ScriptedChatModel(replies=["no idea"])
    result = refine(
        ScriptedChatModel(replies=["a"]),
        TASK,
        llm_judge(judge),
        max_iterations=0,
        budget=Budget(max_calls=20),
    )
    attempt = result.attempts[0]
    assert attempt.score is None and attempt.error is not None
    assert "could not be read" in attempt.error
    # The judge's own re-asks and the loop's re-judgment share the policy's four tries.
    assert len(judge.calls) == 4 and result.usage.calls == 5
    assert result.stop_reason == "max_iterations"


def test_a_judge_model_that_keeps_failing_does_not_crash_the_run() -> None:
    judge = ScriptedChatModel(replies=[ConnectionError("judge unreachable")])
    generator = ScriptedChatModel(replies=["a", "b"])
    quick = RetryPolicy(max_attempts=2, initial_interval=0.0, jitter=False)
    result = refine(generator, TASK, llm_judge(judge), max_iterations=1, retry_policy=quick)
    # Each attempt: the policy's two tries, no re-judgment on top (retries never multiply).
    assert len(judge.calls) == 2 * 2
    assert [a.error for a in result.attempts] == [
        "the judge model's call failed: ConnectionError: judge unreachable"
    ] * 2
    assert result.value == "b" and result.score is None
    assert result.stop_reason == "max_iterations"  # its rule matched first
    assert all("unreachable" not in prompt for prompt in generator.prompts)


async def test_async_alike() -> None:
    generator = ScriptedChatModel(replies=["a", "xa", "b"])
    result = await arefine(
        generator, TASK, Grader(), max_iterations=2, on_evaluator_error="skip", patience=None
    )
    assert [a.error for a in result.attempts] == [None, REASON, None]
    assert [(a.move, a.parent) for a in result.attempts][2] == ("refine", 0)


def agent_result(answers: list[str], **options: Any) -> tuple[Any, AgentModel]:
    middleware = RefineMiddleware(Grader(), target_score=0.9, **options)
    model = AgentModel(replies=answers)
    agent = create_agent(model, tools=[], middleware=[middleware])
    return middleware.result(agent.invoke({"messages": [HumanMessage(TASK)]})), model


def test_the_agent_keeps_an_unjudged_answer_apart_too() -> None:
    result, model = agent_result(
        ["a", "xa", "b"], max_iterations=2, on_evaluator_error="skip", patience=None
    )
    assert [(a.response, a.score, a.error) for a in result.attempts] == [
        ("a", 0.5, None),
        ("xa", None, REASON),
        ("b", 0.4, None),
    ]
    assert all(REASON not in str(m.content) for call in model.calls for m in call)
    assert result.value == "a"


async def test_the_agent_async_alike() -> None:
    middleware = RefineMiddleware(Grader(), target_score=0.9, max_iterations=1)
    agent = create_agent(AgentModel(replies=["xa", "b"]), tools=[], middleware=[middleware])
    result = middleware.result(await agent.ainvoke({"messages": [HumanMessage(TASK)]}))
    assert [a.error for a in result.attempts] == [REASON, None]
    assert result.value == "b"


def test_the_graph_and_the_agent_agree_on_unjudged_rounds() -> None:
    answers = ["a", "xa", "d", "xb", "good"]
    options: dict[str, Any] = {"max_iterations": 4, "on_evaluator_error": "skip", "patience": 2}
    from_graph = refine(ScriptedChatModel(replies=answers), TASK, Grader(), **options)
    from_agent, _ = agent_result(answers, strategy="explore", **options)
    graph_explore = refine(
        ScriptedChatModel(replies=answers), TASK, Grader(), strategy="explore", **options
    )
    assert shape(from_agent) == shape(graph_explore)
    assert from_graph.stop_reason == "target_reached"


def test_the_command_line_marks_unjudged_rounds_and_the_report_too(
    cli: Any, openai_server: Any, tmp_path: Path
) -> None:
    drafts = [iter(["draft one", "two"])]

    def script(body: dict[str, Any]) -> str:
        if is_judge(body):  # the first draft's judgment is never readable
            return "no idea" if "draft one" in rated_text(body) else judge_json(0.6)
        return next(drafts[0], "draft one")

    server = openai_server(script)
    base = ["--model", "scripted", "--base-url", server.base_url, "--max-iterations", "1"]
    run = cli("run", TASK, *base, "--on-evaluator-error", "skip", "--criterion", "Be brief")
    assert run.code == 0, run.err
    first = next(line for line in run.out.splitlines() if line.startswith("round  0"))
    assert "score -" in first and "unjudged" in first and "could not be read" in first
    judge_prompts = [last_user_text(b) for b in server.requests if is_judge(b)]
    assert all("# Criteria\n- Be brief" in prompt for prompt in judge_prompts)
    assert len(judge_prompts) == 3  # skip: no more judgments of the unreadable one

    tasks, out = tmp_path / "tasks.jsonl", tmp_path / "out.jsonl"
    tasks.write_text(json.dumps({"id": "a", "task": TASK, "on_evaluator_error": "skip"}) + "\n")
    drafts[0] = iter(["draft one", "two"])  # the batch starts over: one round unjudged
    assert cli("batch", str(tasks), *base, "--out", str(out)).code == 0
    row = json.loads(out.read_text().splitlines()[0])
    assert row["attempts"][0]["error"].startswith("the judge's reply could not be read")
    html = tmp_path / "report.html"
    assert cli("report", str(out), "--html", str(html)).code == 0
    assert '<td class="verdict-unjudged">unjudged</td>' in html.read_text()


def test_among_candidates_the_best_judged_one_is_kept() -> None:
    generator = ScriptedChatModel(replies=["xa", "b", "xc"])
    result = refine(
        generator, TASK, Grader(), candidates=3, max_iterations=0, on_evaluator_error="skip"
    )
    attempt = result.attempts[0]
    assert (attempt.response, attempt.score, attempt.error) == ("b", 0.4, None)
    assert [c.evaluation is None for c in attempt.candidates] == [True, False, True]


def test_when_no_candidate_could_be_judged_the_attempt_is_unjudged() -> None:
    generator = ScriptedChatModel(replies=["xa", "xc"])
    result = refine(
        generator, TASK, Grader(), candidates=2, max_iterations=0, on_evaluator_error="skip"
    )
    assert (result.attempts[0].score, result.attempts[0].error) == (None, REASON)


def test_a_confirmation_that_cannot_be_made_leaves_the_first_judgment_standing() -> None:
    calls: list[str] = []

    def grader(response: str, state: Any) -> Evaluation:
        calls.append(response)
        if len(calls) > 1:  # the confirming judgment
            raise Unjudged(REASON)
        return Evaluation(score=0.95)

    result = refine(
        ScriptedChatModel(replies=["a"]),
        TASK,
        grader,
        confirm_pass=True,
        on_evaluator_error="skip",
    )
    assert result.stop_reason == "target_reached" and result.score == 0.95
    first = result.attempts[0].evaluation
    assert first is not None and first.details["confirmation"] == f"not made: {REASON}"


def test_a_confirmation_meets_on_evaluator_error_as_any_judgment() -> None:
    calls: list[str] = []

    def grader(response: str, state: Any) -> Evaluation:
        calls.append(response)
        if len(calls) == 2:  # the confirming judgment cannot be made the first time
            raise Unjudged(REASON)
        return Evaluation(score=0.95 if len(calls) == 1 else 0.3, feedback="again")

    result = refine(
        ScriptedChatModel(replies=["a"]), TASK, grader, confirm_pass=True, max_iterations=0
    )
    assert calls == ["a", "a", "a"]  # retried: the second judgment disagrees
    first = result.attempts[0].evaluation
    assert first is not None and first.score == 0.3 and "first_judgment" in first.details
    with pytest.raises(Unjudged, match=REASON):
        calls.clear()
        refine(
            ScriptedChatModel(replies=["a"]),
            TASK,
            grader,
            confirm_pass=True,
            on_evaluator_error="raise",
        )

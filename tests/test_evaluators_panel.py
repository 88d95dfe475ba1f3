"""`evaluators.panel`: a jury judging concurrently; a judge that fails on the provider left out."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import httpx
import openai
import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from pydantic import BaseModel

from langgraph_refine import Budget, Evaluation, evaluators, refine
from tests.fakes import AgentModel, ScriptedChatModel, call_tool, judge_reply, lookup

STATE = {"task": "Say when the Eiffel tower was built."}


def fixed(score: float, verdict: Any = None, feedback: str = "") -> Any:
    def judge(response: str, state: Any) -> Evaluation:
        return Evaluation(score=score, verdict=verdict, feedback=feedback)

    return judge


def provider_down(response: str, state: Any) -> Evaluation:
    request = httpx.Request("POST", "https://api.example/v1/chat/completions")
    raise openai.InternalServerError(
        "server overloaded", response=httpx.Response(503, request=request), body=None
    )


def connection_lost(response: str, state: Any) -> Evaluation:
    raise ConnectionError("connection reset by peer")


@pytest.mark.parametrize(
    ("rule", "score", "verdict"),
    [("mean", 0.6, "FAIL"), ("majority", 0.6, "PASS"), ("min", 0.2, "FAIL")],
)
def test_rules_decide_score_and_verdict(rule: Any, score: float, verdict: str) -> None:
    jury = evaluators.panel(fixed(0.9, "PASS"), fixed(0.7, "PASS"), fixed(0.2, "FAIL"), rule=rule)
    result = jury.evaluate("1889", STATE)
    assert round(result.score, 6) == score and result.verdict == verdict


def test_majority_without_a_majority_needs_improvement_and_min_takes_the_worst() -> None:
    split = evaluators.panel(fixed(0.9, "PASS"), fixed(0.3, "FAIL"), rule="majority")
    assert split.evaluate("x", STATE).verdict == "NEEDS_IMPROVEMENT"
    strict = evaluators.panel(fixed(0.9, "PASS"), fixed(0.6, "NEEDS_IMPROVEMENT"), rule="min")
    assert strict.evaluate("x", STATE).verdict == "NEEDS_IMPROVEMENT"
    unvoiced = evaluators.panel(fixed(0.9), fixed(0.5), rule="majority")
    assert unvoiced.evaluate("x", STATE).verdict is None


def test_each_members_feedback_is_labelled_with_its_name() -> None:
    def accuracy(response: str, state: Any) -> Evaluation:
        return Evaluation(score=0.5, verdict="NEEDS_IMPROVEMENT", feedback="give the year")

    result = evaluators.panel(accuracy, evaluators.word_count(1, 3)).evaluate("It was 1889", STATE)
    lines = result.feedback.splitlines()
    assert lines[0] == "[accuracy] score 0.50 (NEEDS_IMPROVEMENT): give the year"
    assert lines[1].startswith("[word_count] score")
    assert set(result.details["scores"]) == {"accuracy", "word_count"}


@pytest.mark.parametrize("failing", [provider_down, connection_lost])
def test_a_provider_failure_is_left_out_never_a_fail(failing: Any) -> None:
    jury = evaluators.panel(fixed(0.8, "PASS", "fine"), failing, rule="min")
    for result in (jury.evaluate("x", STATE), asyncio.run(jury.aevaluate("x", STATE))):
        assert (result.score, result.verdict) == (0.8, "PASS")
        assert failing.__name__ in result.details["left_out"]
        note = result.feedback.splitlines()[-1]
        assert note.startswith(f"[{failing.__name__}] left out: it failed with ")
        assert "the panel decided without it" in note


def test_the_http_status_is_named_when_a_member_is_left_out() -> None:
    result = evaluators.panel(fixed(0.5), provider_down).evaluate("x", STATE)
    assert "InternalServerError (HTTP 503)" in result.details["left_out"]["provider_down"]


def test_no_member_able_to_judge_leaves_the_response_unjudged() -> None:
    jury = evaluators.panel(provider_down, connection_lost)
    with pytest.raises(
        evaluators.Unjudged, match=r"no member of the panel could judge \(2 of them\)"
    ):
        jury.evaluate("x", STATE)


def test_a_member_that_cannot_judge_is_left_out() -> None:
    def cannot(response: str, state: Any) -> float:
        raise evaluators.Unjudged("no grader today")

    result = evaluators.panel(cannot, lambda response, state: 0.8).evaluate("x", STATE)
    assert result.score == 0.8 and "no grader today" in result.details["left_out"]["cannot"]


def test_a_bug_in_a_member_is_raised_not_left_out() -> None:
    def broken(response: str, state: Any) -> Evaluation:
        raise KeyError("typo")

    with pytest.raises(KeyError):
        evaluators.panel(fixed(0.9), broken).evaluate("x", STATE)


def test_members_run_concurrently_sync_and_async() -> None:
    # Each member waits until the other has started: run one after the other, they
    # would never finish.
    barrier = threading.Barrier(2, timeout=5)

    def member(response: str, state: Any) -> float:
        barrier.wait()
        return 0.5

    assert evaluators.panel(member, member).evaluate("x", STATE).score == 0.5
    started: list[asyncio.Event] = []

    async def async_member(response: str, state: Any) -> float:
        mine = asyncio.Event()
        started.append(mine)
        while len(started) < 2:
            await asyncio.sleep(0.001)
        return 0.5

    async def run() -> float:
        return (await evaluators.panel(async_member, async_member).aevaluate("x", STATE)).score

    assert asyncio.run(asyncio.wait_for(run(), 5)) == 0.5


def test_a_panel_of_judges_in_a_loop_counts_every_judge_call() -> None:
    first = ScriptedChatModel(replies=[judge_reply(0.9, "PASS", "good")])
    second = ScriptedChatModel(replies=[judge_reply(0.8, "PASS", "fine")])
    result = refine(
        ScriptedChatModel(replies=["1889"]),
        STATE["task"],
        evaluators.panel(first, second, rule="majority"),
        budget=Budget(max_calls=10),
    )
    assert result.stop_reason == "passed" and result.usage.calls == 3
    assert len(first.calls) == len(second.calls) == 1


def test_bad_panels_are_refused() -> None:
    with pytest.raises(ValueError, match="panel\\(\\) rule must be one of 'mean', 'majority'"):
        evaluators.panel(fixed(1.0), fixed(1.0), rule="vote")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="needs at least two evaluators, got 1"):
        evaluators.panel(fixed(1.0))
    with pytest.raises(ValueError, match="panel\\(\\) member 2 must be callable"):
        evaluators.panel(fixed(1.0), 42)


class Grade(BaseModel):
    """The structured response an agent judge gives."""

    score: float
    verdict: str
    feedback: str


def grade(score: float, verdict: str, feedback: str, call_id: str = "g1") -> AIMessage:
    args = {"score": score, "verdict": verdict, "feedback": feedback}
    return AIMessage("", tool_calls=[{"name": "Grade", "args": args, "id": call_id}])


def test_an_agent_with_tools_judges_and_its_model_calls_count() -> None:
    model = AgentModel(replies=[call_tool("eiffel tower", "c1"), grade(0.95, "PASS", "checked")])
    judge = create_agent(model, [lookup], response_format=Grade)
    result = refine(
        lambda state: "It was built in 1889.", STATE["task"], judge, budget=Budget(max_calls=9)
    )
    assert (result.score, result.verdict, result.feedback) == (0.95, "PASS", "checked")
    # One generation, and the agent's two model calls (tool call, then the grade).
    assert result.usage.calls == 3
    asked = model.calls[0]
    assert isinstance(asked[-1], HumanMessage)
    assert STATE["task"] in asked[-1].text and "It was built in 1889." in asked[-1].text
    assert "<response_to_rate>" in asked[-1].text


def test_an_agent_without_a_response_format_is_read_from_its_last_message() -> None:
    model = AgentModel(replies=['{"score": 7, "verdict": "NEEDS_IMPROVEMENT", "feedback": "why"}'])
    ev = evaluators.RunnableEvaluator(create_agent(model, [lookup]), name="fact_checker")
    result = ev.evaluate("1889", STATE)
    assert (result.score, result.verdict, result.feedback) == (0.7, "NEEDS_IMPROVEMENT", "why")
    assert result.details["scale"] == "0-10"


def test_an_agent_that_gives_no_evaluation_is_asked_again_then_leaves_it_unjudged() -> None:
    # As an unreadable llm_judge reply: asked once more (told why), then unjudged.
    model = AgentModel(replies=["I like it."])
    agent = evaluators.RunnableEvaluator(create_agent(model, [lookup]), name="fact_checker")
    with pytest.raises(evaluators.Unjudged) as unjudged:
        agent.evaluate("x", STATE)
    assert "'fact_checker' gave no readable evaluation (2 tries)" in str(unjudged.value)
    assert "response_format" in str(unjudged.value)
    assert len(model.calls) == 2 and "could not be read" in model.calls[1][-1].text
    # Read on the second asking: the evaluation counts, and says what went wrong first.
    again = AgentModel(replies=["I like it.", grade(0.8, "PASS", "fine")])
    judge = evaluators.RunnableEvaluator(create_agent(again, [lookup], response_format=Grade))
    result = asyncio.run(judge.aevaluate("x", STATE))
    assert (result.score, result.verdict) == (0.8, "PASS") and result.details["judge_errors"]
    with pytest.raises(ValueError, match="gave no evaluation: its output has no structured_resp"):
        agent.read({"messages": []})


def test_a_loop_with_an_unreadable_agent_judge_runs_on() -> None:
    agent = create_agent(AgentModel(replies=["I like it."]), [lookup], name="vague")
    result = refine(lambda state: "It was built in 1889.", STATE["task"], agent, max_iterations=1)
    assert result.score_history == [] and result.stop_reason == "max_iterations"
    assert all("gave no readable evaluation" in str(a.error) for a in result.attempts)


def test_an_agent_judge_sits_on_a_panel_beside_an_llm_judge() -> None:
    agent = create_agent(
        AgentModel(replies=[grade(0.6, "NEEDS_IMPROVEMENT", "cite it")]), [lookup],
        response_format=Grade, name="fact_checker",
    )  # fmt: skip
    jury = evaluators.panel(agent, ScriptedChatModel(replies=[judge_reply(1.0, "PASS", "ok")]))
    result = asyncio.run(jury.aevaluate("1889", STATE))
    assert result.details["scores"] == {"fact_checker": 0.6, "llm_judge": 1.0}
    assert result.verdict == "NEEDS_IMPROVEMENT"


def test_the_spec_language_has_a_panel_form() -> None:
    from langgraph_refine._calls._specs import SpecError, parse_spec
    from langgraph_refine.evaluators._from_specs import build_evaluator

    spec = parse_spec("panel-majority:words:1-3; contains:owl,lamp ;regex:owl")
    assert spec.kind == "panel" and spec.argument[0] == "majority"
    assert [m.text for m in spec.argument[1]] == ["words:1-3", "contains:owl,lamp", "regex:owl"]
    jury = build_evaluator(spec, lambda: ScriptedChatModel())
    result = jury.evaluate("an owl", STATE)
    assert result.details["rule"] == "majority"
    assert set(result.details["scores"]) == {"word_count", "contains_all", "matches_regex"}
    judged = build_evaluator(
        parse_spec("panel:judge;words:1-3"),
        lambda: ScriptedChatModel(replies=[judge_reply(0.9, "PASS", "ok")]),
    )
    assert judged.evaluate("an owl", STATE).details["scores"]["llm_judge"] == 0.9
    with pytest.raises(SpecError, match="unknown panel rule 'vote'; use panel-mean:"):
        parse_spec("panel-vote:judge;words:1-3")
    with pytest.raises(SpecError, match="a panel needs at least two specs separated by ';'"):
        parse_spec("panel:judge")
    with pytest.raises(SpecError, match="is refused: a run may not ask for checks that read"):
        parse_spec("panel:judge;python-tests:tests.py", allow_files=False)


def test_a_run_context_may_ask_for_a_panel() -> None:
    from langgraph_refine import create_refine_graph

    graph = create_refine_graph(
        ScriptedChatModel(replies=["an owl and a lamp"]), fixed(0.1), max_iterations=0
    ).compile()
    events = list(
        graph.stream(
            {"task": "Use owl and lamp."},
            context={"evaluator": "panel-min:contains:owl,lamp;words:1-3"},
            stream_mode="custom",
        )
    )
    rounds = [e for e in events if e["type"] == "round"]
    # The lowest member's score: five words against 1-3.
    assert round(rounds[0]["score"], 3) == 0.333
    assert rounds[0]["feedback"].startswith("[contains_all] score 1.00")

"""A middleware holds configuration only: what a run resolves belongs to that run.

`RefineMiddleware()` without an evaluator judges with the agent's own model. That model
is the run's: one instance shared by two agents judges each with its own model, and a
review paused by one agent resumes in a fresh agent built on the same checkpointer (as a
server builds one per run), with every kind of answer.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from langgraph_refine import RefineMiddleware
from tests.fakes import AgentModel, judge_reply

TASK = "Describe the Eiffel Tower."


def ask() -> dict[str, Any]:
    return {"messages": [HumanMessage(TASK)]}


def test_one_middleware_shared_by_two_agents_judges_each_with_its_own_model() -> None:
    refine = RefineMiddleware(max_iterations=1, target_score=0.9)
    first = AgentModel(replies=["first answer", judge_reply(0.95, feedback="first judge")])
    second = AgentModel(
        replies=[
            "second answer",
            judge_reply(0.3, feedback="second judge"),
            "second, better",
            judge_reply(0.92, feedback="second judge again"),
        ]
    )
    first_agent = create_agent(first, tools=[], middleware=[refine])
    second_agent = create_agent(second, tools=[], middleware=[refine])

    one = refine.result(first_agent.invoke(ask()))
    two = refine.result(second_agent.invoke(ask()))

    assert (one.value, one.score, one.feedback) == ("first answer", 0.95, "first judge")
    assert [a.score for a in two.attempts] == [0.3, 0.92]
    assert two.feedback == "second judge again"
    # Each model answered and judged its own agent's answers, nothing else.
    assert len(first.calls) == 2
    assert len(second.calls) == 4
    assert "second answer" in second.calls[1][-1].text  # the judge's prompt
    # Running the first agent again still judges with its own model.
    first_again = AgentModel(replies=["again", judge_reply(0.91)])
    again = create_agent(first_again, tools=[], middleware=[refine])
    assert refine.result(again.invoke(ask())).score == 0.91
    assert len(second.calls) == 4


def paused_thread(saver: InMemorySaver, config: Any) -> None:
    """A run by one agent, paused for the final review: "a" scored 0.4, "b" 0.6."""
    model = AgentModel(replies=["a", judge_reply(0.4), "b", judge_reply(0.6)])
    agent = create_agent(model, tools=[], middleware=[reviewed()], checkpointer=saver)
    out = agent.invoke(ask(), config)
    assert out["__interrupt__"][0].value["response"] == "b"


def reviewed() -> RefineMiddleware:
    return RefineMiddleware(human_review="final", max_iterations=1, target_score=0.9)


def fresh_agent(
    saver: InMemorySaver, replies: list[str]
) -> tuple[Any, AgentModel, RefineMiddleware]:
    """Another agent, built anew on the same checkpointer, as a server builds one per run."""
    model = AgentModel(replies=replies or ["(no call expected)"])
    middleware = reviewed()
    return (
        create_agent(model, tools=[], middleware=[middleware], checkpointer=saver),
        model,
        middleware,
    )


EDIT = {"action": "edit", "response": "edited"}
LC_EDIT = {
    "decisions": [
        {"type": "edit", "edited_action": {"name": "refine", "args": {"response": "edited"}}}
    ]
}

RESUMED: dict[str, tuple[Any, list[str], str, str, float | None, int]] = {
    # answer, the fresh model's replies, stop reason, value, score, calls made
    "approve": ({"action": "approve"}, [], "approved", "b", 0.6, 0),
    "reject": ({"action": "reject"}, [], "rejected", "b", 0.6, 0),
    "edit": (EDIT, [judge_reply(0.8)], "edited", "edited", 0.8, 1),
    "LangChain approve": ({"decisions": [{"type": "approve"}]}, [], "approved", "b", 0.6, 0),
    "LangChain reject": ({"decisions": [{"type": "reject"}]}, [], "rejected", "b", 0.6, 0),
    "LangChain edit": (LC_EDIT, [judge_reply(0.8)], "edited", "edited", 0.8, 1),
}


@pytest.mark.parametrize("case", list(RESUMED))
def test_a_review_resumes_in_a_fresh_agent_judged_by_the_agents_model(case: str) -> None:
    answer, replies, reason, value, score, calls = RESUMED[case]
    saver, config = InMemorySaver(), {"configurable": {"thread_id": case}}
    paused_thread(saver, config)

    agent, model, middleware = fresh_agent(saver, replies)
    out = agent.invoke(Command(resume=answer), config)

    result = middleware.result(out)
    assert (result.stop_reason, result.value, result.score) == (reason, value, score)
    assert len(model.calls) == calls
    assert out["messages"][-1].text == value
    assert agent.get_state(config).next == ()
    if calls:  # the fresh agent's model judged the reviewer's text
        assert "edited" in model.calls[0][-1].text


@pytest.mark.parametrize(
    "revise",
    [
        {"action": "revise", "feedback": "shorter"},
        {"decisions": [{"type": "reject", "message": "shorter"}]},
    ],
)
def test_a_revise_resumes_in_fresh_agents_and_the_next_review_shows_the_revision(
    revise: Any,
) -> None:
    saver, config = InMemorySaver(), {"configurable": {"thread_id": "revise"}}
    paused_thread(saver, config)

    agent, model, _ = fresh_agent(saver, ["c", judge_reply(0.6)])
    out = agent.invoke(Command(resume=revise), config)
    assert len(model.calls) == 2 and "shorter" in model.calls[0][-1].text
    payload = out["__interrupt__"][0].value
    # The revision ties with the best: the reviewer's request outranks the tie.
    assert (payload["response"], payload["attempt"], payload["score"]) == ("c", 2, 0.6)
    assert (payload["best_attempt"], payload["best_score"]) == (1, 0.6)

    agent, model, middleware = fresh_agent(saver, [])
    result = middleware.result(agent.invoke(Command(resume={"action": "approve"}), config))
    assert (result.stop_reason, result.value, result.best_index) == ("approved", "c", 2)
    assert result.attempts[2].move == "revise" and result.attempts[2].parent == 1
    assert len(model.calls) == 0


async def test_an_edit_resumes_in_a_fresh_agent_async() -> None:
    saver, config = InMemorySaver(), {"configurable": {"thread_id": "async"}}
    paused_thread(saver, config)
    agent, model, middleware = fresh_agent(saver, [judge_reply(0.7)])
    out = await agent.ainvoke(Command(resume=EDIT), config)
    result = middleware.result(out)
    assert (result.stop_reason, result.value, result.score) == ("edited", "edited", 0.7)
    assert len(model.calls) == 1


def test_a_pairwise_end_after_a_review_compares_with_the_fresh_agents_model() -> None:
    saver, config = InMemorySaver(), {"configurable": {"thread_id": "pairwise"}}
    scores = {"a": 0.5, "b": 0.5}

    def middleware() -> RefineMiddleware:
        return RefineMiddleware(
            lambda response, state: scores[response],
            human_review="every_round",
            select="pairwise",
            max_iterations=1,
            patience=None,
        )

    first = create_agent(
        AgentModel(replies=["a", "b"]), tools=[], middleware=[middleware()], checkpointer=saver
    )
    first.invoke(ask(), config)
    paused = first.invoke(Command(resume={"action": "continue"}), config)
    assert paused["__interrupt__"][0].value["stop_reason"] == "max_iterations"

    # The comparer is the agent's own model: the fresh agent's, which compares both ways.
    model = AgentModel(replies=["second", "first"])
    fresh = middleware()
    agent = create_agent(model, tools=[], middleware=[fresh], checkpointer=saver)
    result = fresh.result(agent.invoke(Command(resume={"action": "continue"}), config))
    assert len(model.calls) == 2
    selection = result.metadata["selection"]
    assert selection["method"] == "pairwise" and selection["chosen"] == 1
    assert (result.stop_reason, result.value) == ("max_iterations", "b")

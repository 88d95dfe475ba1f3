"""The graph and the agent run the same round: same attempts, stop reasons and result.

Both drive `_round.evaluate_round`; for the same scripted answers and evaluations they
must agree on every attempt (index, response, parent, move, score, verdict), the stop
reason and the result, over every stop reason and strategy, sync and async.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore
from langgraph.types import Command

from langgraph_refine import (
    Budget,
    Evaluation,
    RefineMiddleware,
    RefineResult,
    create_refine_graph,
)
from tests.fakes import AgentModel

TASK = "Describe the Eiffel Tower."

SCORES = {"a": 0.2, "b": 0.5, "c": 0.5, "d": 0.5, "e": 0.95, "f": 0.4, "g": 0.3}
"""Each scripted answer's score; "p" passes outright."""


def judge(response: str, state: Any) -> Evaluation:
    if response == "p":
        return Evaluation(score=0.6, verdict="PASS", feedback="fine")
    return Evaluation(score=SCORES[response], verdict="FAIL", feedback=f"improve {response}")


def shape(result: RefineResult) -> dict[str, Any]:
    return {
        "attempts": [
            (a.index, a.response, a.parent, a.move, a.score, a.evaluation and a.evaluation.verdict)
            for a in result.attempts
        ],
        "stop_reason": result.stop_reason,
        "value": result.value,
        "score": result.score,
    }


CASES: dict[str, tuple[list[str], dict[str, Any]]] = {
    "passed": (["a", "p"], {}),
    "target_reached": (["a", "b", "e"], {}),
    "max_iterations": (["a", "b", "f", "e"], {"max_iterations": 2, "patience": None}),
    "plateau": (["b", "c", "d", "e"], {"patience": 2}),
    "budget": (["a", "b", "f", "e"], {"budget": Budget(max_calls=2), "patience": None}),
    "confirmed": (["e", "a", "e", "e"], {"confirm_pass": True}),
}


def scripted_judge(case: str) -> Any:
    """The evaluator; with `confirm_pass`, the first confirmation disagrees."""
    if case != "confirmed":
        return judge
    calls: list[str] = []

    def judged(response: str, state: Any) -> Evaluation:
        calls.append(response)
        if len(calls) == 2:  # the confirmation of the first 0.95: it disagrees
            return Evaluation(score=0.3, verdict="FAIL", feedback="not really")
        return judge(response, state)

    return judged


def graph_run(answers: list[str], case: str, strategy: str, options: dict[str, Any]) -> Any:
    replies = iter(answers)
    graph = create_refine_graph(
        lambda state: next(replies),
        scripted_judge(case),
        strategy=strategy,  # type: ignore[arg-type]
        target_score=0.9,
        **options,
    ).compile(store=InMemoryStore(), checkpointer=InMemorySaver())
    return graph


CONFIG: Any = {"configurable": {"thread_id": "t"}}


def agent_run(answers: list[str], case: str, strategy: str, options: dict[str, Any]) -> Any:
    middleware = RefineMiddleware(
        scripted_judge(case),
        strategy=strategy,  # type: ignore[arg-type]
        target_score=0.9,
        **options,
    )
    agent = create_agent(AgentModel(replies=answers), tools=[], middleware=[middleware])
    return agent, middleware


@pytest.mark.parametrize("strategy", ["chain", "explore", "sample"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_graph_and_agent_agree(case: str, strategy: str) -> None:
    answers, options = CASES[case]
    graph = graph_run(answers, case, strategy, options)
    graph.invoke({"task": TASK}, CONFIG)
    from_graph = RefineResult.from_state(graph.get_state(CONFIG).values)
    agent, middleware = agent_run(answers, case, strategy, options)
    from_agent = middleware.result(agent.invoke({"messages": [HumanMessage(TASK)]}))
    assert shape(from_agent) == shape(from_graph)
    expected = {"budget": "budget_exhausted", "confirmed": "target_reached"}.get(case, case)
    assert from_graph.stop_reason == expected


@pytest.mark.parametrize("strategy", ["chain", "explore"])
async def test_graph_and_agent_agree_async(strategy: str) -> None:
    answers, options = CASES["confirmed"]
    graph = graph_run(answers, "confirmed", strategy, options)
    await graph.ainvoke({"task": TASK}, CONFIG)
    from_graph = RefineResult.from_state((await graph.aget_state(CONFIG)).values)
    agent, middleware = agent_run(answers, "confirmed", strategy, options)
    from_agent = middleware.result(await agent.ainvoke({"messages": [HumanMessage(TASK)]}))
    assert shape(from_agent) == shape(from_graph)
    # The agent now confirms a pass too: the first 0.95 was judged again and refused.
    first = from_agent.attempts[0].evaluation
    assert first is not None and "first_judgment" in first.details


def test_a_reviewers_edit_ends_both_loops_the_same_way() -> None:
    """An edit is a pending attempt with `move="edit"`; its evaluation stops with "edited"."""
    answers, options = ["a", "b", "f", "e"], {"human_review": "final", "max_iterations": 1}
    replies = iter(answers)
    graph = create_refine_graph(
        lambda state: next(replies),
        judge,
        strategy="chain",
        target_score=0.9,
        **options,
    ).compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "g"}}
    graph.invoke({"task": TASK}, config)
    graph.invoke(Command(resume={"action": "edit", "response": "e"}), config)
    from_graph = RefineResult.from_state(graph.get_state(config).values)

    middleware = RefineMiddleware(judge, strategy="chain", target_score=0.9, **options)
    agent = create_agent(
        AgentModel(replies=answers), tools=[], middleware=[middleware], checkpointer=InMemorySaver()
    )
    agent_config = {"configurable": {"thread_id": "a"}}
    agent.invoke({"messages": [HumanMessage(TASK)]}, agent_config)
    out = agent.invoke(Command(resume={"action": "edit", "response": "e"}), agent_config)
    from_agent = middleware.result(out)
    assert shape(from_agent) == shape(from_graph)
    assert from_graph.stop_reason == "edited"
    assert from_graph.attempts[-1].move == "edit"
    assert from_graph.score == 0.95

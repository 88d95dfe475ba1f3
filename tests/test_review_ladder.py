"""A reviewer's `revise` climbs the ladder as any round does (graph and agent alike).

The round decides the next rung whenever a ladder runs, also when the loop stops for a
review: a revision after a round that did not raise the best goes to the next rung.
"""

from __future__ import annotations

from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from langgraph_refine import RefineMiddleware, RefineResult, create_refine_graph
from tests.fakes import AgentModel
from tests.test_ladder import Named


class NamedAgent(Named, AgentModel):
    """A named scripted model an agent can bind tools to."""


def weak(response: str, state: Any) -> float:
    return 0.3  # nothing raises the best: every round stalls


def revise_four_times(graph: Any, config: Any, first: Any) -> dict[str, Any]:
    state = graph.invoke(first, config)
    for _ in range(4):
        state = graph.invoke(Command(resume={"action": "revise", "feedback": "More."}), config)
    return state


def test_a_reviewers_revisions_climb_the_graphs_ladder() -> None:
    cheap, strong = Named(name_="cheap", replies=["c"]), Named(name_="strong", replies=["s"])
    graph = create_refine_graph(
        [cheap, strong], weak, human_review="final", max_iterations=0, strategy="chain"
    ).compile(checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "revise"}}
    revise_four_times(graph, config, {"task": "t"})
    result = RefineResult.from_state(graph.get_state(config).values)
    # Attempt 0 and the first revision on the cheap rung (attempt 0 raised the best, as
    # any first round does); the revisions after a stalled round on the strong one.
    assert [a.rung for a in result.attempts] == [0, 0, 1, 1, 1]
    assert [a.move for a in result.attempts][1:] == ["revise"] * 4
    assert len(strong.calls) == 3


def test_a_reviewers_revisions_climb_the_agents_ladder() -> None:
    cheap = NamedAgent(name_="cheap", replies=["c"])
    strong = NamedAgent(name_="strong", replies=["s"])
    middleware = RefineMiddleware(
        weak, models=[cheap, strong], human_review="final", max_iterations=0
    )
    agent = create_agent(
        AgentModel(replies=["own"]), tools=[], middleware=[middleware], checkpointer=InMemorySaver()
    )
    config: Any = {"configurable": {"thread_id": "revise"}}
    revise_four_times(agent, config, {"messages": [HumanMessage("t")]})
    result = middleware.result(agent.get_state(config).values)
    assert [a.rung for a in result.attempts] == [0, 0, 1, 1, 1]
    assert [a.model for a in result.attempts] == ["test:cheap"] * 2 + ["test:strong"] * 3

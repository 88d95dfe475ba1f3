"""Generators that are graphs or runnables: a real `create_agent` agent as the generator."""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableLambda

from langgraph_refine import Budget, Evaluation, RefineError, refine
from tests.test_middleware import AgentModel, call_tool, lookup


def needs(word: str) -> Any:
    def evaluate(response: str, state: Any) -> Evaluation:
        ok = word in response
        return Evaluation(score=1.0 if ok else 0.2, feedback="" if ok else f"mention {word}")

    return evaluate


def test_a_create_agent_graph_is_a_generator() -> None:
    model = AgentModel(
        replies=[
            call_tool("Eiffel Tower", "c1"),
            AIMessage("It is in Paris."),
            call_tool("Eiffel Tower", "c2"),
            AIMessage("It is in Paris and was built in 1889."),
        ]
    )
    agent = create_agent(model, tools=[lookup])
    result = refine(agent, "Tell me about the Eiffel Tower.", needs("1889"), prompt_form="single")
    assert result.value == "It is in Paris and was built in 1889."
    assert result.stop_reason == "target_reached"
    assert result.usage.calls == 4  # two model calls inside the agent per generation
    # The refinement prompt reached the agent as its human message.
    third = model.calls[2]
    human = [m for m in third if isinstance(m, HumanMessage)]
    assert "mention 1889" in str(human[0].content)
    assert "It is in Paris." in str(human[0].content)


def test_the_budget_counts_the_model_calls_inside_the_agent() -> None:
    model = AgentModel(
        replies=[call_tool("x", "c1"), AIMessage("first"), call_tool("x", "c2"), AIMessage("2nd")]
    )
    agent = create_agent(model, tools=[lookup])
    result = refine(agent, "Task.", needs("never"), budget=Budget(max_calls=3), patience=None)
    # 2 calls for attempt 0; the third call (a tool call) is allowed, the fourth refused.
    assert result.usage.calls == 3
    assert result.stop_reason == "budget_exhausted"
    assert [a.response for a in result.attempts] == ["first"]


def test_an_agent_that_ends_on_a_tool_call_is_a_clear_error() -> None:
    stuck = RunnableLambda(lambda state: {"messages": [*state["messages"], call_tool("x", "c")]})
    with pytest.raises(RefineError, match="ended on a tool call on attempt 0"):
        refine(stuck, "Task.", needs("x"))


def test_a_graph_with_no_ai_message_is_a_clear_error() -> None:
    silent = RunnableLambda(lambda state: {"messages": state["messages"]})
    with pytest.raises(RefineError, match="no final AI message on attempt 0"):
        refine(silent, "Task.", needs("x"))


def test_a_plain_runnable_answering_with_an_ai_message() -> None:
    seen: list[Any] = []

    def answer(state: dict[str, Any]) -> AIMessage:
        seen.append(state)
        return AIMessage(f"answer {len(seen)}")

    result = refine(RunnableLambda(answer), "Task.", needs("2"), max_iterations=2)
    assert result.value == "answer 2"
    assert seen[0]["messages"][0].content == "Task."

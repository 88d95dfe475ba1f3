"""Generators that are graphs or runnables: a real `create_agent` agent, a chain, a lambda.

The agent's model is a scripted tool-calling fake; the tool really runs. The checks: the
refinement prompt reaches the agent as its human message, the answer is its last AI
message, every model call inside the agent counts against the budget, and a graph that
does not end on a final answer fails clearly.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import RunnableLambda
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph

from langgraph_refine import Budget, Evaluation, RefineError, refine
from tests.fakes import LOOKUPS, AgentModel, ScriptedChatModel, call_tool, lookup, scores

TASK = "Tell me about the Eiffel Tower."


@tool(return_direct=True)
def lookup_direct(topic: str) -> str:
    """Look up facts about a topic and answer with them directly."""
    return f"{topic}: built in 1889"


def mentions(word: str) -> Any:
    def evaluate(response: str, state: Any) -> Evaluation:
        if word in response:
            return Evaluation(score=1.0, feedback="good")
        return Evaluation(score=0.2, feedback=f"mention {word}")

    return evaluate


def tool_then_answer(rounds: int) -> AgentModel:
    """Each generation: one tool call, then an answer (two model calls)."""
    replies: list[Any] = []
    for i in range(rounds):
        replies += [call_tool(f"eiffel {i}", f"c{i}"), f"answer {i}"]
    return AgentModel(replies=replies)


# -- a create_agent agent as the generator ----------------------------------------------


def test_an_agent_generates_and_refines_with_its_tools() -> None:
    LOOKUPS.clear()
    model = AgentModel(
        replies=[
            call_tool("eiffel", "c1"),
            "It is a tower.",
            call_tool("eiffel city", "c2"),
            "It is a tower in Paris.",
        ]
    )
    agent = create_agent(model, tools=[lookup])
    result = refine(agent, TASK, mentions("Paris"), max_iterations=3)

    assert [a.response for a in result.attempts] == ["It is a tower.", "It is a tower in Paris."]
    assert result.value == "It is a tower in Paris."
    assert result.stop_reason == "target_reached"
    assert LOOKUPS == ["eiffel", "eiffel city"]
    # The first generation's human message is the task; the tool ran in between.
    first = model.calls[0]
    assert len(first) == 1 and isinstance(first[0], HumanMessage) and first[0].text == TASK
    assert isinstance(model.calls[1][-1], ToolMessage)
    # The refinement prompt reaches the agent as its (only) human message.
    second = model.calls[2]
    assert len(second) == 1 and isinstance(second[0], HumanMessage)
    assert TASK in second[0].text
    assert "It is a tower." in second[0].text
    assert "mention Paris" in second[0].text
    # Every model call inside the agent is counted, with its tokens.
    assert result.usage.calls == 4
    assert result.usage.total_tokens == 4 * 15
    assert [a.usage.calls for a in result.attempts] == [2, 2]


def test_the_budget_counts_the_agents_model_calls() -> None:
    model = tool_then_answer(5)
    agent = create_agent(model, tools=[lookup])
    result = refine(
        agent,
        TASK,
        scores(0.1),
        max_iterations=4,
        patience=None,
        budget=Budget(max_calls=4),
    )
    # Two model calls per generation: the budget allows exactly two generations.
    assert result.stop_reason == "budget_exhausted"
    assert [a.response for a in result.attempts] == ["answer 0", "answer 1"]
    assert len(model.calls) == 4
    assert result.usage.calls == 4


def test_the_budget_stops_a_call_inside_the_agent() -> None:
    model = tool_then_answer(5)
    agent = create_agent(model, tools=[lookup])
    result = refine(
        agent,
        TASK,
        scores(0.1),
        max_iterations=4,
        patience=None,
        budget=Budget(max_calls=3),
    )
    # The second generation's tool call was made (call 3); its answer (call 4) was refused.
    assert result.stop_reason == "budget_exhausted"
    assert [a.response for a in result.attempts] == ["answer 0"]
    assert len(model.calls) == 3
    assert result.usage.calls == 3
    assert result.value == "answer 0"


def test_an_agent_that_ends_on_a_tool_result_fails_naming_the_attempt() -> None:
    # A return_direct tool ends the agent on its ToolMessage: no final AI answer.
    model = AgentModel(
        replies=[
            AIMessage("", tool_calls=[{"name": "lookup_direct", "args": {"topic": "x"}, "id": "c"}])
        ]
    )
    agent = create_agent(model, tools=[lookup_direct])
    with pytest.raises(RefineError, match=r"attempt 0.*ToolMessage"):
        refine(agent, TASK, scores(0.1))


def ends_with(messages_per_round: list[list[BaseMessage]]) -> Any:
    """A compiled graph whose n-th run appends the n-th list of messages."""
    runs: list[int] = []

    def answer(state: MessagesState) -> dict[str, Any]:
        runs.append(1)
        return {"messages": messages_per_round[min(len(runs), len(messages_per_round)) - 1]}

    builder = StateGraph(MessagesState)
    builder.add_node("answer", answer)
    builder.add_edge(START, "answer")
    builder.add_edge("answer", END)
    return builder.compile()


def test_a_graph_that_ends_on_a_tool_call_fails_naming_the_attempt() -> None:
    graph = ends_with([[AIMessage("first")], [call_tool("eiffel", "c1")]])
    with pytest.raises(RefineError, match=r"tool call on attempt 1.*lookup"):
        refine(graph, TASK, scores(0.1), max_iterations=2, patience=None)


def test_a_graph_whose_last_message_is_not_an_ai_message_fails_naming_the_attempt() -> None:
    graph = ends_with([[AIMessage("first")], [AIMessage("second")], [HumanMessage("hm")]])
    with pytest.raises(RefineError, match=r"attempt 2.*HumanMessage"):
        refine(graph, TASK, scores(0.1), max_iterations=3, patience=None)


# -- plain runnables ------------------------------------------------------------------------


def test_a_runnable_lambda_is_a_generator() -> None:
    seen: list[Any] = []

    def answer(value: Any) -> AIMessage:
        seen.append(value)
        return AIMessage(f"draft {len(seen)}")

    result = refine(
        RunnableLambda(answer), TASK, scores(0.2, 0.95), max_iterations=2, patience=None
    )
    assert result.value == "draft 2"
    assert result.stop_reason == "target_reached"
    # It receives {"messages": [...]}: the task, then the refinement prompt.
    assert seen[0] == {"messages": [HumanMessage(TASK)]}
    refinement = seen[1]["messages"]
    assert len(refinement) == 1 and isinstance(refinement[0], HumanMessage)
    assert "draft 1" in refinement[0].text and TASK in refinement[0].text


def test_a_runnable_without_model_calls_counts_one_call_per_generation() -> None:
    # Like a plain callable: a generator invocation in which no model call is seen is
    # one call, so a call budget still bounds the loop.
    generator = RunnableLambda(lambda value: AIMessage("draft"))
    result = refine(
        generator, TASK, scores(0.1), max_iterations=5, patience=None, budget=Budget(max_calls=2)
    )
    assert result.stop_reason == "budget_exhausted"
    assert len(result.attempts) == 2
    assert result.usage.calls == 2


def test_a_prompt_and_model_chain_is_a_generator() -> None:
    model = ScriptedChatModel(replies=["first", "second"])
    chain = (
        ChatPromptTemplate.from_messages(
            [("system", "Answer briefly."), MessagesPlaceholder("messages")]
        )
        | model
    )
    result = refine(chain, TASK, scores(0.2, 0.95), max_iterations=2, patience=None)

    assert [a.response for a in result.attempts] == ["first", "second"]
    assert model.calls[0][0].type == "system"
    assert model.calls[0][1:] == [HumanMessage(TASK)]
    refinement = model.calls[1][1:]
    assert len(refinement) == 1 and "first" in refinement[0].text
    assert result.usage.calls == 2
    assert result.usage.total_tokens == 2 * 15


async def test_an_agent_generates_under_arefine_with_every_call_counted() -> None:
    from langgraph_refine import arefine

    model = tool_then_answer(3)
    agent = create_agent(model, tools=[lookup])
    result = await arefine(agent, TASK, scores(0.1, 0.3), max_iterations=1, patience=None)
    assert [a.response for a in result.attempts] == ["answer 0", "answer 1"]
    assert "answer 0" in model.calls[2][0].text
    assert result.usage.calls == 4

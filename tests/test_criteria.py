"""Criteria per request: a run's `criteria` reach every LLM judge it calls, beside its own.

In the graph's input (`criteria` beside `task`), a run's context, the options, the agent's
input state (beside `messages`) and on the command line (`--criterion`, a batch line's
`criteria`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage

from langgraph_refine import RefineMiddleware, create_refine_graph, refine
from langgraph_refine.evaluators import llm_judge
from tests.fakes import AgentModel, ScriptedChatModel, judge_reply

TASK = "Write a haiku about rain."


def criteria_section(judge: ScriptedChatModel) -> str:
    """The judge prompt's criteria section (empty without one)."""
    prompt = str(judge.calls[0][1].content)
    if "# Criteria" not in prompt:
        return ""
    return prompt.split("# Criteria\n", 1)[1].split("\n\n# ", 1)[0]


def test_the_inputs_criteria_are_added_to_the_judges_own() -> None:
    judge = ScriptedChatModel(replies=[judge_reply(0.95)])
    graph = create_refine_graph(
        ScriptedChatModel(replies=["drops"]), llm_judge(judge, criteria="Three lines")
    ).compile()
    graph.invoke({"task": TASK, "criteria": ["Mention thunder", "No rhyme"]})
    assert criteria_section(judge) == "Three lines\n- Mention thunder\n- No rhyme"


def test_a_runs_context_and_the_options_add_criteria_too() -> None:
    judge = ScriptedChatModel(replies=[judge_reply(0.95)])
    graph = create_refine_graph(
        ScriptedChatModel(replies=["drops"]), llm_judge(judge), criteria="Be calm"
    ).compile()
    graph.invoke({"task": TASK, "criteria": "Mention thunder"}, context={"criteria": ["Short"]})
    # The run's context replaces the graph's option; the request's come after.
    assert criteria_section(judge) == "- Short\n- Mention thunder"


def test_the_default_judge_gets_the_requests_criteria() -> None:
    model = ScriptedChatModel(replies=["drops", judge_reply(0.95)])
    result = refine(model, TASK, criteria=["Mention thunder"], max_iterations=0)
    assert result.score == 0.95
    assert "# Criteria\n- Mention thunder" in str(model.calls[1][1].content)


def test_criteria_of_the_wrong_type_are_refused_with_the_value() -> None:
    graph = create_refine_graph(ScriptedChatModel(), lambda r, s: 1.0).compile()
    with pytest.raises(ValueError, match=r"criteria must be a string or a list of strings, got 7"):
        graph.invoke({"task": TASK, "criteria": 7})
    with pytest.raises(ValueError, match="criteria must be a string or a list of strings"):
        refine(ScriptedChatModel(), TASK, lambda r, s: 1.0, criteria=[1, 2])  # type: ignore[list-item]


def test_a_callable_evaluator_sees_the_requests_criteria_in_state() -> None:
    seen: list[Any] = []

    def check(response: str, state: Any) -> float:
        seen.append(state.get("criteria"))
        return 1.0

    create_refine_graph(ScriptedChatModel(), check, criteria="A").compile().invoke(
        {"task": TASK, "criteria": "B"}
    )
    assert seen == [["A", "B"]]


def test_the_agents_input_criteria_reach_its_judge() -> None:
    judge = ScriptedChatModel(replies=[judge_reply(0.95)])
    middleware = RefineMiddleware(llm_judge(judge, criteria="Three lines"))
    agent = create_agent(AgentModel(replies=["drops"]), tools=[], middleware=[middleware])
    agent.invoke({"messages": [HumanMessage(TASK)], "criteria": ["Mention thunder"]})
    assert criteria_section(judge) == "Three lines\n- Mention thunder"


async def test_the_agents_default_judge_gets_them_async() -> None:
    model = AgentModel(replies=["drops", judge_reply(0.95)])
    middleware = RefineMiddleware(criteria="Be calm")
    agent = create_agent(model, tools=[], middleware=[middleware])
    await agent.ainvoke({"messages": [HumanMessage(TASK)], "criteria": "Mention thunder"})
    assert "# Criteria\n- Be calm\n- Mention thunder" in str(model.calls[1][1].content)


def test_a_batch_line_and_the_command_line_set_criteria(tmp_path: Path) -> None:
    from langgraph_refine.cli._shared import SharedFlags

    options = SharedFlags(loop={"criteria": ["Rhymes"]}, memory="all").options()
    assert options.graph_kwargs(lambda: ScriptedChatModel())["criteria"] == ("Rhymes",)
    line = options.override({"criteria": "Short"})
    assert line.settings["criteria"] == ("Short",) and line.run_context()["criteria"] == ["Short"]
    from langgraph_refine.cli._errors import CliError

    with pytest.raises(CliError, match=r"'criteria' must be a string or a list of strings"):
        options.override({"criteria": {"a": 1}})
    assert json.dumps(line.run_context())  # plain data for a server's context

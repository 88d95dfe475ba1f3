"""The `RefineResult` of a loop that ran as a node, read from the parent's checkpointer."""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.graph import START, StateGraph
from langgraph.types import Command
from typing_extensions import TypedDict

from langgraph_refine import RefineResult, create_refine_graph

SCORES = [0.4, 0.7, 0.95]


class Report(TypedDict):
    task: str
    response: str


def loop(**options: Any) -> Any:
    return create_refine_graph(
        lambda state: f"{state['task']} draft {len(state['attempts'])}",
        lambda response, state: SCORES[min(len(state["attempts"]), 2)],
        **options,
    ).compile()


def parent_graph(checkpointer: Any, **options: Any) -> Any:
    builder = StateGraph(Report)
    builder.add_node("writer", loop(**options))
    builder.add_edge(START, "writer")
    return builder.compile(checkpointer=checkpointer)


@pytest.mark.postgres
def test_from_node_reads_the_latest_run_with_its_attempts(
    checkpointer: Any, thread: dict[str, Any]
) -> None:
    parent = parent_graph(checkpointer)
    parent.invoke({"task": "first"}, thread)
    parent.invoke({"task": "second"}, thread)
    result = RefineResult.from_node(parent, thread, node="writer")
    assert result.value == "second draft 2"
    assert result.score_history == SCORES  # the delta-stored attempts, all of them
    assert [a.response for a in result.attempts] == [f"second draft {i}" for i in range(3)]
    assert result.stop_reason == "target_reached" and result.usage.calls == 3


async def test_afrom_node_and_a_paused_review(thread: dict[str, Any]) -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    parent = parent_graph(InMemorySaver(), human_review="final", max_iterations=1)
    await parent.ainvoke({"task": "t"}, thread)
    paused = await RefineResult.afrom_node(parent, thread, node="writer")
    assert paused.stop_reason is None and paused.score_history == [0.4, 0.7]
    await parent.ainvoke(Command(resume={"action": "approve"}), thread)
    done = await RefineResult.afrom_node(parent, thread, node="writer")
    assert (done.stop_reason, done.value) == ("approved", "t draft 1")


def test_from_node_names_what_is_missing(thread: dict[str, Any]) -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    parent = parent_graph(InMemorySaver())
    parent.invoke({"task": "t"}, thread)
    with pytest.raises(LookupError, match="no run of node 'refine' on thread"):
        RefineResult.from_node(parent, thread)


def test_from_state_refuses_raw_checkpoint_values(thread: dict[str, Any]) -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    parent = parent_graph(InMemorySaver())
    parent.invoke({"task": "t"}, thread)
    [task] = [t for s in parent.get_state_history(thread) for t in s.tasks if t.name == "writer"]
    raw = parent.checkpointer.get_tuple(task.state).checkpoint["channel_values"]
    with pytest.raises(ValueError, match=r"holds no 'attempts'.*graph.get_state\(config\)"):
        RefineResult.from_state(raw)
    with pytest.raises(ValueError, match="holds no 'attempts'"):
        RefineResult.from_state(loop().invoke({"task": "t"}))  # a graph's output


def test_from_node_returns_the_typed_output_refine_returns(thread: dict[str, Any]) -> None:
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import START, StateGraph
    from pydantic import BaseModel
    from typing_extensions import TypedDict

    from langgraph_refine import create_refine_graph

    class City(BaseModel):
        name: str

    class Parent(TypedDict):
        task: str
        response: str

    loop = create_refine_graph(lambda s: '{"name": "Oslo"}', lambda r, s: 1.0, output_schema=City)
    builder = StateGraph(Parent).add_node("writer", loop.compile()).add_edge(START, "writer")
    parent = builder.compile(checkpointer=InMemorySaver())
    parent.invoke({"task": "A city."}, thread)
    result = RefineResult.from_node(parent, thread, node="writer")
    assert result.output == City(name="Oslo")

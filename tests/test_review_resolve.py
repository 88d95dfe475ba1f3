"""A chat's "Mark as Resolved" on a review ends the loop with the best answer.

agent-chat-ui's Mark as Resolved resumes the paused thread with `Command(goto=END)` and no
resume value. LangGraph ignores that write (no graph has a channel for it) and runs the
paused review again; the review reads it as a `reject`: stop with the best answer, in the
graph and in the agent, whatever the checkpointer. Served in `tests/test_chat_server.py`.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from typing import Any, TypedDict

from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.constants import END, START
from langgraph.graph import StateGraph
from langgraph.types import Command

from langgraph_refine import Evaluation, RefineMiddleware, RefineResult, create_refine_graph
from langgraph_refine._loop._review_schema import RESOLVE_WRITE, _resolves, resolve_requested
from tests.fakes import AgentModel, ScriptedChatModel

TABLE = {"a": 0.6, "b": 0.4}
RESOLVE = Command(goto=END)  # what agent-chat-ui's Mark as Resolved sends


def judged(response: str, state: Any) -> Evaluation:
    return Evaluation(score=TABLE.get(response, 0.3), feedback="more")


def config() -> Any:
    return {"configurable": {"thread_id": str(uuid.uuid4())}}


def reviewed_graph(saver: Any) -> Any:
    model = ScriptedChatModel(replies=["a", "b"])
    graph = create_refine_graph(model, judged, human_review="final", max_iterations=1)
    return graph.compile(checkpointer=saver)


def reviewed_agent(saver: Any) -> Any:
    refine = RefineMiddleware(judged, human_review="final", max_iterations=1, patience=None)
    model = AgentModel(replies=["a", "b"])
    return create_agent(model, tools=[], middleware=[refine], checkpointer=saver)


def test_the_graphs_review_ends_with_the_best_answer_when_resolved(checkpointer: Any) -> None:
    graph, cfg = reviewed_graph(checkpointer), config()
    assert graph.invoke({"task": "Write a tagline."}, cfg)["__interrupt__"]
    graph.invoke(RESOLVE, cfg)
    state = graph.get_state(cfg)
    assert (state.next, state.interrupts) == ((), ())
    result = RefineResult.from_state(state.values)
    assert (result.value, result.stop_reason) == ("a", "rejected")


def test_the_agents_review_ends_with_the_best_answer_when_resolved(checkpointer: Any) -> None:
    agent, cfg = reviewed_agent(checkpointer), config()
    assert agent.invoke({"messages": [HumanMessage("Write a tagline.")]}, cfg)["__interrupt__"]
    agent.invoke(RESOLVE, cfg)
    state = agent.get_state(cfg)
    assert (state.next, state.interrupts) == ((), ())
    assert state.values["messages"][-1].text == "a"
    assert state.values["refine_stop_reason"] == "rejected"


def test_a_nested_loop_is_resolved_by_its_parents_command() -> None:
    class Parent(TypedDict, total=False):
        task: str
        response: str

    inner = create_refine_graph(
        ScriptedChatModel(replies=["a", "b"]), judged, human_review="final", max_iterations=1
    ).compile()
    parent = StateGraph(Parent)
    parent.add_node("loop", inner)
    parent.add_edge(START, "loop")
    graph, cfg = parent.compile(checkpointer=InMemorySaver()), config()
    assert graph.invoke({"task": "Write a tagline."}, cfg)["__interrupt__"]
    out = graph.invoke(RESOLVE, cfg)
    assert "__interrupt__" not in out and out["response"] == "a"


def test_an_answer_given_beside_a_resolve_wins() -> None:
    graph, cfg = reviewed_graph(InMemorySaver()), config()
    graph.invoke({"task": "Write a tagline."}, cfg)
    graph.invoke(Command(goto=END, resume={"action": "edit", "response": "mine"}), cfg)
    result = RefineResult.from_state(graph.get_state(cfg).values)
    assert (result.value, result.stop_reason) == ("mine", "edited")


def test_resuming_without_an_answer_still_pauses_again() -> None:
    graph, cfg = reviewed_graph(InMemorySaver()), config()
    graph.invoke({"task": "Write a tagline."}, cfg)
    assert graph.invoke(None, cfg)["__interrupt__"], "no answer and no resolve: ask again"


def test_the_resolve_write_is_the_one_langgraph_makes_of_goto_end() -> None:
    # Pins LangGraph's name for the write: if it changes, this says so first.
    saver = InMemorySaver()
    graph, cfg = reviewed_graph(saver), config()
    graph.invoke({"task": "Write a tagline."}, cfg)
    graph.invoke(RESOLVE, cfg)
    resolved = [
        c
        for c in saver.list(cfg)
        if any(ch == RESOLVE_WRITE for _, ch, _ in c.pending_writes or [])
    ]
    assert resolved and _resolves(resolved[0])
    assert resolve_requested() is False  # outside a run: nothing to read


def resolved_async(build: Any, first: dict[str, Any], saver_at: Any = None) -> Any:
    """The thread's state after an async run paused at review and a client's resolve.

    On an `AsyncSqliteSaver` at `saver_at`, else on an `InMemorySaver`.
    """
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    async def run() -> Any:
        opened = (
            AsyncSqliteSaver.from_conn_string(str(saver_at))
            if saver_at is not None
            else contextlib.nullcontext(InMemorySaver())
        )
        async with opened as saver:
            target, cfg = build(saver), config()
            await target.ainvoke(first, cfg)
            await target.ainvoke(RESOLVE, cfg)
            return await target.aget_state(cfg)

    return asyncio.run(run())


def test_an_async_agent_is_resolved_too() -> None:
    state = resolved_async(reviewed_agent, {"messages": [HumanMessage("Write a tagline.")]})
    assert state.interrupts == ()
    assert state.values["refine_stop_reason"] == "rejected"


def test_an_async_agent_on_an_async_saver_is_resolved(tmp_path: Any) -> None:
    asked = {"messages": [HumanMessage("Write a tagline.")]}
    state = resolved_async(reviewed_agent, asked, tmp_path / "a.sqlite")
    assert state.interrupts == ()
    assert state.values["refine_stop_reason"] == "rejected"


def test_an_async_graph_on_an_async_saver_is_resolved(tmp_path: Any) -> None:
    # The graph's review is a sync node: under `ainvoke` it runs in a worker thread,
    # where an async saver answers a sync read.
    state = resolved_async(reviewed_graph, {"task": "Write a tagline."}, tmp_path / "g.sqlite")
    assert state.interrupts == ()
    assert RefineResult.from_state(state.values).stop_reason == "rejected"

"""A chat's Refresh of a served graph's answer: another run from before it answers again.

The served graphs take `messages` and append the answer at `finalize`; a chat regenerates
it by running the thread again, without input, from the state before the answer first
appeared (see `tests/test_agent_regenerate.py` for the agent and the chat's rule). Another
run there starts the loop again on the same request; a resume without a run id, or of the
same run, ends it as it was and pays nothing; a review answered in a new run is the
review's answer, not a new loop.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from langgraph_refine._decisions._options import LoopOptions
from langgraph_refine._loop._graph import loop_builder
from langgraph_refine.server import SERVED_SCHEMAS, as_served
from tests.fakes import ScriptedChatModel, scores
from tests.test_agent_regenerate import HISTORY_LIMIT, R1, R2, run

REQUEST = "Write a haiku about the sea."


class Thread:
    """A served graph on a checkpointer; its judge scores 0.4, then 0.95 (target 0.9)."""

    def __init__(self, human_review: Any = None) -> None:
        self.model = ScriptedChatModel(replies=[f"draft {i}" for i in range(10)])
        self.judge = scores(0.4, 0.95, 0.4, 0.95)
        options = LoopOptions.build(human_review=human_review, name="refine", target_score=0.9)
        builder = loop_builder(self.model, self.judge, options, schemas=SERVED_SCHEMAS)
        self.graph = as_served(builder.compile(checkpointer=InMemorySaver()))
        self.config: dict[str, Any] = {"configurable": {"thread_id": str(uuid.uuid4())}}

    def ask(self, run_id: str | None) -> dict[str, Any]:
        request = {"messages": [HumanMessage(REQUEST)]}
        return self.graph.invoke(request, run(self.config, run_id))  # type: ignore[no-any-return]

    def refresh(self, run_id: str | None) -> dict[str, Any]:
        return self.graph.invoke(None, run(self.fork(), run_id))  # type: ignore[no-any-return]

    async def arefresh(self, run_id: str | None) -> dict[str, Any]:
        return await self.graph.ainvoke(None, run(self.fork(), run_id))  # type: ignore[no-any-return]

    def fork(self) -> dict[str, Any]:
        """The parent of the first state (of the last 10) holding the thread's answer."""
        answer = self.values()["messages"][-1].id
        history = list(self.graph.get_state_history(self.config, limit=HISTORY_LIMIT))
        holding = [s for s in history if answer in [m.id for m in s.values.get("messages", [])]]
        parent: dict[str, Any] = holding[-1].parent_config
        return parent

    def values(self) -> dict[str, Any]:
        return self.graph.get_state(self.config).values  # type: ignore[no-any-return]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_another_run_from_before_the_answer_runs_the_loop_again(mode: str) -> None:
    thread = Thread()
    first = thread.ask(R1)
    answer = thread.values()["messages"][-1]
    assert (first["response"], answer.text) == ("draft 1", "draft 1")
    calls = len(thread.model.calls)
    again = thread.refresh(R2) if mode == "sync" else asyncio.run(thread.arefresh(R2))
    assert len(thread.model.calls) - calls == 2, "two new drafts"
    assert thread.judge.calls[2:] == ["draft 2", "draft 3"]  # type: ignore[attr-defined]
    assert (again["response"], again["stop_reason"]) == ("draft 3", "target_reached")
    messages = thread.values()["messages"]
    assert [(m.type, m.text) for m in messages] == [("human", REQUEST), ("ai", "draft 3")]
    assert [a.response for a in thread.values()["attempts"]] == ["draft 2", "draft 3"]


@pytest.mark.parametrize("run_id", [R1, None], ids=["same run", "no run id"])
def test_a_resume_of_the_ended_run_ends_it_and_pays_nothing(run_id: str | None) -> None:
    thread = Thread()
    first = thread.ask(R1)
    calls, judged = len(thread.model.calls), len(thread.judge.calls)  # type: ignore[attr-defined]
    again = thread.refresh(run_id)
    assert (len(thread.model.calls), len(thread.judge.calls)) == (calls, judged)  # type: ignore[attr-defined]
    assert again["response"] == first["response"] == "draft 1"
    assert [m.text for m in thread.values()["messages"]] == [REQUEST, "draft 1"]


def test_a_review_answered_in_a_new_run_is_the_reviews_answer() -> None:
    thread = Thread(human_review="final")
    paused = thread.ask(R1)
    assert paused["__interrupt__"], "the loop asks its reviewer"
    calls = len(thread.model.calls)
    done = thread.graph.invoke(Command(resume={"action": "approve"}), run(thread.config, R2))
    assert len(thread.model.calls) == calls
    assert (done["response"], done["stop_reason"]) == ("draft 1", "approved")


def test_the_librarys_own_graph_has_no_run_key_and_ends_as_it_was() -> None:
    # The library's state has no `ended_in` (each channel costs every step): a new run
    # from before its end ends the loop as it was, as before. Its end is made in the
    # evaluate step that stops the loop (no finalize step of its own).
    from langgraph_refine import create_refine_graph

    model = ScriptedChatModel(replies=[f"draft {i}" for i in range(10)])
    graph = create_refine_graph(model, scores(0.4, 0.95), target_score=0.9)
    graph = graph.compile(checkpointer=InMemorySaver())
    config: dict[str, Any] = {"configurable": {"thread_id": str(uuid.uuid4())}}
    graph.invoke({"task": REQUEST}, run(config, R1))
    assert "ended_in" not in graph.get_state(config).values
    before_end = next(s for s in graph.get_state_history(config) if s.next == ("evaluate",))
    calls = len(model.calls)
    assert graph.invoke(None, run(before_end.config, R2))["response"] == "draft 1"
    assert len(model.calls) == calls

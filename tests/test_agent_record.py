"""The agent's loop record: threads the eighth round's release wrote resume where they were.

tests/data/agent_thread.sqlite was written by that release (tests/data/make_agent_thread.py),
which kept the loop in nineteen `refine_*` keys. Each thread resumes here, on the typed
record (`LoopState`), with the result that release gave when it resumed the same thread.
"""

from __future__ import annotations

import itertools
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Command

from langgraph_refine import RefineMiddleware
from langgraph_refine._agents._agent_state import (
    Answering,
    Deciding,
    Hidden,
    JudgingAnswer,
    LoopState,
    NextMove,
    Turn,
    loop_state,
)

THREADS = Path(__file__).parent / "data" / "agent_thread.sqlite"
SCORES = {"first draft": 0.3, "second draft": 0.95, "third draft": 0.5}


@tool
def lookup(topic: str) -> str:
    """Look up facts about a topic."""
    return f"{topic}: built in 1889"


class Model(GenericFakeChatModel):
    def bind_tools(self, tools: Any, **kwargs: Any) -> Model:
        return self


def evaluate(response: str, state: Any) -> float:
    return SCORES[response]


def agent(saver: Any, **options: Any) -> tuple[Any, RefineMiddleware, Model]:
    call = AIMessage("", tool_calls=[{"name": "lookup", "args": {"topic": "tower"}, "id": "c1"}])
    drafts = [AIMessage("first draft"), AIMessage("second draft"), AIMessage("third draft")]
    model = Model(messages=itertools.chain([call], itertools.cycle(drafts)))
    middleware = RefineMiddleware(evaluate, **({"max_iterations": 3, "patience": None} | options))
    built = create_agent(model, tools=[lookup], middleware=[middleware], checkpointer=saver)
    return built, middleware, model


@pytest.fixture
def saver(tmp_path: Path) -> Iterator[SqliteSaver]:
    copy = tmp_path / "threads.sqlite"
    shutil.copy(THREADS, copy)
    with SqliteSaver.from_conn_string(str(copy)) as opened:
        yield opened


def config(thread: str) -> Any:
    return {"configurable": {"thread_id": thread}}


def outcome(middleware: RefineMiddleware, out: dict[str, Any]) -> tuple[Any, ...]:
    result = middleware.result(out)
    attempts = [a.response for a in result.attempts]
    return result.stop_reason, result.value, attempts, result.usage.calls


def test_the_old_keys_read_as_the_record(saver: SqliteSaver) -> None:
    built, _, _ = agent(saver)
    judging = loop_state(built.get_state(config("judging")).values)
    assert isinstance(judging.job, JudgingAnswer) and judging.job.draft["content"] == "first draft"
    assert judging.base == 1 and judging.usage.calls == 2 and judging.loop_id
    every = loop_state(built.get_state(config("every")).values)
    assert isinstance(every.job, Deciding)
    assert every.next == NextMove(move="refine", parent=0)
    assert [(t.kind, t.text) for t in every.turns] == [("ai", "first draft")]
    assert all(isinstance(t, Turn) for t in every.turns)


def test_a_record_reads_back_as_written() -> None:
    record = LoopState(
        loop_id="x",
        job=JudgingAnswer(draft={"content": "a", "type": "ai"}),
        turns=(Turn(anchor="m1", kind="ai", text="a", id="d1"),),
        hidden=Hidden(turns=1, upto="m1"),
    )
    assert loop_state({"refine_state": record.model_dump()}) == record
    assert loop_state({}) == LoopState(loop_id="", job=Answering())


def test_a_thread_paused_at_a_final_review_resumes(saver: SqliteSaver) -> None:
    reviewed = {"human_review": "final", "target_score": 0.99, "max_iterations": 2}
    built, middleware, _ = agent(saver, **reviewed)
    out = built.invoke(Command(resume={"action": "approve"}), config("review"))
    assert outcome(middleware, out) == (
        "approved",
        "second draft",
        ["first draft", "second draft", "third draft"],
        4,
    )
    assert out["messages"][-1].text == "second draft"
    assert built.get_state(config("review")).next == ()


def test_a_thread_killed_before_its_judging_step_judges_the_same_answer(
    saver: SqliteSaver,
) -> None:
    built, middleware, _ = agent(saver)
    out = built.invoke(None, config("judging"))
    assert outcome(middleware, out) == (
        "target_reached",
        "second draft",
        ["first draft", "first draft", "second draft"],
        5,
    )


def test_a_thread_paused_at_an_every_round_review_goes_on(saver: SqliteSaver) -> None:
    built, middleware, _ = agent(saver, human_review="every_round")
    shown = []
    out = built.invoke(Command(resume={"action": "continue"}), config("every"))
    while "__interrupt__" in out:
        shown.append(out["__interrupt__"][0].value["response"])
        out = built.invoke(Command(resume={"action": "continue"}), config("every"))
    assert shown == ["first draft", "second draft"]  # each later round reviewed
    assert outcome(middleware, out) == (
        "target_reached",
        "second draft",
        ["first draft", "first draft", "second draft"],
        5,
    )


def test_a_finished_thread_starts_a_new_loop(saver: SqliteSaver) -> None:
    built, middleware, _ = agent(saver)
    out = built.invoke({"messages": [HumanMessage("And the bridge?")]}, config("finished"))
    assert out["refine_task"] == "And the bridge?"
    assert outcome(middleware, out) == (
        "target_reached",
        "second draft",
        ["first draft", "second draft"],
        3,
    )
    assert [m.text for m in out["messages"] if isinstance(m, AIMessage) and m.text] == [
        "second draft",
        "second draft",
    ]

"""State round-trips through real checkpointers in strict msgpack mode, without warnings."""

from __future__ import annotations

import os
import warnings
from typing import Any

from langgraph_refine import Attempt, Evaluation, Usage, create_refine_graph
from tests.fakes import ScriptedChatModel, scores


def test_strict_msgpack_is_on_in_the_suite() -> None:
    assert os.environ.get("LANGGRAPH_STRICT_MSGPACK") == "true"


def test_state_round_trips_without_warnings(checkpointer: Any, thread: Any) -> None:
    model = ScriptedChatModel(replies=["one", "two"])

    def ev(response: str, state: Any) -> Evaluation:
        return Evaluation(
            score=0.5, feedback="f", verdict="NEEDS_IMPROVEMENT", details={"k": [1, 2]}
        )

    graph = create_refine_graph(model, ev, max_iterations=1).compile(checkpointer=checkpointer)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        graph.invoke({"task": "t"}, thread)
        state = graph.get_state(thread).values
        history = list(graph.get_state_history(thread))
    assert len(history) > 3
    attempts = state["attempts"]
    assert all(isinstance(a, Attempt) for a in attempts)
    assert attempts[1].evaluation == Evaluation(
        score=0.5, feedback="f", verdict="NEEDS_IMPROVEMENT", details={"k": [1, 2]}
    )
    assert isinstance(state["usage"], Usage) and state["usage"].calls == 2
    assert state["response"] == "one"


def test_async_savers_round_trip(tmp_path: Any) -> None:
    import asyncio

    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    async def main() -> Any:
        async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "a.sqlite")) as saver:
            graph = create_refine_graph(lambda s: "x", scores(0.2, 0.95)).compile(
                checkpointer=saver
            )
            cfg = {"configurable": {"thread_id": "a"}}
            await graph.ainvoke({"task": "t"}, cfg)
            return (await graph.aget_state(cfg)).values

    values = asyncio.run(main())
    assert [a.score for a in values["attempts"]] == [0.2, 0.95]

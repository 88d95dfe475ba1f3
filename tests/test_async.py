"""The async path: ainvoke/arefine with async and sync generators and evaluators."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from langgraph_refine import Evaluation, arefine, create_refine_graph, refine
from tests.fakes import ScriptedChatModel, judge_reply, scores


async def test_arefine_with_async_generator_and_evaluator() -> None:
    async def gen(state: Any) -> str:
        await asyncio.sleep(0)
        return f"d{len(state['attempts'])}"

    async def ev(response: str, state: Any) -> Evaluation:
        await asyncio.sleep(0)
        return Evaluation(score=0.95 if response == "d1" else 0.3, feedback="more")

    result = await arefine(gen, "t", ev)
    assert result.value == "d1"
    assert result.stop_reason == "target_reached"


async def test_arefine_with_sync_callables() -> None:
    result = await arefine(lambda s: "x", "t", scores(0.2, 0.95))
    assert result.score_history == [0.2, 0.95]


async def test_arefine_with_chat_model_and_judge() -> None:
    model = ScriptedChatModel(
        replies=["a1", judge_reply(0.4, feedback="add detail"), "a2", judge_reply(0.9, "PASS")]
    )
    result = await arefine(model, "t", None)
    assert result.stop_reason == "passed"
    assert result.value == "a2"
    assert "add detail" in model.prompts[2]
    assert result.usage.calls == 4


def test_async_generator_on_sync_path_gives_clear_error() -> None:
    async def gen(state: Any) -> str:
        return "x"

    with pytest.raises(TypeError, match="ainvoke\\(\\) or arefine\\(\\)"):
        refine(gen, "t", scores(1.0))


def test_async_evaluator_on_sync_path_gives_clear_error() -> None:
    async def ev(response: str, state: Any) -> float:
        return 1.0

    with pytest.raises(TypeError, match="ainvoke\\(\\) or arefine\\(\\)"):
        refine(lambda s: "x", "t", ev)


async def test_concurrent_loops_overlap() -> None:
    async def gen(state: Any) -> str:
        await asyncio.sleep(0.1)
        return "x"

    graph = create_refine_graph(gen, scores(0.1), max_iterations=2, patience=None).compile()
    loop = asyncio.get_running_loop()
    start = loop.time()
    outs = await graph.abatch([{"task": f"t{i}"} for i in range(8)])
    elapsed = loop.time() - start
    assert len(outs) == 8
    assert elapsed < 8 * 3 * 0.1 / 2  # far below sequential time


def test_sync_path_does_not_use_the_async_client() -> None:
    class SyncOnly(ScriptedChatModel):
        async def _agenerate(self, *args: Any, **kwargs: Any) -> Any:
            raise AssertionError("async path used on the sync path")

    result = refine(SyncOnly(replies=["x"]), "t", scores(1.0))
    assert result.value == "x"

"""Fast paths: instant steps run inline, and no evaluation run is built when nobody listens."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from langgraph_refine import Evaluation, GeneratorNode, create_refine_graph
from langgraph_refine._inline import Inline


def test_inline_runs_the_step_in_the_callers_thread() -> None:
    seen: list[int] = []

    def step(state: dict[str, int]) -> int:
        seen.append(threading.get_ident())
        return state["x"] + 1

    inline = Inline(step)
    assert inline.name == "step"
    assert inline.invoke({"x": 1}) == 2
    assert asyncio.run(inline.ainvoke({"x": 2})) == 3
    assert seen == [threading.get_ident()] * 2


class CountingExecutor(ThreadPoolExecutor):
    """The event loop's default executor, counting the jobs it is given."""

    def __init__(self) -> None:
        super().__init__(max_workers=2)
        self.jobs: list[str] = []

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        self.jobs.append(getattr(fn, "__name__", repr(fn)))
        return super().submit(fn, *args, **kwargs)


def test_async_loop_uses_no_worker_thread() -> None:
    async def generate(state: Any) -> str:
        return f"draft {len(state['attempts'])}"

    async def evaluate(response: str, state: Any) -> Evaluation:
        return Evaluation(score=0.95 if response.endswith("2") else 0.3)

    graph = create_refine_graph(generate, evaluate, max_iterations=4).compile()

    async def main() -> tuple[Any, CountingExecutor]:
        executor = CountingExecutor()
        asyncio.get_running_loop().set_default_executor(executor)
        try:
            return await graph.ainvoke({"task": "t"}), executor
        finally:
            executor.shutdown()

    output, executor = asyncio.run(main())
    assert output["response"] == "draft 2"
    # prepare, the routers after generate and evaluate, and finalize all ran inline.
    assert executor.jobs == []


def test_single_generation_is_awaited_in_the_nodes_own_task() -> None:
    tasks: list[Any] = []

    async def generate(state: Any) -> str:
        tasks.append(asyncio.current_task())
        return "draft"

    async def main() -> Any:
        update = await GeneratorNode(generate).ainvoke({"task": "t", "attempts": []})
        return update, asyncio.current_task()

    update, caller = asyncio.run(main())
    assert update["pending"]["response"] == "draft"
    assert tasks == [caller]  # no extra task per round


def test_several_candidates_still_run_concurrently() -> None:
    running = 0
    peak = 0

    async def generate(state: Any) -> str:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.01)
        running -= 1
        return "draft"

    node = GeneratorNode(generate, candidates=3)
    update = asyncio.run(node.ainvoke({"task": "t", "attempts": []}))
    assert len(update["pending"]["candidates"]) == 3
    assert peak == 3


def test_listeners_are_detected_from_the_callbacks() -> None:
    from langchain_core.callbacks import BaseCallbackHandler, CallbackManager

    from langgraph_refine._loop._step import has_listeners as _has_listeners

    assert _has_listeners(None)  # unknown: keep the traced run
    assert not _has_listeners({"callbacks": CallbackManager(handlers=[])})
    assert _has_listeners({"callbacks": CallbackManager(handlers=[BaseCallbackHandler()])})
    assert _has_listeners({"callbacks": [BaseCallbackHandler()]})
    assert not _has_listeners({"callbacks": []})


def test_the_judge_is_run_and_seen_by_callbacks_but_kept_out_of_messages_streams() -> None:
    from langchain_core.callbacks import BaseCallbackHandler

    from tests.fakes import ScriptedChatModel, judge_reply

    class Seen(BaseCallbackHandler):
        def __init__(self) -> None:
            self.tags: list[list[str]] = []

        def on_chat_model_start(self, *args: Any, tags: Any = None, **kwargs: Any) -> None:
            self.tags.append(list(tags or []))

    generator = ScriptedChatModel(replies=["draft"])
    judge = ScriptedChatModel(replies=[judge_reply(0.95, "PASS", "good")])
    graph = create_refine_graph(generator, judge_model=judge).compile()
    seen = Seen()
    chunks = list(graph.stream({"task": "t"}, {"callbacks": [seen]}, stream_mode="messages"))
    nodes = [metadata["langgraph_node"] for _, metadata in chunks]
    # The draft streams; the judge's call is the loop's own: traced, never streamed.
    assert "generate" in nodes and "evaluate" not in nodes
    assert len(judge.calls) == 1 and any("nostream" in tags for tags in seen.tags)

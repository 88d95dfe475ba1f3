"""The floor under the command line's figures: the same calls in one process, three ways.

Against the same scripted server, with the command's own HTTP clients (`cli._http`: one
client, the batch's connection lanes), 256 tasks at 64 in flight make 3 model calls each
through `ChatOpenAI`:

- `ChatOpenAI alone`: three `ainvoke` calls a task, one after another, nothing around them;
- `hand-written loop`: LangGraph's evaluator-optimizer tutorial loop (generate -> evaluate
  -> conditional edge) with the model as its generator and a word check as its evaluator;
- `refine`: `create_refine_graph` with the same model and `contains_all` (never met),
  `patience=None`, no store.

Per run: the process's CPU per model call (user + system) and the ideal wall time over
the run's. The command line adds to `refine` its start, its exit, the strategy record and
writing each task's line. What the first two paths cost is LangChain's, the OpenAI SDK's,
httpx's and LangGraph's, not this library's: no batch runner built on them can do better.
"""

from __future__ import annotations

import asyncio
import operator
import time
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from langchain_openai import ChatOpenAI
from typing_extensions import TypedDict

from benchmarks._harness import tutorial_graph
from langgraph_refine import create_refine_graph, evaluators
from langgraph_refine.cli._http import LANE, HttpClients

TASKS, CONCURRENCY, CALLS = 256, 64, 3  # CALLS: a task's calls, the command's rounds
NEVER = "this phrase is never in a reply"
PATHS = ("ChatOpenAI alone", "hand-written loop", "refine")


class _LoopState(TypedDict):
    task: str
    attempts: Annotated[list[str], operator.add]
    score: float


def _tutorial_loop(model: ChatOpenAI) -> Any:
    async def generate(state: _LoopState) -> dict[str, Any]:
        reply = await model.ainvoke(state["task"])
        return {"attempts": [reply.text]}

    async def evaluate(state: _LoopState) -> dict[str, Any]:
        return {"score": 1.0 if NEVER in state["attempts"][-1] else 0.0}

    def route(state: _LoopState) -> str:
        done = state["score"] >= 1.0 or len(state["attempts"]) >= CALLS
        return "accepted" if done else "rejected"

    return tutorial_graph(_LoopState, generate, evaluate, route)


def _paths(model: ChatOpenAI) -> dict[str, Callable[[str], Awaitable[Any]]]:
    tutorial = _tutorial_loop(model)
    refine = create_refine_graph(
        model,
        evaluators.contains_all([NEVER]),
        max_iterations=CALLS - 1,
        patience=None,
        target_score=1.0,
    ).compile()

    async def alone(task: str) -> None:
        for _ in range(CALLS):
            await model.ainvoke(task)

    return {
        PATHS[0]: alone,
        PATHS[1]: lambda task: tutorial.ainvoke({"task": task}),
        PATHS[2]: lambda task: refine.ainvoke({"task": task}),
    }


async def _batch(one: Callable[[str], Awaitable[Any]]) -> tuple[float, float]:
    """(CPU ms per model call, wall seconds) of `TASKS` tasks at `CONCURRENCY` in flight."""
    queue = [f"Task {i}" for i in range(TASKS)]

    async def worker(number: int) -> None:
        LANE.set(number)  # as the command's workers do
        while queue:
            await one(queue.pop())

    cpu, wall = time.process_time(), time.perf_counter()
    await asyncio.gather(*(worker(n) for n in range(CONCURRENCY)))
    return (time.process_time() - cpu) / (TASKS * CALLS) * 1e3, time.perf_counter() - wall


class Floor:
    """The three paths on one model and the command's HTTP clients, in one event loop.

    `async with Floor(url) as floor:` builds them and runs each once (imports, first
    connections); `await floor.run(path)` is then one measured batch.
    """

    def __init__(self, base_url: str) -> None:
        self._clients = HttpClients()
        self._base_url = base_url
        self._paths: dict[str, Callable[[str], Awaitable[Any]]] = {}

    async def __aenter__(self) -> Floor:
        sync_client, async_client = self._clients.pair()
        model = ChatOpenAI(
            model="scripted",
            base_url=self._base_url,
            api_key="not-needed",
            http_client=sync_client,
            http_async_client=async_client,
            max_retries=0,
            timeout=30,
        )
        self._paths = _paths(model)
        for one in self._paths.values():
            await _batch(one)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._clients.aclose()

    async def run(self, path: str) -> tuple[float, float]:
        """One batch of `path`: (CPU ms per model call, wall seconds)."""
        return await _batch(self._paths[path])

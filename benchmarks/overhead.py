"""Orchestration overhead: the refine loop versus a minimal hand-written LangGraph loop.

Both graphs run the same rounds with the same zero-latency generator and evaluator, no
checkpointer. The minimal loop is the evaluator-optimizer workflow of LangGraph's own
tutorial (generate -> evaluate -> conditional edge back to generate), with a list of
attempts in its state so that both keep the history. Per-round time is the slope between
a short and a long run, which removes the fixed cost of starting a run; the whole-run
ratio at the default 5 generations is reported beside it.
"""

from __future__ import annotations

import operator
import time
from collections.abc import Callable
from typing import Annotated, Any

from benchmarks._harness import (
    BenchResult,
    interleave,
    md_table,
    median,
    ratio_figure,
    run_async,
)
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from langgraph_refine import create_refine_graph

TARGET = 1.2
SHORT, LONG = 2, 12  # generations per run for the slope
DEFAULT_ROUNDS = 5  # create_refine_graph's default: 1 + max_iterations=4
RESPONSE = "a draft answer " * 8
CONFIG: Any = {"recursion_limit": 10_000}


def generate(state: Any) -> str:
    return RESPONSE


async def agenerate(state: Any) -> str:
    return RESPONSE


def evaluate(response: str, state: Any) -> float:
    return 0.5


async def aevaluate(response: str, state: Any) -> float:
    return 0.5


class LoopState(TypedDict):
    """The hand-written loop's state: the task, the attempts, the latest judgement."""

    task: str
    attempts: Annotated[list[dict[str, Any]], operator.add]
    score: float
    feedback: str


def minimal_loop(rounds: int, *, is_async: bool) -> Any:
    """LangGraph's evaluator-optimizer tutorial loop, stopping after `rounds` generations."""

    def route(state: LoopState) -> str:
        if state["score"] >= 1.0 or len(state["attempts"]) >= rounds:
            return "accepted"
        return "rejected"

    builder = StateGraph(LoopState)
    if is_async:

        async def gen_node(state: LoopState) -> dict[str, Any]:
            return {"attempts": [{"response": await agenerate(state)}]}

        async def eval_node(state: LoopState) -> dict[str, Any]:
            score = await aevaluate(state["attempts"][-1]["response"], state)
            return {"score": score, "feedback": ""}

        builder.add_node("generate", gen_node)
        builder.add_node("evaluate", eval_node)
    else:

        def sgen_node(state: LoopState) -> dict[str, Any]:
            return {"attempts": [{"response": generate(state)}]}

        def seval_node(state: LoopState) -> dict[str, Any]:
            return {"score": evaluate(state["attempts"][-1]["response"], state), "feedback": ""}

        builder.add_node("generate", sgen_node)
        builder.add_node("evaluate", seval_node)
    builder.add_edge(START, "generate")
    builder.add_edge("generate", "evaluate")
    builder.add_conditional_edges("evaluate", route, {"accepted": END, "rejected": "generate"})
    return builder.compile()


def refine_loop(rounds: int, *, is_async: bool) -> Any:
    """The library's loop, forced to run exactly `rounds` generations."""
    return create_refine_graph(
        agenerate if is_async else generate,
        aevaluate if is_async else evaluate,
        max_iterations=rounds - 1,
        patience=None,
        target_score=1.0,
    ).compile()


def _runner(graph: Any, *, is_async: bool, runs: int) -> Callable[[], float]:
    """A sample: the fastest of `runs` back-to-back runs of the graph.

    Other processes on the machine only ever add time, so the fastest run is the best
    estimate of what the code itself costs.
    """
    payload = {"task": "Write a draft."}

    async def atimed() -> float:
        start = time.perf_counter()
        await graph.ainvoke(payload, CONFIG)
        return time.perf_counter() - start

    def timed() -> float:
        if is_async:
            return float(run_async(atimed()))
        start = time.perf_counter()
        graph.invoke(payload, CONFIG)
        return time.perf_counter() - start

    return lambda: min(timed() for _ in range(runs))


def measure(
    *, is_async: bool, repeats: int, runs: int
) -> tuple[list[float], list[float], dict[str, list[float]]]:
    """Per-round and whole-run ratios (refine / minimal), one per repetition."""
    variants: dict[str, Callable[[], Any]] = {}
    for kind, factory in (("refine", refine_loop), ("minimal", minimal_loop)):
        for rounds in (SHORT, LONG, DEFAULT_ROUNDS):
            graph = factory(rounds, is_async=is_async)
            variants[f"{kind}@{rounds}"] = _runner(graph, is_async=is_async, runs=runs)
    times = interleave(variants, repeats)
    per_round: list[float] = []
    whole: list[float] = []
    for i in range(repeats):

        def slope(kind: str, i: int = i) -> float:
            return (times[f"{kind}@{LONG}"][i] - times[f"{kind}@{SHORT}"][i]) / (LONG - SHORT)

        per_round.append(slope("refine") / slope("minimal"))
        whole.append(times[f"refine@{DEFAULT_ROUNDS}"][i] / times[f"minimal@{DEFAULT_ROUNDS}"][i])
    return per_round, whole, times


def run(quick: bool = False) -> BenchResult:
    repeats, runs = (3, 2) if quick else (15, 10)
    result = BenchResult(name="overhead", title="orchestration overhead vs a minimal loop")
    rows = []
    for mode, is_async in (("sync", False), ("async", True)):
        per_round, whole, times = measure(is_async=is_async, repeats=repeats, runs=runs)
        result.figures.append(
            ratio_figure(f"per-round time, refine / minimal ({mode})", per_round, target=TARGET)
        )
        result.figures.append(
            ratio_figure(
                f"whole run of {DEFAULT_ROUNDS} generations, refine / minimal ({mode})",
                whole,
                target=None,
            )
        )
        for kind in ("refine", "minimal"):
            per = (median(times[f"{kind}@{LONG}"]) - median(times[f"{kind}@{SHORT}"])) / (
                LONG - SHORT
            )
            rows.append(
                [
                    mode,
                    kind,
                    f"{median(times[f'{kind}@{SHORT}']) * 1e3:.2f}",
                    f"{median(times[f'{kind}@{LONG}']) * 1e3:.2f}",
                    f"{per * 1e3:.3f}",
                ]
            )
    result.tables.append(
        md_table(
            [
                "mode",
                "loop",
                f"run of {SHORT} generations (ms)",
                f"run of {LONG} generations (ms)",
                "per round (ms)",
            ],
            rows,
        )
    )
    result.notes.append(__doc__ or "")
    return result

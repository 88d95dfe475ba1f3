"""Concurrency: 32 loops of 3 rounds whose generator waits 200 ms per call.

The ideal wall time is 3 x 200 ms = 0.6 s: every loop's calls overlap with the others'.
Three paths run interleaved in one event loop, repeated:

- `refine (abatch)`: the compiled graph's `abatch` over 32 inputs, with an async callable
  generator that awaits 200 ms and an evaluator that never stops the loop early;
- `hand-written loop (abatch)`: the same rounds as a minimal LangGraph loop (generate ->
  evaluate -> conditional edge), the floor LangGraph itself sets;
- `cli batch runner`: the `langgraph-refine batch` command's async runner, in process, 32
  at a time, whose generator is a real `ChatOpenAI` talking to a loopback
  OpenAI-compatible server that sleeps 200 ms per request, with a `regex:` evaluator
  that never matches.

Each path is also timed with zero latency (a generator that returns at once, a server
that answers at once): that wall time is the CPU the path spends around the waiting,
which is what the overlap cannot hide. The whole CLI is also run as a subprocess, end to
end (context: it adds the interpreter's start-up and imports).
"""

from __future__ import annotations

import asyncio
import functools
import json
import operator
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from benchmarks._harness import (
    BenchResult,
    Figure,
    md_table,
    median,
    quartiles,
    run_async,
    spread_text,
)
from langgraph_refine import Evaluation, create_refine_graph

LOOPS = 32
ROUNDS = 3
DELAY = 0.2
IDEAL = ROUNDS * DELAY
TARGET = 1.1
NEVER_MATCHES = "regex:^this never matches$"


def _generator(delay: float) -> Callable[[Any], Awaitable[str]]:
    async def generate(state: Any) -> str:
        if delay:
            await asyncio.sleep(delay)
        return "a draft"

    return generate


async def _never_done(response: str, state: Any) -> Evaluation:
    return Evaluation(score=0.2, feedback="not yet")


class MinimalState(TypedDict):
    """The hand-written loop's state (LangGraph's evaluator-optimizer tutorial shape)."""

    task: str
    attempts: Annotated[list[str], operator.add]
    score: float


def minimal_graph(delay: float) -> Any:
    """The same loop written by hand: generate -> evaluate -> conditional edge."""
    generator = _generator(delay)

    async def generate(state: MinimalState) -> dict[str, Any]:
        return {"attempts": [await generator(state)]}

    async def evaluate(state: MinimalState) -> dict[str, Any]:
        return {"score": (await _never_done(state["attempts"][-1], state)).score}

    def route(state: MinimalState) -> str:
        return "accepted" if len(state["attempts"]) >= ROUNDS else "rejected"

    builder = StateGraph(MinimalState)
    builder.add_node("generate", generate)
    builder.add_node("evaluate", evaluate)
    builder.add_edge(START, "generate")
    builder.add_edge("generate", "evaluate")
    builder.add_conditional_edges("evaluate", route, {"accepted": END, "rejected": "generate"})
    return builder.compile()


def refine_graph(delay: float) -> Any:
    return create_refine_graph(
        _generator(delay),
        _never_done,
        max_iterations=ROUNDS - 1,
        patience=None,
        target_score=1.0,
    ).compile()


async def run_abatch(graph: Any) -> float:
    """Wall time of 32 loops through `abatch`."""
    inputs = [{"task": f"Task {i}"} for i in range(LOOPS)]
    start = time.perf_counter()
    outputs = await graph.abatch(inputs)
    elapsed = time.perf_counter() - start
    assert len(outputs) == LOOPS
    return elapsed


@contextmanager
def scripted_server(delay: float = DELAY) -> Iterator[str]:
    """Start the loopback scripted OpenAI-compatible server; yield its base URL."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "benchmarks._scripted_server", str(delay)],
        stdout=subprocess.PIPE,
        cwd=Path(__file__).resolve().parent.parent,
        text=True,
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        if not url.startswith("http"):
            raise RuntimeError(f"the scripted server did not start (said {url!r})")
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _items() -> list[Any]:
    from langgraph_refine.cli._batch import BatchItem
    from langgraph_refine.cli._options import LoopOptions
    from langgraph_refine.cli._specs import parse_specs

    options = LoopOptions(
        specs=parse_specs([NEVER_MATCHES]),
        target_score=1.0,
        max_iterations=ROUNDS - 1,
        patience=None,
    )
    return [BatchItem(line=i + 1, id=i, task=f"Task {i}", options=options) for i in range(LOOPS)]


async def run_cli_batch(base_url: str) -> float:
    """Wall time of the CLI's async batch runner over 32 tasks, all at once."""
    from langgraph_refine.cli._batch import LineWriter, Progress, run_items
    from langgraph_refine.cli._models import ModelSettings

    # A short timeout: a lost request fails the run loudly instead of hiding in the timing.
    settings = ModelSettings(model="scripted", base_url=base_url, timeout=10.0)
    items = _items()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.jsonl"
        writer = LineWriter(out)
        try:
            start = time.perf_counter()
            stats = await run_items(items, settings, writer, concurrency=LOOPS, progress=Progress())
            elapsed = time.perf_counter() - start
        finally:
            writer.close()
        lines = out.read_text().splitlines()
    assert stats.failed == 0 and len(lines) == LOOPS, (stats.describe(), len(lines))
    assert all(json.loads(line)["iterations"] == ROUNDS - 1 for line in lines)
    return elapsed


def run_cli_subprocess(base_url: str, tasks: int = LOOPS) -> float:
    """Wall time of `python -m langgraph_refine.cli batch` over `tasks` tasks, end to end."""
    with tempfile.TemporaryDirectory() as tmp:
        source, out = Path(tmp) / "in.jsonl", Path(tmp) / "out.jsonl"
        source.write_text(
            "".join(json.dumps({"id": i, "task": f"Task {i}"}) + "\n" for i in range(tasks))
        )
        command = [
            sys.executable,
            "-m",
            "langgraph_refine.cli",
            "batch",
            str(source),
            "--out",
            str(out),
            "--concurrency",
            str(LOOPS),
            "--model",
            "scripted",
            "--base-url",
            base_url,
            "--evaluator",
            NEVER_MATCHES,
            "--target-score",
            "1.0",
            "--max-iterations",
            str(ROUNDS - 1),
            "--patience",
            "0",
        ]
        start = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, timeout=300)
        elapsed = time.perf_counter() - start
        if done.returncode != 0:
            raise RuntimeError(f"CLI batch failed ({done.returncode}): {done.stderr[-2000:]}")
        lines = out.read_text().splitlines() if out.exists() else []
        assert len(lines) == tasks, (len(lines), done.stderr[-500:])
    return elapsed


PATHS = ("refine (abatch)", "hand-written loop (abatch)", "cli batch runner")


async def _interleaved(
    urls: dict[float, str], repeats: int
) -> dict[tuple[str, float], list[float]]:
    """Wall times per (path, delay), all paths and delays interleaved in one event loop."""
    runs: dict[tuple[str, float], Callable[[], Awaitable[float]]] = {}
    for delay, url in urls.items():
        refine, minimal = refine_graph(delay), minimal_graph(delay)
        runs[(PATHS[0], delay)] = functools.partial(run_abatch, refine)
        runs[(PATHS[1], delay)] = functools.partial(run_abatch, minimal)
        runs[(PATHS[2], delay)] = functools.partial(run_cli_batch, url)
    for go in runs.values():  # warm-up: imports, first connections
        await go()
    walls: dict[tuple[str, float], list[float]] = {key: [] for key in runs}
    keys = list(runs)
    for rep in range(repeats):
        shift = rep % len(keys)
        for key in keys[shift:] + keys[:shift]:
            walls[key].append(await runs[key]())
    return walls


def run(quick: bool = False) -> BenchResult:
    repeats = 2 if quick else 7
    result = BenchResult(
        name="concurrency",
        title=f"{LOOPS} loops x {ROUNDS} rounds, {DELAY * 1000:.0f} ms per generator call",
    )
    sub: dict[str, list[float]] = {"cli subprocess, 32 tasks": [], "cli subprocess, 1 task": []}
    with scripted_server(DELAY) as url, scripted_server(0.0) as fast_url:
        walls = run_async(_interleaved({DELAY: url, 0.0: fast_url}, repeats))
        for _ in range(2 if quick else 3):
            sub["cli subprocess, 32 tasks"].append(run_cli_subprocess(url))
            sub["cli subprocess, 1 task"].append(run_cli_subprocess(url, tasks=1))
    for path in PATHS:
        ratios = [v / IDEAL for v in walls[(path, DELAY)]]
        value = median(ratios)
        targeted = path != PATHS[1]
        result.figures.append(
            Figure(
                name=f"wall time / ideal {IDEAL:.1f} s, {path}",
                value=value,
                target=f"<= {TARGET}x" if targeted else "",
                passed=(value <= TARGET) if targeted else None,
                spread=spread_text(ratios),
            )
        )
    full, one = median(sub["cli subprocess, 32 tasks"]), median(sub["cli subprocess, 1 task"])
    result.figures.append(
        Figure(
            name="CLI subprocess, batch part: (32-task run - 1-task run + ideal) / ideal",
            value=(full - one + IDEAL) / IDEAL,
            passed=None,
        )
    )
    rows = []
    for (path, delay), values in walls.items():
        low, high = quartiles(values)
        label = f"{path}, {'zero latency' if delay == 0 else f'{delay * 1000:.0f} ms calls'}"
        rows.append([label, f"{median(values):.3f}", f"{low:.3f}-{high:.3f}", len(values)])
    for name, values in sub.items():
        low, high = quartiles(values)
        rows.append([name, f"{median(values):.3f}", f"{low:.3f}-{high:.3f}", len(values)])
    result.tables.append(md_table(["path", "median wall (s)", "p25-p75 (s)", "runs"], rows))
    result.notes.append(__doc__ or "")
    if any(f.passed is False for f in result.figures):
        cpu = {path: median(walls[(path, 0.0)]) for path in PATHS}
        result.notes.append(
            WHY_MISSED.format(
                per_step=cpu[PATHS[0]] / (LOOPS * ROUNDS) * 1e3,
                minimal_step=cpu[PATHS[1]] / (LOOPS * ROUNDS) * 1e3,
                minimal=median(walls[(PATHS[1], DELAY)]) / IDEAL,
                cli_call=cpu[PATHS[2]] / (LOOPS * ROUNDS) * 1e3,
            )
        )
    return result


WHY_MISSED = """
**Why a target is missed.** All 32 loops run in one event loop, start together and wait
together: when their 200 ms waits end at about the same moment, the event loop runs
every loop's next steps (evaluate, route, start the next generation) before any of them
waits again, so each round adds the CPU time of 32 loop rounds to the wall time. Here
that is about {per_step:.2f} ms of CPU per loop round for the library (zero-latency row
/ 96), against {minimal_step:.2f} ms for the hand-written LangGraph loop, which itself
reaches only {minimal:.2f}x the ideal in the same run: on this 2-core machine, shared
with other work, LangGraph's own per-step cost already exceeds the 10% margin. The CLI
path adds a real HTTP client: about {cli_call:.1f} ms of CPU per model call in
`ChatOpenAI` and the OpenAI client (zero-latency row / 96 calls), plus an fsync per
output line on the event loop; the library cannot remove that cost, only overlap it.
"""

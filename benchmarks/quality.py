"""Quality on a real model: refinement versus sampling at the same number of model calls.

The local SmolLM2-135M-Instruct model (llama.cpp server, OpenAI protocol) gets the
keyword tasks of `dev_tasks.json`: write one sentence that uses all given words, scored
by `evaluators.contains_all(words)` (the fraction of the words present). Every method
samples with the same settings and has the same budget of 4 generator calls per task
(except single-shot's 1); each task's score is the best score the method reached:

- `single-shot`: one answer to the task;
- `best-of-4`: four independent answers to the task, the best kept;
- `refine`: `create_refine_graph(model, contains_all(words), max_iterations=3)`, so up
  to 4 generations, each refinement seeing the feedback that names the missing words;
- `refine, candidates=2`: `candidates=2, max_iterations=1`: two answers to the task, the
  best one refined with two answers again (4 calls).

Loops stop early once every word is present (`target_score=1.0`) and never on a
plateau (`patience=None`), so no method is cut short before its 4 calls. The tasks run
4 at a time (the server's 4 slots); the whole set is repeated with fresh random seeds,
and the figure is the mean score over tasks, with the spread over repetitions.
"""

from __future__ import annotations

import asyncio
import json
import statistics
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from benchmarks import _local
from benchmarks._harness import BenchResult, Figure, md_table, run_async
from langgraph_refine import create_refine_graph, evaluators

TASKS_FILE = Path(__file__).resolve().parent / "dev_tasks.json"
CALLS = 4
TEMPERATURE = 0.8
MAX_TOKENS = 80
PARALLEL = 4


def task_text(words: list[str]) -> str:
    """The task as the model receives it."""
    return f"Write one sentence that uses all of these words: {', '.join(words)}."


def load_tasks(path: Path = TASKS_FILE) -> list[list[str]]:
    tasks = json.loads(path.read_text())
    if not isinstance(tasks, list) or not all(isinstance(t, list) and t for t in tasks):
        raise ValueError(f"{path}: expected a JSON list of word lists")
    return tasks


Method = Callable[[Any, list[str]], Awaitable[tuple[float, int]]]


async def single_shot(model: Any, words: list[str]) -> tuple[float, int]:
    reply = await model.ainvoke(task_text(words))
    return evaluators.contains_all(words).evaluate(reply.text, {}).score, 1


async def best_of_n(model: Any, words: list[str]) -> tuple[float, int]:
    check = evaluators.contains_all(words)
    best, calls = 0.0, 0
    for _ in range(CALLS):  # sequential, so a perfect answer saves the remaining calls
        reply = await model.ainvoke(task_text(words))
        calls += 1
        best = max(best, check.evaluate(reply.text, {}).score)
        if best >= 1.0:
            break
    return best, calls


def refine_method(*, candidates: int, max_iterations: int) -> Method:
    async def method(model: Any, words: list[str]) -> tuple[float, int]:
        graph = create_refine_graph(
            model,
            evaluators.contains_all(words),
            max_iterations=max_iterations,
            candidates=candidates,
            patience=None,
            target_score=1.0,
        ).compile()
        state = await graph.ainvoke({"task": task_text(words)}, output_keys=["attempts", "usage"])
        scores = [a.evaluation.score for a in state["attempts"] if a.evaluation is not None]
        return max(scores, default=0.0), state["usage"].calls

    return method


METHODS: dict[str, Method] = {
    "single-shot": single_shot,
    f"best-of-{CALLS}": best_of_n,
    f"refine (candidates=1, max_iterations={CALLS - 1})": refine_method(
        candidates=1, max_iterations=CALLS - 1
    ),
    "refine (candidates=2, max_iterations=1)": refine_method(candidates=2, max_iterations=1),
}


async def run_repeat(model: Any, tasks: list[list[str]]) -> dict[str, list[tuple[float, int]]]:
    """One pass over every task with every method; tasks interleave across methods."""
    gate = asyncio.Semaphore(PARALLEL)
    out: dict[str, list[tuple[float, int]]] = {name: [] for name in METHODS}

    async def one(name: str, words: list[str]) -> None:
        async with gate:
            out[name].append(await METHODS[name](model, words))

    await asyncio.gather(*(one(name, words) for words in tasks for name in METHODS))
    return out


def run(quick: bool = False) -> BenchResult:
    repeats = 1 if quick else 3
    tasks = load_tasks()[: 4 if quick else None]
    server = _local.server()
    model = server.chat_model(temperature=TEMPERATURE, max_tokens=MAX_TOKENS)

    async def all_repeats() -> list[dict[str, list[tuple[float, int]]]]:
        return [await run_repeat(model, tasks) for _ in range(repeats)]

    results = run_async(all_repeats())
    result = BenchResult(
        name="quality",
        title=f"SmolLM2 keyword tasks: refinement vs best-of-{CALLS} at {CALLS} calls",
    )
    means = {
        name: [statistics.fmean(s for s, _ in rep[name]) for rep in results] for name in METHODS
    }
    solved = {
        name: [statistics.fmean(s >= 1.0 for s, _ in rep[name]) for rep in results]
        for name in METHODS
    }
    calls = {name: statistics.fmean(c for rep in results for _, c in rep[name]) for name in METHODS}
    best_of = statistics.fmean(means[f"best-of-{CALLS}"])
    for name in METHODS:
        mean = statistics.fmean(means[name])
        is_refine = name.startswith("refine")
        spread = (
            f"{min(means[name]):.3f}-{max(means[name]):.3f} over {repeats} runs"
            if repeats > 1
            else f"1 run of {len(tasks)} tasks"
        )
        result.figures.append(
            Figure(
                name=f"mean keyword coverage, {name}",
                value=mean,
                unit="",
                target=f">= best-of-{CALLS} ({best_of:.3f})" if is_refine else "",
                passed=(mean >= best_of) if is_refine else None,
                spread=spread,
            )
        )
    rows = [
        [
            name,
            f"{statistics.fmean(means[name]):.3f}",
            ", ".join(f"{m:.3f}" for m in means[name]),
            f"{statistics.fmean(solved[name]):.2f}",
            f"{calls[name]:.2f}",
        ]
        for name in METHODS
    ]
    result.tables.append(
        md_table(
            ["method", "mean coverage", "per run", "all words present (share)", "calls/task"],
            rows,
        )
    )
    result.notes.append(__doc__ or "")
    result.notes.append(
        f"{len(tasks)} tasks x {repeats} runs; temperature {TEMPERATURE}, at most "
        f"{MAX_TOKENS} tokens per answer."
    )
    if any(f.passed is False for f in result.figures):
        result.notes.append(WHY_MISSED)
    return result


WHY_MISSED = """
**Why refinement misses.** Every method keeps its best answer, so refinement beats
best-of-4 only if an answer written after seeing the previous one and its feedback is
more likely to use all the words than a fresh answer to the task. For this 135M model it
is less likely: the transcripts show it echoing the prompt's scaffolding ("Rewrite the
sentence...", "no notes about the changes"), repeating itself, or anchoring on a
sentence that already missed words, while a fresh sample of the short task prompt is
its best case. Prompt wordings tried on the dev tasks while building this benchmark
(each 2 runs x 16 tasks, best-of-4 in the same runs at 0.86-0.87): the current
refinement prompt 0.65-0.72; shorter single-message forms (task, last answer, problem,
one-line instruction) 0.65-0.73; the task restated last 0.71; a multi-turn chat (task,
the model's last answer as its own turn, then the feedback and "Try again: <task>")
0.78, the best but still short of best-of-4. None closes the gap, and the differences
between single-message wordings are within the run-to-run spread, so the prompt
wording was left unchanged. `candidates=2` spends half its calls on fresh samples of
the task, so it sits between plain refinement and best-of-4 when refinement rounds are
worth less than fresh samples.
"""

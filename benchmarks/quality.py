"""Search strategies at equal generator calls: on the real local model and on scripted refiners.

The local SmolLM2-135M-Instruct model (llama.cpp server, OpenAI protocol) gets the
keyword tasks of `dev_tasks.json`: write one sentence that uses all given words, scored
by `evaluators.contains_all(words)` (the fraction of the words present). Every method
samples with the same settings and has the same budget of 4 generator calls per task
(except single-shot's 1); each task's score is the best score the method reached:

- `single-shot`: one answer to the task;
- `best-of-3`: three independent answers, the best kept (the ceiling of a strategy
  that must spend one of its 4 calls on a refinement that does not help);
- `best-of-4`: four independent answers to the task, the best kept;
- `sample`: the loop with `strategy="sample"` (best-of-4 through the loop);
- `chain` and `explore`, each with both refinement prompt forms (`messages`: the
  attempt as the model's own turn and the feedback as the next human message;
  `single`: one message): `create_refine_graph(model, contains_all(words),
  strategy=..., prompt_form=..., max_iterations=3)`, so up to 4 generations;
- `explore, single, warm`: the default with a LangGraph store (`InMemoryStore`) that
  the arm keeps over every task and run of a column, so its choices weigh the strategy
  record of the tasks before (the first run starts it empty; tasks run 4 at a time, so
  a task sees the record of those finished when it chooses).

The same arms also run against scripted refiners (`_scripted_refiner.py`) that add each
word the feedback names with probability 0.8 (strong), 0.3 (weak, and forget a word
with probability 0.1) or 0.1 (degrading: forget each word with probability 0.4, like a
small model rewriting what it was shown), over many more repetitions.

Loops stop early once every word is present (`target_score=1.0`) and never on a
plateau (`patience=None`), so no method is cut short before its 4 calls. The tasks run
4 at a time (the server's 4 slots); the whole set is repeated with fresh random seeds,
and the figure is the mean score over tasks, with the spread over repetitions.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from langgraph.store.memory import InMemoryStore

from benchmarks import _local
from benchmarks._harness import BenchResult, Figure, md_table, run_async
from langgraph_refine import create_refine_graph, evaluators
from langgraph_refine._decisions._options import DEFAULT_PROMPT_FORM, DEFAULT_STRATEGY

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


def best_of(n: int) -> Method:
    async def method(model: Any, words: list[str]) -> tuple[float, int]:
        check = evaluators.contains_all(words)
        best, calls = 0.0, 0
        for _ in range(n):  # sequential, so a perfect answer saves the remaining calls
            reply = await model.ainvoke(task_text(words))
            calls += 1
            best = max(best, check.evaluate(reply.text, {}).score)
            if best >= 1.0:
                break
        return best, calls

    return method


def refine_method(*, strategy: str, prompt_form: str = "messages", warm: bool = False) -> Method:
    """The loop as a method; `warm`: with one store of its own, kept over every call."""
    store = InMemoryStore() if warm else None

    async def method(model: Any, words: list[str]) -> tuple[float, int]:
        graph = create_refine_graph(
            model,
            evaluators.contains_all(words),
            max_iterations=CALLS - 1,
            patience=None,
            target_score=1.0,
            strategy=strategy,  # type: ignore[arg-type]
            prompt_form=prompt_form,  # type: ignore[arg-type]
        ).compile(store=store)
        state = await graph.ainvoke({"task": task_text(words)}, output_keys=["attempts", "usage"])
        scores = [a.evaluation.score for a in state["attempts"] if a.evaluation is not None]
        return max(scores, default=0.0), state["usage"].calls

    return method


def methods() -> dict[str, Method]:
    """The arms, a fresh store for the warm one: call once per column (model)."""
    return {
        "single-shot": single_shot,
        f"best-of-{CALLS - 1} (by hand)": best_of(CALLS - 1),
        f"best-of-{CALLS} (by hand)": best_of(CALLS),
        "sample": refine_method(strategy="sample"),
        "chain, messages": refine_method(strategy="chain", prompt_form="messages"),
        "chain, single": refine_method(strategy="chain", prompt_form="single"),
        "explore, messages": refine_method(strategy="explore", prompt_form="messages"),
        "explore, single": refine_method(strategy="explore", prompt_form="single"),
        WARM: refine_method(strategy="explore", prompt_form="single", warm=True),
    }


WARM = "explore, single, warm"
"""The default with a store kept over the column's tasks and runs (the issue's goal)."""
METHODS = tuple(methods())
SCRIPTED = {
    "strong (fix 0.8)": (0.8, 0.0),
    "weak (fix 0.3, forget 0.1)": (0.3, 0.1),
    "degrading (fix 0.1, forget 0.4)": (0.1, 0.4),
}
SCRIPTED_REPEATS = 40


async def run_repeat(
    model: Any, tasks: list[list[str]], arms: dict[str, Method]
) -> dict[str, list[tuple[float, int]]]:
    """One pass over every task with every method; tasks interleave across methods."""
    gate = asyncio.Semaphore(PARALLEL)
    out: dict[str, list[tuple[float, int]]] = {name: [] for name in arms}

    async def one(name: str, words: list[str]) -> None:
        async with gate:
            out[name].append(await arms[name](model, words))

    await asyncio.gather(*(one(name, words) for words in tasks for name in arms))
    return out


def _summary(results: list[dict[str, list[tuple[float, int]]]]) -> dict[str, Any]:
    means = {n: [statistics.fmean(s for s, _ in rep[n]) for rep in results] for n in METHODS}
    calls = {n: statistics.fmean(c for rep in results for _, c in rep[n]) for n in METHODS}
    return {"means": means, "calls": calls}


def _stdev(values: list[float]) -> float:
    return statistics.stdev(values) if len(values) > 1 else 0.0


def run_scripted(p_fix: float, p_forget: float, repeats: int, tasks: list[list[str]]) -> Any:
    from benchmarks._scripted_refiner import ScriptedRefiner

    async def all_repeats() -> list[dict[str, list[tuple[float, int]]]]:
        out, arms = [], methods()
        for seed in range(repeats):
            model = ScriptedRefiner(p_fix=p_fix, p_forget=p_forget, seed=seed)
            out.append(await run_repeat(model, tasks, arms))
        return out

    return _summary(run_async(all_repeats()))


def run(quick: bool = False) -> BenchResult:
    repeats = 1 if quick else 3
    tasks = load_tasks()[: 4 if quick else None]
    result = BenchResult(
        name="quality",
        title=f"Search strategies at {CALLS} generator calls: real model and scripted refiners",
    )
    scripted = {
        label: run_scripted(fix, forget, 3 if quick else SCRIPTED_REPEATS, tasks)
        for label, (fix, forget) in SCRIPTED.items()
    }
    # Quality, not timing: the model may take every core.
    server = _local.server(threads=os.cpu_count() or 2)
    model = server.chat_model(temperature=TEMPERATURE, max_tokens=MAX_TOKENS)

    async def all_repeats() -> list[dict[str, list[tuple[float, int]]]]:
        arms = methods()
        return [await run_repeat(model, tasks, arms) for _ in range(repeats)]

    real = _summary(run_async(all_repeats()))
    columns = {"SmolLM2 (real)": real, **scripted}
    best_of = f"best-of-{CALLS} (by hand)"
    real_best = statistics.fmean(real["means"][best_of])
    for name in METHODS:
        mean = statistics.fmean(real["means"][name])
        # The default without a store (a cold run), and with one kept over the runs.
        is_default = name in (f"{DEFAULT_STRATEGY}, {DEFAULT_PROMPT_FORM}", WARM)
        result.figures.append(
            Figure(
                name=f"mean keyword coverage on SmolLM2, {name}",
                value=mean,
                unit="",
                target=f">= best-of-{CALLS} ({real_best:.3f})" if is_default else "",
                passed=(mean >= real_best) if is_default else None,
                spread=f"sd {_stdev(real['means'][name]):.3f} over {repeats} runs",
            )
        )
    default = f"{DEFAULT_STRATEGY}, {DEFAULT_PROMPT_FORM}"
    strong = scripted["strong (fix 0.8)"]["means"]
    chain_strong = statistics.fmean(strong["chain, messages"])
    default_strong = statistics.fmean(strong[default])
    noise = (
        2
        * max(_stdev(strong["chain, messages"]), _stdev(strong[default]))
        / (SCRIPTED_REPEATS**0.5)
    )
    result.figures.append(
        Figure(
            name=f"scripted strong refiner: default ({default}) minus chain",
            value=default_strong - chain_strong,
            unit="",
            target=f"within noise (+-{noise:.3f})",
            passed=abs(default_strong - chain_strong) <= noise or default_strong > chain_strong,
        )
    )
    rows = []
    for name in METHODS:
        row = [name]
        for summary in columns.values():
            means = summary["means"][name]
            row.append(f"{statistics.fmean(means):.3f} (sd {_stdev(means):.3f})")
        row.append(f"{real['calls'][name]:.2f}")
        rows.append(row)
    result.tables.append(
        md_table(["method", *(f"{c}: mean coverage" for c in columns), "calls/task (real)"], rows)
    )
    result.notes.append(__doc__ or "")
    result.notes.append(verdict(columns))
    result.notes.append(
        f"{len(tasks)} tasks; real model: {repeats} runs, temperature {TEMPERATURE}, at most "
        f"{MAX_TOKENS} tokens per answer; scripted: {SCRIPTED_REPEATS} runs each. The sd is "
        "over runs (each run's figure is the mean over the tasks). The default is "
        f"`strategy={DEFAULT_STRATEGY!r}, prompt_form={DEFAULT_PROMPT_FORM!r}`."
    )
    return result


def verdict(columns: dict[str, Any]) -> str:
    """The paragraph that reads the table: which strategy wins where, and why the default."""

    def m(column: str, name: str) -> str:
        return f"{statistics.fmean(columns[column]['means'][name]):.3f}"

    real, strong, bad = "SmolLM2 (real)", "strong (fix 0.8)", "degrading (fix 0.1, forget 0.4)"
    b3, b4 = f"best-of-{CALLS - 1} (by hand)", f"best-of-{CALLS} (by hand)"
    default = f"{DEFAULT_STRATEGY}, {DEFAULT_PROMPT_FORM}"
    reached = float(m(real, default)) >= float(m(real, b4))
    sentences = [
        "**Verdict and the defaults.** Where refinement works (the strong scripted refiner)",
        f"`chain` leads ({m(strong, 'chain, single')}) and `sample` falls behind",
        f"({m(strong, 'sample')}); where it does not (SmolLM2, whose refinements mostly score",
        "below the attempt they refine: see `refine_outcomes`), `chain`",
        f"({m(real, 'chain, single')}) loses to best-of-{CALLS} ({m(real, b4)}).",
        f"No fixed strategy wins both. `explore` ({default}) scores {m(strong, default)} on",
        f"the strong refiner and {m(real, default)} on SmolLM2, so it is the default.",
        f"It {'reaches' if reached else 'does not reach'} best-of-{CALLS} on SmolLM2 in this run,",
        "and cannot be expected to on average: its first refinement round is fixed (the",
        "contract: round 1 refines attempt 0), so against a model whose refinements do not",
        f"help at most {CALLS - 1} of its {CALLS} calls are fresh samples and its ceiling is",
        f"about best-of-{CALLS - 1} ({m(real, b3)} on SmolLM2; on the degrading scripted",
        f"refiner `explore` {m(bad, default)} against best-of-{CALLS - 1} {m(bad, b3)} and",
        f"best-of-{CALLS} {m(bad, b4)}). The run-to-run spread on SmolLM2 is wide: `sample`",
        f"and best-of-{CALLS} are the same method and scored {m(real, 'sample')} and",
        f"{m(real, b4)} here. With a store kept over the tasks and runs (`{WARM}`),",
        "explore's record tells it how this model's refinements do from round 1 on: it",
        f"scores {m(real, WARM)} on SmolLM2 ({m(strong, WARM)} on the strong refiner,",
        f"{m(bad, WARM)} on the degrading one).",
        "Prompt form: `single` stays the default (`explore, messages`",
        f"{m(real, 'explore, messages')} on SmolLM2, {m(strong, 'explore, messages')} on the",
        'strong refiner), and `prompt_form="messages"` is there for chat models that use a',
        "conversation well.",
    ]
    return " ".join(sentences)

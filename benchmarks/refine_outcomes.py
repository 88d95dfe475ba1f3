"""What one refinement does to the attempt it refines, on the real model, against a fresh sample.

The evidence behind the `explore` strategy's rule. For each keyword task of
`dev_tasks.json` (the `quality` benchmark's tasks, model settings and evaluator), the loop
writes attempt 0 and refines it once (`strategy="chain"`, `max_iterations=1`), in each
refinement prompt form; beside it, one fresh answer to the task. Each outcome is
compared with attempt 0's score: raised, kept (equal), or fell. Runs whose attempt 0
already had every word are left out (there is nothing to refine).

A refinement that keeps its parent's score is what a capable model does when it misses
a fix; one that falls is a model degrading what it refines. `explore` samples afresh
once refinements have fallen more often than they raised the best score.
"""

from __future__ import annotations

import asyncio
import os
from collections import Counter
from typing import Any

from benchmarks import _local
from benchmarks._harness import BenchResult, Figure, md_table, run_async
from benchmarks.quality import MAX_TOKENS, PARALLEL, TEMPERATURE, load_tasks, task_text
from langgraph_refine import create_refine_graph, evaluators

FORMS = ("single", "messages")
OUTCOMES = ("raised", "kept", "fell")


def _outcome(score: float, parent: float) -> str:
    return "raised" if score > parent else "kept" if score == parent else "fell"


async def one(model: Any, words: list[str], form: str) -> tuple[str, str] | None:
    """(refinement outcome, fresh-sample outcome), or None when attempt 0 was perfect."""
    check = evaluators.contains_all(words)
    graph = create_refine_graph(
        model,
        check,
        max_iterations=1,
        patience=None,
        target_score=1.0,
        strategy="chain",
        prompt_form=form,  # type: ignore[arg-type]
    ).compile()
    state = await graph.ainvoke({"task": task_text(words)}, output_keys=["attempts"])
    attempts = state["attempts"]
    if len(attempts) < 2:
        return None
    fresh = check.evaluate((await model.ainvoke(task_text(words))).text, {}).score
    parent = attempts[0].score
    return _outcome(attempts[1].score, parent), _outcome(fresh, parent)


def run(quick: bool = False) -> BenchResult:
    tasks = load_tasks()[: 4 if quick else None]
    repeats = 1 if quick else 4
    server = _local.server(threads=os.cpu_count() or 2)  # quality, not timing
    model = server.chat_model(temperature=TEMPERATURE, max_tokens=MAX_TOKENS)

    async def all_runs() -> dict[str, list[tuple[str, str] | None]]:
        gate = asyncio.Semaphore(PARALLEL)

        async def gated(words: list[str], form: str) -> tuple[str, tuple[str, str] | None]:
            async with gate:
                return form, await one(model, words, form)

        done = await asyncio.gather(
            *(gated(w, f) for _ in range(repeats) for w in tasks for f in FORMS)
        )
        out: dict[str, list[tuple[str, str] | None]] = {form: [] for form in FORMS}
        for form, outcome in done:
            out[form].append(outcome)
        return out

    runs = run_async(all_runs())
    result = BenchResult(
        name="refine_outcomes",
        title="One refinement against one fresh sample, from the same attempt 0, on SmolLM2",
    )
    rows = []
    for form in FORMS:
        counted = [o for o in runs[form] if o is not None]
        refined = Counter(o[0] for o in counted)
        fresh = Counter(o[1] for o in counted)
        n = len(counted) or 1
        for label, counts in ((f"refinement ({form} form)", refined), ("fresh sample", fresh)):
            rows.append([label, *(f"{counts[o]} ({100 * counts[o] / n:.0f}%)" for o in OUTCOMES)])
        result.figures += [
            Figure(
                name=f"refinements that fell below attempt 0 ({form} form)",
                value=100 * refined["fell"] / n,
                unit="%",
            ),
            Figure(
                name=f"refinements that raised attempt 0's score ({form} form)",
                value=100 * refined["raised"] / n,
                unit="%",
            ),
            Figure(
                name=f"fresh samples that beat attempt 0 (beside the {form} runs)",
                value=100 * fresh["raised"] / n,
                unit="%",
            ),
        ]
    result.tables.append(md_table(["outcome against attempt 0", *OUTCOMES], rows))
    result.notes.append(__doc__ or "")
    result.notes.append(
        f"{len(tasks)} tasks x {repeats} runs per form, temperature {TEMPERATURE}, at most "
        f"{MAX_TOKENS} tokens per answer; runs whose attempt 0 was perfect are not counted."
    )
    return result

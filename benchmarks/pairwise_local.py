"""The real local model as the pairwise comparer: do its two orders agree?

SmolLM2-135M-Instruct writes two answers (temperature 0.9, two seeds) to each keyword
task of `dev_tasks.json` ("one sentence using the words ..."), then compares every pair
with the library's pairwise prompt (`ModelComparer`, temperature 0), in both orders.

Counted per pair:

- position-consistent: both orders name the same answer (the pair has a winner);
- first-preferred: both orders say the first-shown answer is better (pure position bias);
- unreadable: a reply that named no preference (read as a tie);
- agreement with keyword coverage: among consistent pairs whose answers cover a
  different number of the task's words, how often the winner covers more.

`select="pairwise"` counts a disagreeing pair as a tie, so a comparer that is not
position-consistent makes the choice fall back to the scores.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from benchmarks import _local
from benchmarks._harness import BenchResult, Figure, md_table
from langgraph_refine._loop._select import ModelComparer, outcome, read_preference

TASKS = Path(__file__).with_name("dev_tasks.json")
GENERATION_TOKENS = 60
COMPARE_TOKENS = 8


def _model(**kwargs: Any) -> Any:
    if os.environ.get("LANGGRAPH_REFINE_LOCAL_BASE_URL"):
        from langgraph_refine.local_model import chat_model

        return chat_model(**kwargs)
    # One thread: another llama-server may be busy on these cores.
    return _local.server(threads=1).chat_model(**kwargs)


def coverage(text: str, words: list[str]) -> int:
    return sum(bool(re.search(rf"\b{re.escape(w)}\b", text, re.IGNORECASE)) for w in words)


def run(quick: bool = False) -> BenchResult:
    """Ask the local model to compare answer pairs in both orders."""
    word_sets: list[list[str]] = json.loads(TASKS.read_text())[: 4 if quick else 16]
    tasks = [f"Write one sentence that uses the words {', '.join(words)}." for words in word_sets]
    answers = []
    for seed in (1, 2):
        model = _model(temperature=0.9, max_tokens=GENERATION_TOKENS, seed=seed)
        answers.append([str(model.invoke(task).text).strip() for task in tasks])
    comparer = ModelComparer(_model(temperature=0.0, max_tokens=COMPARE_TOKENS, seed=0))
    rows = []
    consistent = first_biased = unreadable = replies = 0
    covered = agree = 0
    for words, task, a, b in zip(word_sets, tasks, answers[0], answers[1], strict=True):
        raw_forward = str(comparer.model.invoke(comparer.messages(task, a, b)).text)
        raw_backward = str(comparer.model.invoke(comparer.messages(task, b, a)).text)
        forward, backward = read_preference(raw_forward), read_preference(raw_backward)
        replies += 2
        unreadable += sum(
            p == "tie" and "tie" not in r.lower()
            for p, r in ((forward, raw_forward), (backward, raw_backward))
        )
        winner = outcome(0, 1, forward, backward)
        consistent += winner is not None
        first_biased += forward == "first" and backward == "first"
        ca, cb = coverage(a, words), coverage(b, words)
        if winner is not None and ca != cb:
            covered += 1
            agree += (winner == 0) == (ca > cb)
        rows.append([", ".join(words), ca, cb, forward, backward, "tie" if winner is None else
                     ("A" if winner == 0 else "B")])  # fmt: skip
    n = len(tasks)
    figures = [
        Figure(
            name="pairs whose two orders agree (position consistency)",
            value=100 * consistent / n,
            unit="%",
            spread=f"{consistent} of {n} pairs",
        ),
        Figure(
            name="pairs where both orders prefer the first-shown answer",
            value=100 * first_biased / n,
            unit="%",
            spread=f"{first_biased} of {n}",
        ),
        Figure(
            name="replies that named no preference (read as a tie)",
            value=100 * unreadable / replies,
            unit="%",
            spread=f"{unreadable} of {replies}",
        ),
    ]
    notes = []
    if covered:
        figures.append(
            Figure(
                name="consistent winners that cover more of the task's words",
                value=100 * agree / covered,
                unit="%",
                spread=f"{agree} of {covered} pairs with a winner and unequal coverage",
            )
        )
    else:
        notes.append(
            "No pair had a winner with unequal keyword coverage, so agreement with coverage "
            "cannot be measured on this run."
        )
    if first_biased == n:
        notes.append(
            "Every comparison named the response shown first: the model answers with "
            'position, not content. With it as the comparer `select="pairwise"` ties '
            "every pair and falls back to the scores, paying two calls per pair for "
            "nothing; use a stronger comparer (or none) with models this small."
        )
    return BenchResult(
        name="pairwise_local",
        title="The local SmolLM2-135M as the pairwise comparer: position consistency",
        figures=figures,
        notes=[
            "Two answers per keyword task (temperature 0.9, seeds 1 and 2, at most "
            f"{GENERATION_TOKENS} tokens); each pair compared with the library's pairwise "
            f"prompt at temperature 0 (at most {COMPARE_TOKENS} tokens), A/B and B/A. A 135M "
            "model is far below what a real comparer should be: this measures what "
            '`select="pairwise"` does with such a judge, where inconsistent pairs become '
            "ties and the scores decide.",
            *notes,
        ],
        tables=[
            md_table(
                [
                    "words",
                    "coverage A",
                    "coverage B",
                    "order A, B says",
                    "order B, A says",
                    "winner",
                ],
                rows,
            )
        ],
    )

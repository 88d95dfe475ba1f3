"""How often a real judge contradicts itself, in its raw replies and in what `llm_judge` returns.

The local SmolLM2-135M-Instruct model answers 16 short tasks (a haiku, one-sentence
definitions, a short list, ...) once each at temperature 0, and then judges each answer
with `evaluators.llm_judge` (native structured output, `max_tokens=120`) under several
sampling seeds at temperature 0.7. A reply contradicts itself when its verdict
disagrees with its own score normalised into [0, 1]: PASS below 0.5, or FAIL above 0.5.

Counted:

- raw replies: every reply the judge model wrote, retries included, read with the same
  parser the judge uses (`read_reply`);
- first replies: only the first reply of each evaluation, which is what the judge's
  prompt alone produces (the fair comparison between two versions of the prompt);
- returned evaluations whose verdict contradicts their score: what the loop would act
  on (a contradicting PASS stops the loop as "passed" with a low score);
- evaluations whose verdict was dropped after asking again, and judge calls per
  evaluation (the cost of asking again).

Run it on an older version of the library (with that version's `src` first on
`PYTHONPATH`) to compare: the script uses only names both versions have.
"""

from __future__ import annotations

import os
import statistics
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler

from benchmarks import _local
from benchmarks._harness import BenchResult, Figure, md_table
from langgraph_refine.evaluators import llm_judge
from langgraph_refine.evaluators._judge import normalise_score, read_reply

TASKS = (
    "Write a haiku about autumn leaves.",
    "Define photosynthesis in one sentence.",
    "Define a prime number in one sentence.",
    "Name three primary colours, separated by commas.",
    "Explain what a noun is in one sentence.",
    "Write a one-sentence summary of the story of Cinderella.",
    "Give the capital of France and one fact about it, in one sentence.",
    "Define gravity in one sentence.",
    "Write a haiku about the sea.",
    "Explain in one sentence why the sky is blue.",
    "Define an adjective in one sentence, with an example.",
    "Write a two-line rhyming poem about a cat.",
    "Define democracy in one sentence.",
    "List the first five even numbers.",
    "Explain in one sentence what a thermometer measures.",
    "Write one sentence that uses the words river, lamp and owl.",
)
JUDGE_TEMPERATURE = 0.7
GENERATION_TOKENS = 80
JUDGE_TOKENS = 120
MIDPOINT = 0.5


class ReplyLog(BaseCallbackHandler):
    """Keeps the text of every reply the model it is attached to writes."""

    def __init__(self) -> None:
        self.replies: list[str] = []

    def on_llm_end(self, response: Any, **kwargs: Any) -> None:
        """Keep the reply's text."""
        for generations in response.generations:
            for generation in generations:
                self.replies.append(str(getattr(generation, "text", "") or ""))


def contradicts(verdict: Any, score: float | None) -> bool:
    """PASS below the midpoint or FAIL above it."""
    if score is None:
        return False
    return (verdict == "PASS" and score < MIDPOINT) or (verdict == "FAIL" and score > MIDPOINT)


def reply_contradicts(text: str, response: str) -> bool | None:
    """Whether one raw reply contradicts itself; None if it cannot be read."""
    reading, _ = read_reply(text, response)
    if reading is None:
        return None
    if reading.fraction is not None:
        score: float | None = min(1.0, max(0.0, reading.fraction))
    elif reading.raw_score is not None:
        score = normalise_score(reading.raw_score)[0]
    else:
        score = None
    return contradicts(reading.verdict, score)


def _model(**kwargs: Any) -> Any:
    # A server started by `python -m langgraph_refine.local_model run -- ...` if there is
    # one, else the benchmarks' own.
    if os.environ.get("LANGGRAPH_REFINE_LOCAL_BASE_URL"):
        from langgraph_refine.local_model import chat_model

        return chat_model(**kwargs)
    return _local.server().chat_model(**kwargs)


def answers(tasks: tuple[str, ...]) -> list[str]:
    """One answer per task, at temperature 0 so every run judges the same texts."""
    model = _model(temperature=0.0, max_tokens=GENERATION_TOKENS, seed=0)
    return [str(model.invoke(task).text).strip() for task in tasks]


def judge_all(tasks: tuple[str, ...], texts: list[str], seeds: range) -> dict[str, Any]:
    """Judge every answer once per seed; count contradictions."""
    counts: dict[str, Any] = {
        "raw": 0,
        "raw_read": 0,
        "raw_total": 0,
        "first": 0,
        "first_read": 0,
        "returned": 0,
        "dropped": 0,
        "evaluations": 0,
        "calls": [],
        "verdicts": {},
    }
    for seed in seeds:
        log = ReplyLog()
        model = _model(
            temperature=JUDGE_TEMPERATURE, max_tokens=JUDGE_TOKENS, seed=seed, callbacks=[log]
        )
        judge = llm_judge(model)
        for task, text in zip(tasks, texts, strict=True):
            before = len(log.replies)
            evaluation = judge.evaluate(text, {"task": task})
            replies = log.replies[before:]
            readings = [reply_contradicts(r, text) for r in replies]
            counts["raw_total"] += len(replies)
            counts["raw_read"] += sum(r is not None for r in readings)
            counts["raw"] += sum(r is True for r in readings)
            if readings:
                counts["first_read"] += readings[0] is not None
                counts["first"] += readings[0] is True
            counts["evaluations"] += 1
            counts["returned"] += contradicts(evaluation.verdict, evaluation.score)
            counts["dropped"] += "contradiction" in evaluation.details
            counts["calls"].append(len(replies))
            verdict = str(evaluation.verdict)
            counts["verdicts"][verdict] = counts["verdicts"].get(verdict, 0) + 1
    return counts


def _share(part: int, whole: int) -> float:
    return 100.0 * part / whole if whole else 0.0


def run(quick: bool = False) -> BenchResult:
    tasks = TASKS[:4] if quick else TASKS
    seeds = range(1) if quick else range(4)
    texts = answers(tasks)
    counts = judge_all(tasks, texts, seeds)
    n = counts["evaluations"]
    result = BenchResult(
        name="judge_contradictions",
        title=f"SmolLM2 as judge: self-contradicting replies over {n} evaluations",
    )
    result.figures += [
        Figure(
            name="returned evaluations whose verdict contradicts their score",
            value=_share(counts["returned"], n),
            unit="%",
            target="0%",
            passed=counts["returned"] == 0,
        ),
        Figure(
            name="first replies that contradict themselves (of those readable)",
            value=_share(counts["first"], counts["first_read"]),
            unit="%",
        ),
        Figure(
            name="raw replies that contradict themselves (of those readable, retries included)",
            value=_share(counts["raw"], counts["raw_read"]),
            unit="%",
        ),
        Figure(
            name="evaluations whose verdict was dropped",
            value=_share(counts["dropped"], n),
            unit="%",
        ),
        Figure(
            name="judge calls per evaluation",
            value=statistics.fmean(counts["calls"]) if counts["calls"] else 0.0,
            unit="",
        ),
    ]
    result.tables.append(
        md_table(
            ["evaluations", "raw replies", "readable", "contradicting", "first contradicting"],
            [
                [
                    n,
                    counts["raw_total"],
                    counts["raw_read"],
                    counts["raw"],
                    f"{counts['first']} of {counts['first_read']}",
                ]
            ],
        )
    )
    result.tables.append(
        md_table(["returned verdict", "evaluations"], sorted(counts["verdicts"].items()))
    )
    result.notes.append(__doc__ or "")
    return result

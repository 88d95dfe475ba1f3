"""Cheap checks first: `cascade(word_count, judge)` against `combine(word_count, judge)`.

Both evaluators hold the same two checks: a word range (free) and an LLM judge (a paid
model call) that checks the task's required words. `combine` runs both on every draft;
`cascade` asks the judge only about drafts of the right length. The question is what
that saves (judge calls, cost) and what it costs (rounds, final quality).

The task set mixes lengths and difficulty: one task per word set of `dev_tasks.json`
("Write a paragraph of LO to HI words that uses all of these words: a, b, c, d."), the
range and the writer's skill at hitting it varying by task (`RANGES`, `LENGTH_SKILL`:
the chance a first draft is in range, and the chance a refinement told the length is
wrong brings it into range), so some tasks almost never miss the range (the cascade
saves nothing there) and others usually do, and keep missing it. Both models are
scripted chat models, run through `refine` (the library's own loop, meter and LLM
judge, reply parsing included):

- the writer drafts a paragraph of some length holding each required word with
  probability `P_WORD`; a first draft hits the range with the task's first skill, else
  it is far too long or too short. Refining, it fixes the length when the feedback names
  it (with the task's fix skill; else the length stays wrong), adds each word the
  feedback names as missing (with `P_FIX_WORD`), and keeps what it had (dropping each
  word with `P_FORGET`);
- the judge reads the task's words and the response from its prompt and replies in
  JSON: the share of words present as its score, PASS when all are, and the missing
  words named in its feedback. It does not judge length (the word range does).

Each call reports fixed token counts, priced by `Budget(prices=...)`, so the loop's own
meter reports the cost: a judge call costs `JUDGE_CALL_COST`, a draft `WRITER_CALL_COST`.
Every loop runs with `strategy="chain"` (the moves do not depend on what earlier tasks
taught) under two settings (`SETTINGS`): the loop's defaults (`max_iterations=4`,
`patience=2`), and room to finish (`max_iterations=8`, no `patience`), where a loop
stops when it passes: the equal-quality comparison. Final quality is measured on the
returned answer, outside the loop: the mean of its word-range score and its share of
required words (1.0 = solved). Each repetition runs every task under both evaluators
with the same seeds; figures are medians over repetitions with their 25th-75th spread.
"""

from __future__ import annotations

import json
import random
import re
import statistics
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from benchmarks._harness import BenchResult, Figure, md_table, median, spread_text
from langgraph_refine import Budget, refine
from langgraph_refine.evaluators import cascade, combine, count_words, llm_judge, word_count

TASKS_FILE = Path(__file__).resolve().parent / "dev_tasks.json"
RANGES = ((20, 40), (10, 20), (30, 50), (15, 30))
LENGTH_SKILL = ((0.9, 0.95), (0.6, 0.8), (0.35, 0.5), (0.1, 0.3))
"""By task (cycled): the chance a first draft is in range, and the chance a refinement
told of the length brings it into range. A mixed set: a range the writer misses is also
one it is slow to fix."""
P_WORD = 0.6
P_FIX_WORD = 0.85
P_FORGET = 0.05
SETTINGS: dict[str, dict[str, Any]] = {
    "room to finish": {"max_iterations": 8, "patience": None},
    "loop defaults": {"max_iterations": 4},
}
"""The loop options of each comparison; the first is the headline (equal final quality)."""
REPEATS = 10
QUICK_REPEATS = 2
QUICK_TASKS = 4

WRITER, JUDGE = "bench-writer", "bench-judge"
WRITER_TOKENS = (400, 150)
JUDGE_TOKENS = (800, 80)
PRICES = {
    WRITER: {"input": 0.15, "output": 0.60},  # USD per million tokens: a small model
    JUDGE: {"input": 2.50, "output": 10.00},  # a large one
}
WRITER_CALL_COST = (WRITER_TOKENS[0] * 0.15 + WRITER_TOKENS[1] * 0.60) / 1e6
JUDGE_CALL_COST = (JUDGE_TOKENS[0] * 2.50 + JUDGE_TOKENS[1] * 10.00) / 1e6
SAME_QUALITY = 0.02
"""Final quality counts as equal when the means differ by at most this much."""
JUDGE_CALLS_GOAL = 0.4
"""The cascade's goal: at most this share of `combine`'s judge calls, at equal quality."""

_TASK = re.compile(r"of (\d+) to (\d+) words that uses all of these words: ([^.\n]+)\.")
_ANSWER = re.compile(r"<answer>\n(.*?)\n</answer>", re.S)
_FEEDBACK = re.compile(r"Feedback on this attempt:\n(.*?)(?:\n\n#|\Z)", re.S)
_RATED = re.compile(r"<response_to_rate>\n(.*?)\n</response_to_rate>", re.S)
_FILLER = [
    "the",
    "quiet",
    "morning",
    "light",
    "fell",
    "across",
    "an",
    "old",
    "street",
    "where",
    "people",
    "walked",
    "slowly",
    "past",
    "shops",
    "and",
    "small",
    "gardens",
    "while",
    "birds",
    "sang",
    "above",
    "them",
    "in",
    "tall",
    "green",
    "trees",
]


@dataclass(frozen=True)
class Task:
    """One task of the set: its words, its range, and the writer's skill at the range."""

    words: tuple[str, ...]
    low: int
    high: int
    skill: float
    fix: float

    @property
    def text(self) -> str:
        """The task as the loop is given it."""
        return (
            f"Write a paragraph of {self.low} to {self.high} words that uses all of these "
            f"words: {', '.join(self.words)}."
        )

    def quality(self, response: str) -> float:
        """The answer's true quality: its word-range score and its share of the words."""
        length = word_count(self.low, self.high).evaluate(response, {}).score
        present = _words(response)
        share = sum(w in present for w in self.words) / len(self.words)
        return (length + share) / 2


def _words(text: str) -> set[str]:
    """The words of a text, lower-cased, without punctuation."""
    return set(re.findall(r"[a-z]+", text.lower()))


def load_tasks() -> list[Task]:
    sets = json.loads(TASKS_FILE.read_text())
    return [
        Task(tuple(words), *RANGES[i % len(RANGES)], *LENGTH_SKILL[i % len(LENGTH_SKILL)])
        for i, words in enumerate(sets)
    ]


def _usage(tokens: tuple[int, int]) -> dict[str, int]:
    return {"input_tokens": tokens[0], "output_tokens": tokens[1], "total_tokens": sum(tokens)}


class Writer(BaseChatModel):
    """The scripted writer (see the module's docstring)."""

    model: str = WRITER
    skill: float = 0.5
    fix: float = 0.8
    seed: int = 0
    rng: Any = None

    @property
    def _llm_type(self) -> str:
        return "scripted-writer"

    def model_post_init(self, context: Any) -> None:
        """Seed the writer's own random draws."""
        self.rng = random.Random(self.seed)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        text = "\n".join(str(m.content) for m in messages)
        found = _TASK.search(text)
        if found is None:
            raise ValueError(f"the scripted writer got no task it knows: {text[:200]!r}")
        low, high = int(found.group(1)), int(found.group(2))
        words = [w.strip() for w in found.group(3).split(",")]
        answers, feedback = _ANSWER.findall(text), _FEEDBACK.findall(text)
        if answers and feedback:
            answer = self._refine(answers[-1], feedback[-1], words, low, high)
        else:
            have = [w for w in words if self.rng.random() < P_WORD]
            answer = self._write(have, self._length(low, high, self.skill))
        message = AIMessage(answer, usage_metadata=_usage(WRITER_TOKENS))
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _length(self, low: int, high: int, skill: float) -> int:
        if self.rng.random() < skill:
            return self.rng.randint(low, high)
        if self.rng.random() < 0.5:
            return self.rng.randint(int(high * 1.3) + 1, int(high * 2.2))
        return self.rng.randint(max(5, int(low * 0.4)), max(5, int(low * 0.8)))

    def _refine(self, before: str, feedback: str, words: list[str], low: int, high: int) -> str:
        had = _words(before)
        have = [w for w in words if w in had and self.rng.random() >= P_FORGET]
        missing = set(re.findall(r'"([^"]+)"', feedback.split("Missing", 1)[-1]))
        have += [
            w
            for w in words
            if w not in have and w in missing and "Missing" in feedback
            if self.rng.random() < P_FIX_WORD
        ]
        length = count_words(before)
        if "cut at least" in feedback or "add at least" in feedback:
            length = self._length(low, high, self.fix)
        return self._write(have, length)

    def _write(self, have: Sequence[str], length: int) -> str:
        filler = [_FILLER[i % len(_FILLER)] for i in range(max(0, length - len(have)))]
        for word in have:  # the required words spread through the filler
            filler.insert(self.rng.randint(0, len(filler)), word)
        text = " ".join(filler)
        return text[:1].upper() + text[1:] + "."


class Judge(BaseChatModel):
    """The scripted judge: the share of the task's words the response holds."""

    model: str = JUDGE

    @property
    def _llm_type(self) -> str:
        return "scripted-judge"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        text = "\n".join(str(m.content) for m in messages)
        found, rated = _TASK.search(text), _RATED.search(text)
        if found is None or rated is None:
            raise ValueError(f"the scripted judge got no task or response: {text[:200]!r}")
        words = [w.strip() for w in found.group(3).split(",")]
        present = _words(rated.group(1))
        missing = [w for w in words if w not in present]
        score = 1.0 - len(missing) / len(words)
        if missing:
            named = ", ".join(f'"{w}"' for w in missing)
            feedback = f"Missing required words: {named}. Use each of them."
        else:
            feedback = "Uses every required word."
        reply = {
            "feedback": feedback,
            "verdict": "PASS" if not missing else "NEEDS_IMPROVEMENT",
            "score": score,
        }
        message = AIMessage(json.dumps(reply), usage_metadata=_usage(JUDGE_TOKENS))
        return ChatResult(generations=[ChatGeneration(message=message)])


@dataclass(frozen=True)
class Outcome:
    """One loop's outcome under one evaluator."""

    judge_calls: int
    writer_calls: int
    cost: float
    quality: float
    stop_reason: str


Build = Callable[[Any, Any], Any]
VARIANTS: dict[str, Build] = {"combine": combine, "cascade": cascade}


class _CountingJudge(Judge):
    """The judge, counting its calls as its provider would bill them."""

    calls: list[int] = []

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self.calls.append(1)
        return super()._generate(messages, *args, **kwargs)


def run_task(task: Task, build: Build, seed: int, options: dict[str, Any]) -> Outcome:
    """One loop on `task` with the evaluator `build(word_count, judge)` makes."""
    judge_model = _CountingJudge(calls=[])
    result = refine(
        Writer(skill=task.skill, fix=task.fix, seed=seed),
        task.text,
        build(word_count(task.low, task.high), llm_judge(judge_model, structured_output=False)),
        budget=Budget(prices=PRICES),
        strategy="chain",
        **options,
    )
    if result.usage.cost is None:
        raise RuntimeError("the loop could not price a call; check PRICES")
    judged = len(judge_model.calls)
    return Outcome(
        judge_calls=judged,
        writer_calls=result.usage.calls - judged,
        cost=result.usage.cost,
        quality=task.quality(result.value),
        stop_reason=str(result.stop_reason),
    )


Repeat = dict[str, list[Outcome]]


def run_repeat(tasks: Sequence[Task], repeat: int, options: dict[str, Any]) -> Repeat:
    """Every task under each evaluator, with the same writer seed for both."""
    return {
        name: [run_task(task, build, 1000 * repeat + i, options) for i, task in enumerate(tasks)]
        for name, build in VARIANTS.items()
    }


def _mean(outcomes: Sequence[Outcome], field: str) -> float:
    return statistics.fmean(float(getattr(o, field)) for o in outcomes)


def _per_rep(reps: Sequence[Repeat], name: str, field: str) -> list[float]:
    return [_mean(rep[name], field) for rep in reps]


def _paired(
    reps: Sequence[Repeat], field: str, how: Callable[[float, float], float]
) -> list[float]:
    cascaded, combined = _per_rep(reps, "cascade", field), _per_rep(reps, "combine", field)
    return [how(c, m) for c, m in zip(cascaded, combined, strict=True)]


def figures(reps: Sequence[Repeat], setting: str, headline: bool) -> list[Figure]:
    """Judge calls and cost (ratios) and final quality (difference), cascade vs combine."""
    judge = _paired(reps, "judge_calls", lambda c, m: c / m)
    cost = _paired(reps, "cost", lambda c, m: c / m)
    gap = _paired(reps, "quality", lambda c, m: c - m)
    suffix = f" ({setting})"

    def goal(value: bool) -> bool | None:
        return value if headline else None

    return [
        Figure(
            "judge calls, cascade / combine" + suffix,
            median(judge),
            target=f"<= {JUDGE_CALLS_GOAL}x" if headline else "",
            passed=goal(median(judge) <= JUDGE_CALLS_GOAL),
            spread=spread_text(judge),
        ),
        Figure(
            "cost, cascade / combine" + suffix,
            median(cost),
            target="< 1x" if headline else "",
            passed=goal(median(cost) < 1.0),
            spread=spread_text(cost),
        ),
        Figure(  # the mean, not the median: most repetitions differ by nothing
            "final quality, cascade - combine, mean" + suffix,
            statistics.fmean(gap),
            unit="",
            target=f">= -{SAME_QUALITY}" if headline else "",
            passed=goal(statistics.fmean(gap) >= -SAME_QUALITY),
            spread=spread_text(gap, "{:+.3f}"),
        ),
    ]


def summary_rows(reps: Sequence[Repeat], setting: str) -> list[list[Any]]:
    rows = []
    for name in VARIANTS:
        row: list[Any] = [setting, name]
        for field, fmt in (
            ("judge_calls", "{:.2f}"),
            ("writer_calls", "{:.2f}"),
            ("cost", "${:.5f}"),
            ("quality", "{:.3f}"),
        ):
            values = _per_rep(reps, name, field)
            row.append(f"{fmt.format(median(values))} ({spread_text(values, fmt)})")
        solved = [statistics.fmean(o.quality >= 1.0 for o in rep[name]) * 100 for rep in reps]
        row.append(f"{median(solved):.0f}%")
        stops = Counter(o.stop_reason for rep in reps for o in rep[name])
        row.append(", ".join(f"{reason} {n}" for reason, n in stops.most_common()))
        rows.append(row)
    return rows


def skill_rows(reps: Sequence[Repeat], tasks: Sequence[Task], setting: str) -> list[list[Any]]:
    rows = []
    for skill, fix in sorted(set(LENGTH_SKILL), reverse=True):
        cells: list[Any] = [setting, f"{skill:.0%} / {fix:.0%}"]
        for name in VARIANTS:
            chosen = [
                o
                for rep in reps
                for t, o in zip(tasks, rep[name], strict=True)
                if (t.skill, t.fix) == (skill, fix)
            ]
            if chosen:
                cells += [f"{_mean(chosen, 'judge_calls'):.2f}", f"{_mean(chosen, 'quality'):.3f}"]
        if len(cells) == 6:
            rows.append(cells)
    return rows


def run(quick: bool = False) -> BenchResult:
    tasks = load_tasks()[:QUICK_TASKS] if quick else load_tasks()
    repeats = QUICK_REPEATS if quick else REPEATS
    found: list[Figure] = []
    summary: list[list[Any]] = []
    by_skill: list[list[Any]] = []
    for i, (setting, options) in enumerate(SETTINGS.items()):
        reps = [run_repeat(tasks, r, options) for r in range(repeats)]
        found += figures(reps, setting, headline=i == 0)
        summary += summary_rows(reps, setting)
        by_skill += skill_rows(reps, tasks, setting)
    notes = [
        (
            f"{len(tasks)} tasks x {repeats} repetitions per evaluator and setting, a scripted "
            f"writer and judge priced per call (judge ${JUDGE_CALL_COST:.4f}, writer "
            f'${WRITER_CALL_COST:.5f}), `strategy="chain"`. Values are medians over '
            "repetitions of the per-task means (the quality gap: their mean), with the "
            "25th-75th percentile spread; the figures for the loop's defaults are context, "
            "the ones with room to finish are the comparison at equal final quality."
        ),
        (
            "The cascade trades judge calls for drafts: its feedback on a draft of the wrong "
            "length names the length only, so the words the judge would have asked for "
            "wait a round, where `combine` names both at once. With room to finish, the "
            "extra drafts (a cheap model's) cost far less than the judge calls saved, at "
            "the same final quality. Under the loop's defaults (4 refinement rounds, "
            "`patience=2`) the rounds spent on length are missing at the end on the tasks "
            "whose range the writer rarely hits (the last rows of the per-skill table), "
            "and those runs end with the words never checked: give a cascade more rounds "
            "(its drafts are the cheap part) rather than fewer. `combine` also stops on "
            "`target_reached` with a draft of the wrong length when its judge score "
            "lifts the mean to 0.9; a cascade cannot (a draft the word range stops scores "
            "below 0.5)."
        ),
        (
            "Ranking: an answer the judge scored outranks any answer the word range "
            "stopped (`Evaluation.reach`, read by the one best-attempt rule), and the "
            "judge's score is the cascade's, never lifted. On this task mix, with the same "
            "seeds, every figure is the one the earlier rule gave (a stopped draft "
            "outscoring a judged one is rare here: the judge scores the share of words, "
            "and a stopped draft scores at most half its word-range score)."
        ),
        (
            f"The goal of at most {JUDGE_CALLS_GOAL}x of `combine`'s judge calls is not "
            "reached on this mix: the cascade asks the "
            "judge about every draft in range, and every solved task needs at least one "
            "judged draft, so its floor is about one call per task against `combine`'s "
            "one per draft (3.0 per task with room to finish: a floor near 0.33x). It "
            "reaches 0.4x only where at most about one in five judged drafts fails the "
            "judge; here the writer's first in-range draft holds every required word "
            f"with probability {P_WORD}^4, so most tasks pay two or three judged drafts."
        ),
    ]
    return BenchResult(
        name="cascade",
        title="cascade vs combine: judge calls and cost at equal final quality",
        figures=found,
        notes=notes,
        tables=[
            md_table(
                [
                    "setting",
                    "evaluator",
                    "judge calls/task",
                    "drafts/task",
                    "cost/task",
                    "quality",
                    "solved",
                    "stops",
                ],
                summary,
            ),
            md_table(
                [
                    "setting",
                    "draft in range: first / after feedback",
                    "combine judge calls",
                    "combine quality",
                    "cascade judge calls",
                    "cascade quality",
                ],
                by_skill,
            ),
        ],
    )

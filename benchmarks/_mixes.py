"""Random task mixes for the ladder and strategies benchmarks, driven without the graph.

A mix is drawn from a seed (printed with every result), so no rule can be tuned to one
mix: the benchmarks report the share of mixes on which each goal holds. The runs drive
the library's own decisions (`choose_next`, `next_rung`, `round_stats`, `state_stats`)
on scripted answers, adding each finished run's counts to a pooled record the way the
store does (`RecordUpdate.writes` and `others`), so thousands of runs take seconds.

An answer to a task of `WORDS` words holds some of them; its score is the share it
holds, the target is every word (1.0). A fresh answer holds each word with the model's
`first` probability for the task's difficulty; a refinement keeps each word it started
from with probability `1 - drop` and adds each missing one with probability `fix`.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from langgraph_refine import Attempt, Evaluation
from langgraph_refine._decisions._ladder import next_rung, reach_stats
from langgraph_refine._decisions._strategy import (
    MoveStats,
    choose_next,
    round_stats,
    score_counts,
    scores_as_counts,
    state_kind,
    state_stats,
)
from langgraph_refine._state import Strategy, Usage

WORDS = 8
"""Words per task: 8 bands of score, so a first answer tells much or little."""

Counts = dict[str, MoveStats]

TARGET = 1.0
"""The target of every scripted run: every word (a run stops when it gets there)."""

REACH = True
"""Count a ladder's runs by their first answer's state (`reach_stats`), as the store does:
False measures the ladder without the rule that reads them."""

RUNG_AWARE = True
"""Tell explore which rung will move (`choose_next(..., rung=)`), as the loop does."""


@dataclass(frozen=True)
class Skill:
    """A scripted model's skill on one difficulty of task.

    Attributes:
        first: The chance a fresh answer holds each word.
        fix: The chance a refinement adds each missing word.
        drop: The chance a refinement loses each word it started from.
    """

    first: float
    fix: float
    drop: float

    def answer(self, rng: random.Random, start: frozenset[int] | None) -> frozenset[int]:
        """The words of a new answer: fresh (`start` None) or refined from `start`."""
        if start is None:
            return frozenset(w for w in range(WORDS) if rng.random() < self.first)
        return frozenset(
            w
            for w in range(WORDS)
            if (w in start and rng.random() >= self.drop)
            or (w not in start and rng.random() < self.fix)
        )


@dataclass(frozen=True)
class Model:
    """A scripted model: a name, a price per call, and a skill per difficulty."""

    name: str
    price: float
    skills: Mapping[str, Skill]


@dataclass
class Outcome:
    """One run: the best score reached, what it cost, its calls and its moves."""

    score: float
    cost: float
    calls: int
    moves: list[str] = field(default_factory=list)


def pooled_counts(attempts: Sequence[Attempt]) -> Counts:
    """A finished run's counts as the store pools them: per kind, per kind and state, scores."""
    counts = dict(round_stats(attempts))
    for state, kinds in state_stats(attempts).items():
        counts.update({state_kind(kind, state): stats for kind, stats in kinds.items()})
    if REACH:
        counts.update(reach_stats(attempts, TARGET))
    counts.update(scores_as_counts(score_counts(attempts)))
    return counts


def add_into(record: Counts, counts: Mapping[str, MoveStats]) -> None:
    for kind, stats in counts.items():
        record[kind] = record.get(kind, MoveStats()) + stats


def drive(
    rungs: Sequence[Model],
    kind: str,
    task: str,
    rng: random.Random,
    *,
    strategy: Strategy,
    calls: int,
    record: Counts | None,
) -> Outcome:
    """One loop on a scripted task, as the graph runs it, without the graph.

    `record` (warm) is the pooled counts of earlier runs; this run's are added to it when
    it ends (runs here go one after another, so that is what the store would hand each
    choice). A ladder (several rungs) climbs by `next_rung`, with the rungs' prices known.
    """
    answers: list[frozenset[int]] = []
    attempts: list[Attempt] = []
    names = [m.name for m in rungs]
    prices = {m.name: m.price for m in rungs}
    move, parent, rung = "sample", None, 0
    for index in range(calls):
        model = rungs[rung]
        start = answers[parent] if parent is not None else None
        words = model.skills[kind].answer(rng, start)
        answers.append(words)
        attempts.append(
            Attempt(
                index=index,
                response="",
                evaluation=Evaluation(score=len(words) / WORDS),
                parent=parent,
                move=move,  # type: ignore[arg-type]
                model=model.name if len(rungs) > 1 else None,
                rung=rung if len(rungs) > 1 else None,
                usage=Usage(calls=1, cost=model.price),
            )
        )
        if len(words) == WORDS or index == calls - 1:
            break
        if len(rungs) > 1:
            rung = next_rung(
                attempts,
                names,
                record=record if strategy == "explore" else None,
                prices=prices,
            )
        moving = names[rung] if len(rungs) > 1 and RUNG_AWARE else None
        choice = choose_next(strategy, attempts, task, record, rung=moving)
        move, parent = choice.move, choice.parent
    if record is not None:
        add_into(record, pooled_counts(attempts))
    return Outcome(
        max(len(a) for a in answers) / WORDS,
        sum(a.usage.cost or 0.0 for a in attempts),
        len(attempts),
        [a.move or "" for a in attempts],
    )


# -- statistics --------------------------------------------------------------------------------


def mean(values: Sequence[float]) -> float:
    return statistics.fmean(values) if values else 0.0


def paired(a: Sequence[float], b: Sequence[float]) -> tuple[float, float, float]:
    """Mean of `a - b` paired by unit, and its 95% interval (normal approximation)."""
    diffs = [x - y for x, y in zip(a, b, strict=True)]
    m = mean(diffs)
    if len(diffs) < 2:
        return m, m, m
    half = 1.96 * statistics.stdev(diffs) / math.sqrt(len(diffs))
    return m, m - half, m + half


def fmt_interval(value: tuple[float, float, float], digits: int = 3) -> str:
    m, low, high = value
    return f"{m:+.{digits}f} [{low:+.{digits}f}, {high:+.{digits}f}]"


def cheapest_mix(
    classes: Mapping[str, tuple[float, Mapping[str, tuple[float, float]]]], quality: float
) -> float:
    """The least mean cost reaching mean `quality` by choosing an arm per task, knowing its class.

    Args:
        classes: Per class of task: its share, and per arm the class's (quality, cost).
        quality: The mean quality to reach (capped at the best reachable).

    Returns:
        The least cost per task (arms may be mixed within a class: a linear programme,
        solved greedily on each class's lower convex hull of cost against quality).
    """
    hulls = {c: _hull(list(arms.values())) for c, (_, arms) in classes.items()}
    share = {c: s for c, (s, _) in classes.items()}
    best = sum(share[c] * hulls[c][-1][0] for c in hulls)
    need = min(quality, best)
    at = {c: 0 for c in hulls}  # each class's point on its hull
    q = sum(share[c] * hulls[c][0][0] for c in hulls)
    cost = sum(share[c] * hulls[c][0][1] for c in hulls)
    while q < need - 1e-12:
        steps = [
            (
                (hulls[c][at[c] + 1][1] - hulls[c][at[c]][1])
                / (hulls[c][at[c] + 1][0] - hulls[c][at[c]][0]),
                c,
            )
            for c in hulls
            if at[c] + 1 < len(hulls[c])
        ]
        slope, c = min(steps)
        gain = share[c] * (hulls[c][at[c] + 1][0] - hulls[c][at[c]][0])
        if q + gain >= need:
            return cost + slope * (need - q)
        q += gain
        cost += share[c] * (hulls[c][at[c] + 1][1] - hulls[c][at[c]][1])
        at[c] += 1
    return cost


def _hull(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The lower-right convex hull of (quality, cost) points, by rising quality and cost."""
    cheapest = min(points, key=lambda p: (p[1], -p[0]))
    useful = sorted({p for p in points if p[0] > cheapest[0] and p[1] >= cheapest[1]})
    hull = [cheapest]
    for p in useful:
        while len(hull) >= 2:
            (q1, c1), (q2, c2) = hull[-2], hull[-1]
            if (c2 - c1) * (p[0] - q1) >= (p[1] - c1) * (q2 - q1):  # hull[-1] not below the chord
                hull.pop()
            else:
                break
        if p[1] >= hull[-1][1] and p[0] > hull[-1][0]:
            hull.append(p)
    # Dominated points (more cost, no more quality) never stay: quality rises along the hull.
    return hull

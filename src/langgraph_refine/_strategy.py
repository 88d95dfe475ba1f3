"""Search strategies: after each round, what the next round generates.

The choice is written to state as `refine_from`: the index of the attempt to refine, or
None for a fresh sample of the task alone.

- `"chain"`: always refine the latest attempt (classic self-refine).
- `"sample"`: always sample afresh (best-of-N through the loop).
- `"explore"`: refinement as a search, after REx (Tang et al. 2024, "Code Repair with
  LLMs gives an Exploration-Exploitation Tradeoff"). Round 1 refines attempt 0. A
  refinement that raised the best score is followed by a refinement of the best
  attempt (exploit while it works). Otherwise the loop first chooses the kind of move.
  It samples afresh when refinements have fallen below the attempt they refined more
  often than they raised the best score (a model that degrades what it refines), or
  when fresh samples have raised the best score more often than refinements so far
  (`(wins + 1) / (rounds + 2)` for each kind; ties refine). So a model whose
  refinements do not help is soon sampled instead, and one whose refinements work
  keeps refining. To refine, it picks the attempt by Thompson sampling over the
  evaluated attempts, each with REx's `Beta(1 + C*score, 1 + C*(1 - score) +
  times_refined)` belief, so an attempt refined without success loses weight.

Randomness is seeded from the task and the round, so a replayed round (after a crash)
and a recorded test make the same choice.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence

from langgraph_refine._result import best_attempt
from langgraph_refine._state import Attempt, Strategy

EXPLORE_WEIGHT = 5.0
"""REx's C: how strongly an arm's score shapes its belief (REx found 5-20 robust)."""


def choose_next(strategy: Strategy, attempts: Sequence[Attempt], task: str) -> int | None:
    """The attempt the next round refines, or None to sample afresh.

    Args:
        strategy: `"chain"`, `"explore"` or `"sample"`.
        attempts: Every attempt so far, in order; the last was just evaluated.
        task: The task, which seeds the explore strategy's draws.

    Returns:
        An attempt index, or None for a fresh sample.

    Example:
        >>> from langgraph_refine import Attempt, Evaluation
        >>> first = Attempt(index=0, response="a", evaluation=Evaluation(score=0.4))
        >>> choose_next("chain", [first], "t"), choose_next("sample", [first], "t")
        (0, None)
    """
    if not attempts:
        return None
    if strategy == "sample":
        return None
    if strategy == "chain":
        return attempts[-1].index
    return _explore(attempts, task)


def _explore(attempts: Sequence[Attempt], task: str) -> int | None:
    evaluated = [a for a in attempts if a.evaluation is not None]
    if not evaluated:
        return None
    best = best_attempt(evaluated)
    assert best is not None
    if len(attempts) == 1 or (attempts[-1].parent is not None and _raised_best(attempts)):
        return best.index
    (refine_wins, refines), (sample_wins, samples) = _record(attempts)
    # A refinement that scored below its parent is evidence of a model that degrades what
    # it refines (the local 135M model: two in three of its refinements fall, 2-4% raise;
    # `make bench BENCH=refine_outcomes`); one that kept its parent's score is not (a
    # strong model that missed a fix). Then: which kind
    # of move has raised the best score more often so far (Laplace-smoothed, ties to
    # refining)? With a handful of rounds a greedy choice measured better than a Thompson
    # draw: a draw samples away from a refiner that works half the time.
    if _fell(attempts) > refine_wins:
        return None
    if (sample_wins + 1) / (samples + 2) > (refine_wins + 1) / (refines + 2):
        return None
    rng = random.Random(_seed(task, len(attempts)))
    refined = _times_refined(attempts)
    draws = [(_draw(rng, _score(a), refined.get(a.index, 0)), a.index) for a in evaluated]
    return max(draws, key=lambda d: d[0])[1]  # ties go to the earlier attempt


def _record(attempts: Sequence[Attempt]) -> tuple[tuple[int, int], tuple[int, int]]:
    """(wins, rounds) of refinements and of fresh samples after the first attempt.

    A win is a round whose attempt raised the best score of the attempts before it.
    """
    refine, sample = [0, 0], [0, 0]
    for k in range(1, len(attempts)):
        if attempts[k].evaluation is None:
            continue
        kind = sample if attempts[k].parent is None else refine
        kind[1] += 1
        kind[0] += _raised_best(attempts[: k + 1])
    return (refine[0], refine[1]), (sample[0], sample[1])


def _fell(attempts: Sequence[Attempt]) -> int:
    """How many refinements scored below the attempt they refined."""
    by_index = {a.index: a for a in attempts}
    return sum(
        1
        for a in attempts
        if a.parent is not None
        and a.evaluation is not None
        and a.parent in by_index
        and _score(a) < _score(by_index[a.parent])
    )


def _raised_best(attempts: Sequence[Attempt]) -> bool:
    """True if the latest attempt beat every earlier one (by the best-attempt rule)."""
    earlier = best_attempt(attempts[:-1])
    latest = attempts[-1]
    return earlier is None or best_attempt([earlier, latest]) is latest


def _times_refined(attempts: Sequence[Attempt]) -> dict[int, int]:
    counts: dict[int, int] = {}
    for attempt in attempts:
        if attempt.parent is not None:
            counts[attempt.parent] = counts.get(attempt.parent, 0) + 1
    return counts


def _score(attempt: Attempt) -> float:
    evaluation = attempt.evaluation
    if evaluation is None:
        return 0.0
    return 1.0 if evaluation.verdict == "PASS" else evaluation.score


def _draw(rng: random.Random, score: float, tries: int) -> float:
    alpha = 1.0 + EXPLORE_WEIGHT * score
    beta = 1.0 + EXPLORE_WEIGHT * (1.0 - score) + tries
    return rng.betavariate(alpha, beta)


def _seed(task: str, round_number: int) -> int:
    digest = hashlib.sha256(f"{round_number}:{task}".encode()).digest()
    return int.from_bytes(digest[:8], "big")

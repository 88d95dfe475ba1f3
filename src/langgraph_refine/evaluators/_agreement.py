"""How far a judge agrees with people, and the score threshold its PASS can be trusted at.

Pure statistics, no model calls: `calibrate` (in `_calibrate`) judges the labelled
responses and hands the scores and the people's verdicts here.

The threshold rule. For a threshold `t` the judge passes every response scoring at least
`t`; its false-PASS rate is the share of those passes a person did not pass. The rate's
one-sided Clopper-Pearson upper bound at `confidence` must be at most `alpha`. Scanning
the thresholds from the strictest down, the chosen one is the lowest of the first run of
thresholds that all meet the bound (a fixed-sequence test: a lone lucky dip far below
the rest is never picked, so many thresholds tried do not make a false PASS likelier).

Held out, not in-sample. The rule is chosen on each fold's training part and counted
on the fold it never saw (k-fold cross-validation); the held-out false passes of every
fold, pooled, give the bound reported. A threshold is only trusted when that bound, too,
is at most `alpha`: a rule that only looks good on the labels it was fitted to is refused.
"""

from __future__ import annotations

import functools
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass


@functools.lru_cache(maxsize=65536)
def upper_bound(errors: int, trials: int, confidence: float) -> float:
    """One-sided Clopper-Pearson upper bound of a rate seen as `errors` in `trials`.

    The largest rate `p` for which seeing at most `errors` in `trials` still has
    probability at least `1 - confidence`. With no trials nothing is known: 1.0.

    Example:
        >>> round(upper_bound(0, 5, 0.9), 3)  # 5 clean passes prove little
        0.369
        >>> round(upper_bound(0, 22, 0.9), 3)
        0.099
    """
    if trials <= 0 or errors >= trials:
        return 1.0
    tail = 1.0 - confidence
    low, high = errors / trials, 1.0
    for _ in range(60):  # bisection: the binomial CDF falls as p rises
        mid = (low + high) / 2
        if _binomial_cdf(errors, trials, mid) > tail:
            low = mid
        else:
            high = mid
    return high


def _binomial_cdf(k: int, n: int, p: float) -> float:
    if p <= 0.0:
        return 1.0
    if p >= 1.0:
        return 0.0 if k < n else 1.0
    log_p, log_q = math.log(p), math.log1p(-p)
    return min(
        1.0,
        sum(
            math.exp(
                math.lgamma(n + 1)
                - math.lgamma(i + 1)
                - math.lgamma(n - i + 1)
                + i * log_p
                + (n - i) * log_q
            )
            for i in range(k + 1)
        ),
    )


@dataclass(frozen=True)
class Agreement:
    """How a judge's pass/fail agrees with people's on the same responses.

    Attributes:
        n: Responses compared.
        accuracy: Share where the judge and the person agree.
        kappa: Cohen's kappa: agreement beyond what chance would give (1 perfect, 0 chance).
        false_pass: Share of the judge's passes the person did not pass (0 without passes).
        false_fail: Share of the judge's non-passes the person passed (0 without any).
        passes: The judge's passes.
        false_passes: Of those, the ones the person did not pass.
    """

    n: int
    accuracy: float
    kappa: float
    false_pass: float
    false_fail: float
    passes: int
    false_passes: int


def agreement(judge: Sequence[bool], person: Sequence[bool]) -> Agreement:
    """Agreement of the judge's verdicts with the person's, response by response.

    Example:
        >>> a = agreement([True, True, False, False], [True, False, False, False])
        >>> a.accuracy, a.false_pass, a.false_fail, round(a.kappa, 2)
        (0.75, 0.5, 0.0, 0.5)
    """
    n = len(judge)
    if n == 0:
        return Agreement(0, 0.0, 0.0, 0.0, 0.0, 0, 0)
    both = sum(j and p for j, p in zip(judge, person, strict=True))
    passes = sum(judge)
    people = sum(person)
    false_passes = passes - both
    missed = people - both  # the person passed, the judge did not
    agree = n - false_passes - missed
    accuracy = agree / n
    chance = (passes / n) * (people / n) + (1 - passes / n) * (1 - people / n)
    kappa = 1.0 if chance >= 1.0 else (accuracy - chance) / (1 - chance)
    return Agreement(
        n=n,
        accuracy=accuracy,
        kappa=kappa,
        false_pass=false_passes / passes if passes else 0.0,
        false_fail=missed / (n - passes) if n > passes else 0.0,
        passes=passes,
        false_passes=false_passes,
    )


@dataclass(frozen=True)
class CurvePoint:
    """The false-PASS rate at one threshold: what the report's plot shows.

    Attributes:
        threshold: The score a PASS needs.
        passes: Responses scoring at least `threshold`.
        false_passes: Of those, the ones a person did not pass.
        rate: `false_passes / passes` (0 without passes).
        bound: Its upper confidence bound.
    """

    threshold: float
    passes: int
    false_passes: int
    rate: float
    bound: float


def curve(scores: Sequence[float], person: Sequence[bool], confidence: float) -> list[CurvePoint]:
    """The false-PASS rate and its bound at every distinct score, lowest threshold first."""
    pairs = sorted(zip(scores, person, strict=True), key=lambda pair: pair[0], reverse=True)
    points: list[CurvePoint] = []
    passes = false_passes = 0
    for position, (score, passed) in enumerate(pairs):
        passes += 1
        false_passes += not passed
        if position + 1 < len(pairs) and pairs[position + 1][0] == score:
            continue  # a threshold passes every response with its score
        rate = false_passes / passes
        points.append(
            CurvePoint(
                score, passes, false_passes, rate, upper_bound(false_passes, passes, confidence)
            )
        )
    return points[::-1]


def choose_threshold(
    scores: Sequence[float], person: Sequence[bool], *, alpha: float, confidence: float
) -> float | None:
    """The lowest threshold of the first run, from the strictest down, meeting the bound.

    Returns:
        The threshold, or None when no threshold's bound is at most `alpha`.

    Example:
        >>> scores = [0.95] * 30 + [0.5] * 10
        >>> choose_threshold(scores, [True] * 30 + [False] * 10, alpha=0.1, confidence=0.9)
        0.95
        >>> choose_threshold(scores[:5], [True] * 5, alpha=0.1, confidence=0.9) is None
        True
    """
    chosen: float | None = None
    for point in reversed(curve(scores, person, confidence)):
        if point.bound <= alpha:
            chosen = point.threshold
        elif chosen is not None:
            break  # the run of thresholds meeting the bound has ended
    return chosen


@dataclass(frozen=True)
class HeldOut:
    """The threshold rule, counted on folds it was not chosen on.

    Attributes:
        passes: Held-out responses the fold's threshold passed, over every fold.
        false_passes: Of those, the ones a person did not pass.
        bound: The upper confidence bound of the pooled held-out false-PASS rate.
        folds: Folds run.
        thresholds: Each fold's threshold (None: no threshold met `alpha` on its training part).
    """

    passes: int
    false_passes: int
    bound: float
    folds: int
    thresholds: tuple[float | None, ...]


def held_out(
    scores: Sequence[float],
    person: Sequence[bool],
    *,
    alpha: float,
    confidence: float,
    folds: int = 5,
    seed: int = 0,
) -> HeldOut:
    """Cross-validate `choose_threshold`: choose on k-1 folds, count on the k-th.

    The labels are shuffled (with `seed`) and dealt into `folds` folds, the people's
    passes and non-passes dealt separately so each fold holds both.
    """
    n = len(scores)
    k = max(2, min(folds, n))
    order = list(range(n))
    random.Random(seed).shuffle(order)
    dealt = [i for i in order if person[i]] + [i for i in order if not person[i]]
    fold_of = {index: position % k for position, index in enumerate(dealt)}
    passes = false_passes = 0
    thresholds: list[float | None] = []
    for fold in range(k):
        train = [i for i in range(n) if fold_of[i] != fold]
        threshold = choose_threshold(
            [scores[i] for i in train],
            [person[i] for i in train],
            alpha=alpha,
            confidence=confidence,
        )
        thresholds.append(threshold)
        if threshold is None:
            continue  # no PASS at all on this fold: nothing falsely passed
        for i in range(n):
            if fold_of[i] == fold and scores[i] >= threshold:
                passes += 1
                false_passes += not person[i]
    return HeldOut(
        passes=passes,
        false_passes=false_passes,
        bound=upper_bound(false_passes, passes, confidence),
        folds=k,
        thresholds=tuple(thresholds),
    )

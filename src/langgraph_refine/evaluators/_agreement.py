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
The rule is tightened (run at a fraction of `alpha`) until its held-out bound meets
`alpha` (`cross_validated`), since the lowest threshold that just meets a bound on the
labels it was chosen from is the luckiest one.
"""

from __future__ import annotations

import functools
import math
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TypedDict, Unpack


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
    """P(X <= k) for X ~ Binomial(n, p): the regularized incomplete beta I_{1-p}(n-k, k+1)."""
    if p <= 0.0:
        return 1.0
    if p >= 1.0:
        return 0.0 if k < n else 1.0
    return _incomplete_beta(n - k, k + 1, 1.0 - p)


def _incomplete_beta(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b), by its continued fraction."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    if x < (a + 1) / (a + b + 2):  # the fraction converges fast on this side
        return front * _beta_fraction(a, b, x) / a
    return 1.0 - front * _beta_fraction(b, a, 1.0 - x) / b


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The incomplete beta's continued fraction, by the modified Lentz method."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 500):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-12:
            break
    return h


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
    return [
        CurvePoint(t, p, f, f / p, upper_bound(f, p, confidence))
        for t, p, f in _counts(scores, person)
    ][::-1]


def _counts(scores: Sequence[float], person: Sequence[bool]) -> Iterator[tuple[float, int, int]]:
    """`(threshold, passes, false passes)` at every distinct score, the strictest first."""
    pairs = sorted(zip(scores, person, strict=True), key=lambda pair: pair[0], reverse=True)
    passes = false_passes = 0
    for position, (score, passed) in enumerate(pairs):
        passes += 1
        false_passes += not passed
        if position + 1 < len(pairs) and pairs[position + 1][0] == score:
            continue  # a threshold passes every response with its score
        yield score, passes, false_passes


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
    for threshold, passes, false_passes in _counts(scores, person):
        # The bound is never below the rate seen: a rate over alpha fails without computing it.
        if (
            false_passes <= alpha * passes
            and upper_bound(false_passes, passes, confidence) <= alpha
        ):
            chosen = threshold
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
    groups: Sequence[str] | None = None,
) -> HeldOut:
    """Cross-validate `choose_threshold`: choose on k-1 folds, count on the k-th.

    With `groups` (each label's task), the labels of one group are never on both sides
    of a fold: each fold's threshold is counted on tasks it never saw, which is what a
    calibrated judge meets on new tasks (see `deal_folds`). Without them (or with one
    group only) the labels themselves are dealt.
    """
    n = len(scores)
    fold_of = deal_folds(person, folds=folds, seed=seed, groups=groups)
    k = max(fold_of, default=0) + 1
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


def deal_folds(
    person: Sequence[bool],
    *,
    folds: int,
    seed: int = 0,
    groups: Sequence[str] | None = None,
) -> list[int]:
    """Each label's fold (0 to k-1), k at most `folds`.

    With two groups or more, whole groups are dealt (k at most the number of groups):
    shuffled with `seed`, the largest first, each to the fold holding the fewest labels
    so far, so the folds stay about the same size. Otherwise the labels are shuffled and
    dealt in turn, the people's passes and non-passes separately so each fold holds both.

    Example:
        >>> deal_folds([True, False, True, False], folds=2, groups=["a", "a", "b", "b"])
        [0, 0, 1, 1]
    """
    n = len(person)
    rng = random.Random(seed)
    members: dict[str, list[int]] = {}
    for i, group in enumerate(groups or ()):
        members.setdefault(group, []).append(i)
    if len(members) >= 2:
        k = max(2, min(folds, len(members)))
        dealt = list(members.values())
        rng.shuffle(dealt)
        dealt.sort(key=len, reverse=True)  # stable: equal sizes stay shuffled
        sizes = [0] * k
        fold_of = [0] * n
        for indices in dealt:
            fold = min(range(k), key=lambda f: (sizes[f], f))
            sizes[fold] += len(indices)
            for i in indices:
                fold_of[i] = fold
        return fold_of
    k = max(2, min(folds, n))
    order = list(range(n))
    rng.shuffle(order)
    ordered = [i for i in order if person[i]] + [i for i in order if not person[i]]
    fold_of = [0] * n
    for position, index in enumerate(ordered):
        fold_of[index] = position % k
    return fold_of


LEVELS: tuple[float, ...] = (1.0, 0.85, 0.7, 0.55, 0.4, 0.25)
"""The levels, as shares of `alpha`, the threshold rule is tried at, the most lenient first."""


@dataclass(frozen=True)
class Choice:
    """The threshold a PASS needs, chosen so its held-out false-PASS bound meets `alpha`.

    Attributes:
        threshold: The threshold; None when no level met `alpha` on held-out folds.
        bound: The held-out bound of the level chosen; when none met `alpha`, the best
            bound reached: the lowest held-out one, else (no level could even be
            cross-validated) the lowest in-sample one of any threshold.
        level: The level the rule ran at (a share of `alpha` times `alpha`), or None.
        candidate: The rule's threshold on all labels at that level (at `alpha` when none).
        best_threshold: The threshold `bound` was reached at (the one chosen when met).
        held_out: Whether `bound` was counted on held-out folds (else in-sample).
    """

    threshold: float | None
    bound: float
    level: float | None
    candidate: float | None
    best_threshold: float | None = None
    held_out: bool = True


class Folds(TypedDict, total=False):
    """How `held_out` deals its folds (its keywords): how many, the seed, each label's task."""

    folds: int
    seed: int
    groups: Sequence[str] | None


def cross_validated(
    scores: Sequence[float],
    person: Sequence[bool],
    *,
    alpha: float,
    confidence: float,
    **dealt: Unpack[Folds],
) -> Choice:
    """The threshold rule at the most lenient level whose held-out bound meets `alpha`.

    A rule that only just meets `alpha` on the labels it chose from does worse on labels
    it never saw (the lowest threshold that passes is the luckiest). So the rule is run
    at `alpha`, then at tighter levels (`LEVELS`), each cross-validated with `held_out`
    (folds by `groups` when given); the first whose pooled held-out bound is at most
    `alpha` is kept. Its threshold is the strictest of the ones chosen on all labels and
    on each fold's training part: the spread between them is how much the choice leans
    on these labels. When none is kept, the best bound reached is reported with its
    threshold (see `Choice`), never a placeholder.

    Example:
        >>> scores = [i / 100 for i in range(200)]
        >>> choice = cross_validated([s / 2 for s in scores], [s > 0.8 for s in scores],
        ...                          alpha=0.1, confidence=0.9)
        >>> choice.threshold is not None and choice.bound <= 0.1
        True
    """
    best: tuple[float, float | None] | None = None  # the lowest held-out bound, its threshold
    for share in LEVELS:
        level = alpha * share
        candidate = choose_threshold(scores, person, alpha=level, confidence=confidence)
        if candidate is None:
            break  # a tighter level cannot find one either
        checked = held_out(scores, person, alpha=level, confidence=confidence, **dealt)
        chosen = max(t for t in (candidate, *checked.thresholds) if t is not None)
        if checked.bound <= alpha:
            return Choice(chosen, checked.bound, level, candidate, chosen)
        if best is None or checked.bound < best[0]:
            best = (checked.bound, chosen)
    first = choose_threshold(scores, person, alpha=alpha, confidence=confidence)
    if best is not None:
        return Choice(None, best[0], None, first, best[1])
    lowest = min(curve(scores, person, confidence), key=lambda p: p.bound, default=None)
    if lowest is None:
        return Choice(None, 1.0, None, first, None, held_out=False)
    return Choice(None, lowest.bound, None, first, lowest.threshold, held_out=False)


def best_kappa(scores: Sequence[float], person: Sequence[bool]) -> float:
    """The highest Cohen's kappa any threshold gives the judge's scores (0 without labels).

    How well the judge separates what people pass from what they do not, whatever
    threshold is put on it: near 0, no threshold (and no number of labels) makes its
    PASS mean a person's.

    Example:
        >>> best_kappa([0.9, 0.8, 0.2, 0.1], [True, True, False, False])
        1.0
        >>> best_kappa([0.5] * 4, [True, True, False, False])
        0.0
    """
    n, people = len(scores), sum(person)
    best = 0.0
    for _, passes, false_passes in _counts(scores, person):
        both = passes - false_passes
        accuracy = (n - false_passes - (people - both)) / n
        chance = (passes / n) * (people / n) + (1 - passes / n) * (1 - people / n)
        if chance < 1.0:
            best = max(best, (accuracy - chance) / (1 - chance))
    return best

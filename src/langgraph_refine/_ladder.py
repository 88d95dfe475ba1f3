"""A ladder of models: which rung writes the next attempt.

`generator=[cheap, ..., strong]` makes a ladder, cheapest first. Attempt 0 is written by
the first rung; a stronger rung is used only when the rungs below it stop raising the
best score:

- Cold (every strategy, and explore without a record): after a round on the current
  rung that did not raise the best score by at least `MIN_GAIN`, the next round climbs
  one rung. A round that
  raised it stays where it is, so a run whose first rung passes never calls another.
- Warm (explore with a strategy record): the record keeps each rung's refinement
  rounds under the move kind `"rung:<model>"` (rounds, raised, fell; see
  `round_stats`). A rung whose pooled rounds rarely raise the best
  (`raise rate < STAY_RATE` over at least `MIN_ROUNDS` rounds) is left after its first
  unsuccessful attempt, attempt 0 included; a rung above that never raised the best in
  `MIN_ROUNDS` rounds is skipped (unless it is the top). Per dollar: when both rungs'
  costs per call are known, the current rung is kept while its raise rate per dollar
  is at least `PER_DOLLAR_MARGIN` times the next rung's.
- Budget (`Budget(max_cost=...)`): a rung whose next call the money left cannot pay for
  is not chosen while a cheaper rung can still be paid. A rung's next call is estimated
  as the most one of its calls has cost so far in this run (the prompt grows by round,
  so the largest call so far is the closest estimate); a rung not yet called is
  estimated from the current rung's dearest call scaled by the rungs' price ratio when
  both prices are known, else it is taken as payable (the budget meter still refuses
  the call before it is sent).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from langgraph_refine._state import Attempt
from langgraph_refine._strategy import RUNG_KIND, MoveStats

STAY_RATE = 0.25
"""A rung whose refinement rounds raised the best less often than this is left at once."""

MIN_ROUNDS = 3
"""Pooled rounds on a rung before its record decides anything."""

MIN_GAIN = 0.1
"""A round counts as raising the best, for the ladder, only if it raised it by this much:
a cheap model creeping up by a few hundredths a round would otherwise never hand over
(measured in `make bench BENCH=ladder`)."""

PER_DOLLAR_MARGIN = 1.0
"""Keep the current rung while its raise rate per dollar is at least this times the next's."""


def rung_kind(model: str) -> str:
    """The record's move kind for one rung."""
    return f"{RUNG_KIND}{model}"


def next_rung(
    attempts: Sequence[Attempt],
    names: Sequence[str],
    *,
    record: Mapping[str, MoveStats] | None = None,
    money_left: float | None = None,
    prices: Mapping[str, float] | None = None,
) -> int:
    """The rung that writes the next attempt.

    Args:
        attempts: Every attempt so far (the latest just evaluated).
        names: The rungs' model names, cheapest first.
        record: The pooled strategy record (explore with a store), else None.
        money_left: What `Budget.max_cost` leaves, if set.
        prices: A known cost per call by model name (`Budget` prices), if any.

    Returns:
        The index of the rung.
    """
    if len(names) < 2 or not attempts:
        return 0
    latest = attempts[-1]
    current = latest.rung if latest.rung is not None else 0
    stalled = not _raised_best(attempts) or (
        latest.index == 0 and _rarely_raises(record, names[current])
    )
    target = current
    if stalled and current + 1 < len(names) and not _keeps(record, names, current, prices):
        target = _climb(record, names, current)
    return _payable(target, attempts, names, money_left, prices)


def _raised_best(attempts: Sequence[Attempt]) -> bool:
    """Whether the latest attempt raised the best score (attempt 0 always does)."""
    latest = attempts[-1]
    if latest.evaluation is None:
        return False
    earlier = [a.evaluation.score for a in attempts[:-1] if a.evaluation is not None]
    return not earlier or latest.evaluation.score >= max(earlier) + MIN_GAIN


def _rate(record: Mapping[str, MoveStats] | None, name: str) -> float | None:
    """A rung's pooled raise rate, None until it has `MIN_ROUNDS` rounds."""
    stats = (record or {}).get(rung_kind(name))
    if stats is None or stats.rounds < MIN_ROUNDS:
        return None
    return stats.raised / stats.rounds


def _rarely_raises(record: Mapping[str, MoveStats] | None, name: str) -> bool:
    rate = _rate(record, name)
    return rate is not None and rate < STAY_RATE


def _keeps(
    record: Mapping[str, MoveStats] | None,
    names: Sequence[str],
    current: int,
    prices: Mapping[str, float] | None,
) -> bool:
    """Whether the record says the current rung is worth another round per dollar."""
    here, above = _rate(record, names[current]), _rate(record, names[current + 1])
    if here is None or above is None or here < STAY_RATE:
        return False
    cost_here, cost_above = (
        (prices or {}).get(names[current]),
        (prices or {}).get(names[current + 1]),
    )
    if not cost_here or not cost_above:
        return False
    return here / cost_here >= PER_DOLLAR_MARGIN * (above / cost_above)


def _climb(record: Mapping[str, MoveStats] | None, names: Sequence[str], current: int) -> int:
    """One rung up, past rungs the record says never raise the best (never past the top)."""
    for index in range(current + 1, len(names) - 1):
        if _rate(record, names[index]) != 0.0:
            return index
    return len(names) - 1


def _payable(
    target: int,
    attempts: Sequence[Attempt],
    names: Sequence[str],
    money_left: float | None,
    prices: Mapping[str, float] | None,
) -> int:
    """`target`, or the dearest cheaper rung the money left pays for when it cannot."""
    if money_left is None:
        return target
    for index in range(target, -1, -1):
        estimate = _estimate(index, attempts, names, prices)
        if estimate is None or estimate <= money_left:
            return index
    return target  # nothing is payable: the meter stops the loop before the call


def _estimate(
    index: int,
    attempts: Sequence[Attempt],
    names: Sequence[str],
    prices: Mapping[str, float] | None,
) -> float | None:
    """The cost of rung `index`'s next call (see the module's docstring), None if unknown."""
    dearest = _dearest_call(attempts, names[index])
    if dearest is not None:
        return dearest
    known = [(i, c) for i, n in enumerate(names) if (c := _dearest_call(attempts, n)) is not None]
    price_here = (prices or {}).get(names[index])
    if not known or not price_here:
        return None
    other, cost = known[-1]
    price_other = (prices or {}).get(names[other])
    return cost * price_here / price_other if price_other else None


def _dearest_call(attempts: Sequence[Attempt], name: str) -> float | None:
    costs = [
        a.usage.cost / a.usage.calls
        for a in attempts
        if a.model == name and a.usage.cost is not None and a.usage.calls
    ]
    return max(costs) if costs else None


def cost_per_call(attempts: Sequence[Attempt]) -> dict[str, float]:
    """The mean cost of one call per model in this run, for the models whose cost is known."""
    cost: dict[str, float] = {}
    calls: dict[str, int] = {}
    for a in attempts:
        if a.model is not None and a.usage.cost is not None and a.usage.calls:
            cost[a.model] = cost.get(a.model, 0.0) + a.usage.cost
            calls[a.model] = calls.get(a.model, 0) + a.usage.calls
    return {model: cost[model] / calls[model] for model in cost}

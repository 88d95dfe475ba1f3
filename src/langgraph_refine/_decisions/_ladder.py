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
  `MIN_ROUNDS` rounds is skipped (unless it is the top). Per dollar: when the record
  and the prices know every rung above that may help, the climb goes to the one that
  raised the best most often per dollar. A stalled rung is never kept for being cheap:
  measured, a rule that kept the cheap rung while its pooled raise rate per dollar beat
  the strong one's never left it on hard tasks (quality 0.18 below strong alone).
- Warm, by state: the record also counts each rung's rounds by the state the run was in
  when they began (`run_state`; key `"rung:<model>@<state>"`), a round counting as a
  raise only when it raised the best by a band's width or to 1.0. With `STATE_ROUNDS`
  such rounds of the current rung from the run's state, they decide: the run leaves the
  rung when their smoothed raise rate is under `STAY_RATE`, or when the rung above
  raised the best from that state more often per dollar (prices known); else it stays,
  even after a round that did not raise the best. So a cheap rung is left at once after
  a low first score (where it has never helped) and kept after a high one. A state the
  record has not seen follows the cold rule (and the pooled "left after attempt 0" rule
  applies only to a record written before states). Measured over random task mixes in
  `make bench BENCH=ladder`.
- Warm, by where the run started: the record also counts, per rung and per first
  answer's state (`"b<band>/start"`), the runs the rung was tried in from there and how
  many of them it finished, its own answer reaching the run's target (`reach_stats`; key
  `"reach:<model>@<state>"`). With `STATE_ROUNDS` such runs, their smoothed rate of
  reaching the target, `(reached + 1) / (runs + 2)`, decides before anything else: under
  `REACH_RATE` (the rung never reached it in five runs that started like this one, or
  once in twelve) the run climbs at once, after the first answer or any later round; at
  or above it the run stays on the rung after its first answer (the rung gets there from
  such a start).
  So a task whose first answer looks like those the cheap rung never finished goes to
  the strong rung without a cheap round first, and one that looks like those it finished
  keeps the cheap rung. A start the record has not seen often enough follows the rules
  above. Measured in `make bench BENCH=ladder` (its notes: with and without this rule).
- Budget (`Budget(max_cost=...)`): a rung whose next call the money left cannot pay for
  is not chosen while a cheaper rung can still be paid. A rung's next call is estimated
  as the most one of its calls has cost so far in this run (the prompt grows by round,
  so the largest call so far is the closest estimate); a rung not yet called is priced
  (`Budget(prices=...)`, else the `genai-prices` data) for a call of this run's mean
  size in tokens so far (`rung_prices`); one whose price is unknown is taken as payable
  (the budget meter still refuses the call before it is sent).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from langgraph_refine._calls._prices import ModelRef, Pricing
from langgraph_refine._decisions._strategy import (
    RUNG_KIND,
    STATE_MARK,
    MoveStats,
    run_state,
    state_kind,
)
from langgraph_refine._state import Attempt

STAY_RATE = 0.25
"""A rung whose refinement rounds raised the best less often than this is left at once."""

REACH_RATE = 0.15
"""A rung that reached the target in fewer of the runs that started like this one (smoothed)
is left at once, before a round of its own.

Lower than `STAY_RATE`: it acts on the first answer alone, before any round of this run is
seen, so it asks for a rung that (nearly) never got there. Measured (`make bench
BENCH=ladder`, seeds 1000-1039, 3000-3039 and 5000-5039, against `STAY_RATE`'s 0.25): goal A
25% / 30% / 20% against 22.5% / 25% / 15%, B 92.3% / 92.1% / 91.9% against 89.7% / 92.1% /
91.9%, every older goal 97.5% / 92.5% / 95% against 95% / 92.5% / 97.5%."""

MIN_ROUNDS = 3
"""Pooled rounds on a rung before its record decides anything."""

STATE_ROUNDS = 5
"""Pooled rounds of a rung from one state before they decide anything there; their rate
is smoothed, `(raised + 1) / (rounds + 2)`, so it takes five rounds without a raise to
leave a rung from a state (a rung that raises half the time shows that 3% of the time)."""

REACH_KIND = "reach:"
"""The prefix of a rung's counts of runs by their first answer's state: `"reach:<model>"`
(rounds: runs it was tried in; raised: runs its answer reached the target; see
`reach_stats`)."""

MIN_GAIN = 0.1
"""A round counts as raising the best, for the ladder, only if it raised it by this much:
a cheap model creeping up by a few hundredths a round would otherwise never hand over
(measured in `make bench BENCH=ladder`)."""


def rung_kind(model: str) -> str:
    """The record's move kind for one rung."""
    return f"{RUNG_KIND}{model}"


def reach_kind(model: str) -> str:
    """The record's kind for one rung's runs by their first answer's state."""
    return f"{REACH_KIND}{model}"


def reach_stats(attempts: Sequence[Attempt], target: float | None) -> dict[str, MoveStats]:
    """This run's reach counts: per rung tried, whether its answer reached the target.

    Keyed `"reach:<model>@<state>"` (`state_kind`), the state being the first answer's
    (`run_state` of attempt 0 alone). A rung counts as tried (`rounds` 1) when it wrote
    an attempt after attempt 0, or when its attempt 0 already reached the target (a
    first rung the run left right after attempt 0 was not tried); it reached the target
    (`raised` 1) when one of its answers has a PASS verdict or a score of at least
    `target` (None: a PASS only), the run's own stop rule. Empty without a ladder
    (attempts carry no rung).

    Example:
        >>> from langgraph_refine import Attempt, Evaluation
        >>> first = Attempt(index=0, response="a", evaluation=Evaluation(score=0.3),
        ...     model="cheap", rung=0)
        >>> done = Attempt(index=1, response="b", parent=0, evaluation=Evaluation(score=1.0),
        ...     model="cheap", rung=0)
        >>> reach_stats([first, done], target=0.9)
        {'reach:cheap@b1/start': MoveStats(rounds=1, raised=1, fell=0)}
    """
    start = run_state(attempts[:1])
    if start is None or attempts[0].rung is None:
        return {}
    tried: dict[str, bool] = {}
    for attempt in attempts:
        if attempt.model is None or attempt.evaluation is None:
            continue
        reached = attempt.evaluation.verdict == "PASS" or (
            target is not None and attempt.evaluation.score >= target
        )
        if attempt.index > 0 or reached:
            tried[attempt.model] = tried.get(attempt.model, False) or reached
    return {
        state_kind(reach_kind(model), start): MoveStats(rounds=1, raised=int(reached))
        for model, reached in tried.items()
    }


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
    state = run_state(attempts)
    target = current
    if current + 1 < len(names) and _stalled(attempts, names, current, record, state, prices):
        target = _climb(record, names, current, prices, state)
    return _payable(target, attempts, names, money_left, prices)


def _stalled(
    attempts: Sequence[Attempt],
    names: Sequence[str],
    current: int,
    record: Mapping[str, MoveStats] | None,
    state: str | None,
    prices: Mapping[str, float] | None,
) -> bool:
    """Whether the run leaves the current rung (see the module's docstring).

    With `MIN_ROUNDS` pooled rounds of this rung from the run's state, the record
    decides: leave when they rarely raised the best, or when the rung above raised it
    more often per dollar from this state; else the cold rule, and a rung whose rounds
    over every state rarely raise the best is left after attempt 0.
    """
    reach = _reach_rate(record, names[current], attempts)
    if reach is not None:  # runs that started like this one say whether the rung gets there
        if reach < REACH_RATE:
            return True
        if len(attempts) == 1:
            return False
    here = _rate(record, names[current], state, smooth=True)
    if here is not None:  # the record knows this rung from this state
        if here < STAY_RATE:
            return True
        above = _rate(record, names[current + 1], state, smooth=True)
        price, price_above = (
            (prices or {}).get(names[current]),
            (prices or {}).get(names[current + 1]),
        )
        return bool(above is not None and price and price_above) and (
            above / price_above > here / price  # type: ignore[operator]
        )
    if _has_states(record):  # a state not seen yet: the cold rule tries the rung from it
        return not _raised_best(attempts)
    return not _raised_best(attempts) or (
        attempts[-1].index == 0 and _rarely_raises(record, names[current])
    )


def _reach_rate(
    record: Mapping[str, MoveStats] | None, name: str, attempts: Sequence[Attempt]
) -> float | None:
    """How often the rung got there in runs that started like this one (None: too few).

    Over the runs the rung was tried in whose first answer was in this run's first
    answer's state: `(reached + 1) / (runs + 2)`, None under `STATE_ROUNDS` runs.
    """
    start = run_state(attempts[:1])
    stats = (record or {}).get(state_kind(reach_kind(name), start)) if start else None
    if stats is None or stats.rounds < STATE_ROUNDS:
        return None
    return (stats.raised + 1) / (stats.rounds + 2)


def _has_states(record: Mapping[str, MoveStats] | None) -> bool:
    """Whether the record counts rounds by state (one written before states did not)."""
    return any(STATE_MARK in kind for kind in record or {})


def _raised_best(attempts: Sequence[Attempt]) -> bool:
    """Whether the latest attempt raised the best score (attempt 0 always does)."""
    latest = attempts[-1]
    if latest.evaluation is None:
        return False
    earlier = [a.evaluation.score for a in attempts[:-1] if a.evaluation is not None]
    return not earlier or latest.evaluation.score >= max(earlier) + MIN_GAIN


def _rate(
    record: Mapping[str, MoveStats] | None,
    name: str,
    state: str | None = None,
    smooth: bool = False,
) -> float | None:
    """A rung's pooled raise rate (from `state` only, if given), None until it has enough rounds.

    Enough is `MIN_ROUNDS`, or `STATE_ROUNDS` from a state, where `smooth` gives the rate
    as `(raised + 1) / (rounds + 2)`.
    """
    if state is None:
        stats = (record or {}).get(rung_kind(name))
        if stats is None or stats.rounds < MIN_ROUNDS:
            return None
        return stats.raised / stats.rounds
    stats = (record or {}).get(state_kind(rung_kind(name), state))
    if stats is None or stats.rounds < STATE_ROUNDS:
        return None
    if smooth:  # a few unlucky rounds do not condemn a rung
        return (stats.raised + 1) / (stats.rounds + 2)
    return stats.raised / stats.rounds


def _rarely_raises(record: Mapping[str, MoveStats] | None, name: str) -> bool:
    rate = _rate(record, name)
    return rate is not None and rate < STAY_RATE


def _climb(
    record: Mapping[str, MoveStats] | None,
    names: Sequence[str],
    current: int,
    prices: Mapping[str, float] | None,
    state: str | None = None,
) -> int:
    """The rung to climb to: one up, past rungs the record says never raise the best.

    When the record has a raise rate and a price for every rung above that may help, the
    one that raises the best most often per dollar (ties: the cheaper, lower rung). A
    rung's rate is its rounds' from the run's state when it has `MIN_ROUNDS` there, else
    its rounds' over every state.
    """

    def rate(name: str) -> float | None:
        here = _rate(record, name, state)
        return here if here is not None else _rate(record, name)

    above = [i for i in range(current + 1, len(names)) if rate(names[i]) != 0.0]
    if not above:
        return len(names) - 1  # every rung above is useless: the top is the last resort
    worth = {i: (rate(names[i]), (prices or {}).get(names[i])) for i in above}
    if all(rate is not None and price for rate, price in worth.values()):
        return max(above, key=lambda i: (worth[i][0] / worth[i][1], -i))  # type: ignore[operator]
    return above[0]


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
    return (prices or {}).get(names[index])


def _dearest_call(attempts: Sequence[Attempt], name: str) -> float | None:
    costs = [
        a.usage.cost / a.usage.calls
        for a in attempts
        if a.model == name and a.usage.cost is not None and a.usage.calls
    ]
    return max(costs) if costs else None


def rung_prices(
    attempts: Sequence[Attempt], names: Sequence[str], pricing: Pricing | None
) -> dict[str, float]:
    """Each rung's cost per call: what its calls cost in this run, else its price.

    A rung not called yet is priced (by `Budget(prices=...)` or the `genai-prices` data)
    for a call of this run's mean size in tokens so far; unknown prices are left out.
    """
    known = cost_per_call(attempts)
    calls = sum(a.usage.calls for a in attempts)
    if pricing is None or not calls:
        return known
    size = {
        "input_tokens": sum(a.usage.input_tokens for a in attempts) / calls,
        "output_tokens": sum(a.usage.output_tokens for a in attempts) / calls,
    }
    for name in names:
        if name not in known:
            provider, _, model = name.rpartition(":")
            price = pricing.cost(ModelRef(model, provider or None), size)
            if price:
                known[name] = price
    return known


def cost_per_call(attempts: Sequence[Attempt]) -> dict[str, float]:
    """The mean cost of one call per model in this run, for the models whose cost is known."""
    cost: dict[str, float] = {}
    calls: dict[str, int] = {}
    for a in attempts:
        if a.model is not None and a.usage.cost is not None and a.usage.calls:
            cost[a.model] = cost.get(a.model, 0.0) + a.usage.cost
            calls[a.model] = calls.get(a.model, 0) + a.usage.calls
    return {model: cost[model] / calls[model] for model in cost}

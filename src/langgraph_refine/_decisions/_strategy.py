"""Search strategies: after each round, what the next round generates.

The choice (`Choice`) is a kind of move and the attempt it starts from. The evaluate
step writes it to state as `next_move` and `refine_from` (the index of the attempt to
refine, or None for a fresh sample of the task alone); the generate step records the
move on the new attempt (`Attempt.move`).

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

With a strategy record (counts pooled over earlier runs of the same model and
evaluator, kept in a LangGraph store, passed to `choose_next` as `record`), explore's
every choice, round 1's included, weighs those counts with this run's own:

- after a refinement that raised the best score, it refines the best attempt again (this
  run's own evidence comes first);
- otherwise it takes the move expected to raise the best score most from where the run
  stands (`_explore_by_gain`), read from the record's score counts (`score_counts`):
  what each fresh answer scored (attempt 0 included: a fresh answer does not depend on
  where the run stands), and how far each refinement moved from the attempt it refined,
  by the band of that attempt's score (`STATE_BANDS`). A move's value is the mean, over
  its outcomes and `SCORES_PRIOR` pseudo-outcomes spread evenly over what it can do from
  the best, of how far the outcome lands above the best (an outcome is known to its
  tenth, `_above`), less `FALL_WEIGHT` times how far it lands below. Refining the best
  wins ties. When this run has priced both moves (`Attempt.usage.cost`), values are per
  dollar. A band where the record holds no refinement is first tried: the run refines
  from it once (`_worth_a_try`), unless the refinements seen have fallen `TRY_FALLS`
  times and none held. After that try, or without one, refining there backs off to what
  refinements did from every band, then to what every answer did (`_refine_worth`,
  pseudo-count shrinkage, `BACKOFF_ROUNDS`); this run's own outcomes count at every
  level, so a refinement that fell in this run weighs on its next round at once. The
  try is exploration: a band that only borrowed a low value (one unlucky refinement
  elsewhere) chose fresh answers and never gathered evidence of its own. So a model
  whose refinements fall is soon sampled from round 1, one whose refinements help
  keeps refining, and one whose refinements help only from a high score samples from
  a low one and refines from a high one.
- With a ladder (`rung` given) the score counts, which pool every rung's answers, do not
  decide; nor in a record written before them. Then explore draws, for each side, a
  belief `Beta(1 + k*worth, 1 + k*(rounds - worth))` over pooled plus own counts of
  rounds, a round worth 1 if it raised the best, `KEPT_CREDIT` (0.3) if it kept its
  start, 0 if it fell, `k = min(RECORD_SHARPEN_MAX, 1 + pooled rounds /
  RECORD_SHARPEN_ROUNDS)`; one side is refining the best attempt, the other a fresh
  sample (the counts of every kind in `FRESH_MOVES` together); refining wins ties, and a
  side never tried does not displace one that has never failed to raise the best. When
  the record holds at least `STATE_MIN_ROUNDS` rounds from the run's state (`run_state`,
  keys `"<kind>@<state>"`, `state_kind`; the moving rung's first), those and this run's
  own from that state decide instead, a round worth 1 if it raised the best and
  `STATE_KEPT_CREDIT` (0) if not.

The rule was chosen by simulation on scripted refiners of many strengths (weak ones
whose refinements drop what they had, strong ones that fix what feedback names) and
measured on them and on the local model (`make bench BENCH=strategies`, whose notes give
every figure). A third kind of move, the `"guided"` sample (the task and the feedback
on the best attempt, without the attempt), is in explore's menu (`FRESH_MOVES`) beside
the plain sample: with the score counts each is weighed by what its own answers did.
Without a record (or with an empty one, or one holding only `"revise"` rounds)
explore behaves as above, round 1 refining attempt 0. `round_stats` and
`latest_round_stats` count a run's rounds by kind of move (`MoveStats`) for the record.

Randomness is seeded from the task and the round, so a replayed round (after a crash)
and a recorded test make the same choice.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from langgraph_refine._result import UNRANKED, attempt_rank, best_attempt, rank_value
from langgraph_refine._state import Attempt, MoveKind, Strategy

EXPLORE_WEIGHT = 5.0
"""REx's C: how strongly an arm's score shapes its belief (REx found 5-20 robust)."""

FRESH_MOVES: tuple[MoveKind, ...] = ("sample", "guided")
"""The kinds of fresh answer explore may choose with a record, in order of preference on a tie.

`"guided"` is a fresh answer told the feedback on the best attempt, not shown it. With
the score counts each kind is weighed by what its own answers did, so a model that
answers it worse than the task alone is soon given plain samples. Measured (`make bench
BENCH=strategies`): on the local 135M model, warm explore scored 0.858 with it and 0.824
without, pooled over three runs of 3 passes of 16 tasks at 4 calls (best-of-4 0.847; the
runs alone: 0.870, 0.854 and 0.849 with it, 0.781, 0.859 and 0.833 without), and on
scripted refiners it was never worse with it. (Under the rule before the score counts,
Beta draws over raise counts, it lost on the local model, 0.734 against 0.859, and was
left out.)"""


KEPT_CREDIT = 0.3
"""What a round that neither raised the best nor fell counts for, against 1 for a raise.

A fall (scored below where it started) counts 0: the evidence of a move that hurts."""

RECORD_SHARPEN_ROUNDS = 20.0
"""Pooled rounds per unit of sharpening of explore's beliefs (see `_explore_with_record`)."""

RECORD_SHARPEN_MAX = 10.0
"""The most explore's beliefs are sharpened, however large the record."""


RUNG_KIND = "rung:"
"""The prefix of a ladder rung's counts among the kinds of move: `"rung:<model>"`."""

STATE_BANDS = 4
"""Bands of the best score so far in a run's state: `b0` below 0.25, ..., `b3` from 0.75."""

STATE_MARK = "@"
"""Joins a kind of move and a state in the counts handed to `choose_next`: `"refine@b2/up"`."""

STATE_KEPT_CREDIT = 0.0
"""What a kept round counts for among the rounds of one state (see `KEPT_CREDIT`)."""

RUNG_STATE_MARK = "|"
"""Joins a state and the ladder rung that moved from it (`rung_state`)."""

STATE_MIN_ROUNDS = 20
"""Pooled rounds in a state (refinements and fresh samples) before explore acts on them
rather than on the counts pooled over every state (a record without score counts)."""

SCORE_BINS = 10
"""A score counts in the record's score counts as a whole number of tenths (0 to 10)."""

SCORE_MARK = "#"
"""Joins a kind of move (and its state band) and an outcome's bin: `"sample#7"`,
`"refine@b1#+2"` (see `score_counts`)."""

FALL_WEIGHT = 0.1
"""What a fall below the best costs a move's value, per unit of score, against 1 for a raise."""

SCORES_PRIOR = 1.0
"""Pseudo-rounds, spread evenly over every outcome a move can have, that explore's
expected gains start from: a move the record has not seen from a band is taken to be
worth trying (an even spread of outcomes gains more than most moves do), and a few of
its real outcomes outweigh that. Chosen on the random refiners of seeds 2000-2039 and
5000-5039, where 1, 1.5 and 2 scored alike (within the noise of 40 refiners), as the one
that learns fastest that a model's refinements fall (with 2, a run still refined in
round 1 after three runs whose every refinement fell, with 1.5 after two);
`make bench BENCH=strategies` reports seeds 7000-7079, unseen."""

TIE = 1e-9
"""Values closer than this are a tie (refining, then the earlier fresh kind, wins one).

Two moves with the same evidence have the same value, but not always the same float: an
untried refinement and an untried fresh answer are both an even spread over every score,
summed in different orders. Measured (`make bench BENCH=strategies`): left to the floats,
those ties moved single random refiners by up to 0.02."""

TRY_FALLS = 2
"""Falls of the refinements seen (the record's and this run's), with none that held, that
stop a band no earlier run refined from being tried.

A band the record has not refined from is tried once (`_worth_a_try`) unless its
refinements have fallen this often and never kept or raised what they refined. Measured
(`make bench BENCH=strategies`): with 1 a single unlucky first refinement locked bands
again (W 76 of 80 on seeds 7000-7079); 2 and 3 scored alike (79 of 80, and 40 of 40 on
each of 2000-2039, 5000-5039 and 8000-8039)."""

BACKOFF_ROUNDS = 0.5
"""Pseudo-outcomes a level of evidence borrows from the coarser one above it (`_backed_off`):
a band's refinements from the moves of every band, those from every answer the record
holds. Small, so a level's own outcomes (this run's first) soon decide."""


@dataclass(frozen=True)
class MoveStats:
    """What one kind of move did over some rounds (one run's, or pooled over runs).

    Attributes:
        rounds: Evaluated rounds (attempt index 1 and later) made by this move.
        raised: Of those, how many raised the best score of the attempts before them
            (by the best-attempt rule: a PASS verdict outranks a higher score).
        fell: How many scored below the attempt they started from: the refined
            attempt for a refinement (`parent`), attempt 0 for a fresh sample.
    """

    rounds: int = 0
    raised: int = 0
    fell: int = 0

    def __add__(self, other: MoveStats) -> MoveStats:
        return MoveStats(
            self.rounds + other.rounds, self.raised + other.raised, self.fell + other.fell
        )

    def to_dict(self) -> dict[str, int]:
        """The counts as a JSON-ready dict."""
        return {"rounds": self.rounds, "raised": self.raised, "fell": self.fell}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MoveStats:
        """Read counts written by `to_dict` (missing counts read as 0).

        Raises:
            ValueError: If a count is not a non-negative integer.
        """
        counts = {}
        for name in ("rounds", "raised", "fell"):
            value = data.get(name, 0)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(
                    f"strategy record count {name!r} must be a non-negative integer, "
                    f"got {value!r}; delete the record to start it afresh"
                )
            counts[name] = value
        return cls(**counts)


@dataclass(frozen=True)
class Choice:
    """What the next round generates: a kind of move and the attempt it starts from.

    Attributes:
        move: The kind of move (`"sample"`, `"refine"`, ...).
        parent: The index of the attempt to refine; None for a fresh sample.
    """

    move: MoveKind
    parent: int | None = None


SAMPLE = Choice("sample")
"""A fresh sample of the task alone."""


def round_stats(attempts: Sequence[Attempt]) -> dict[str, MoveStats]:
    """This run's evaluated rounds (attempt index 1 and later), counted by kind of move.

    Args:
        attempts: Every attempt so far, in order.

    Returns:
        `MoveStats` per kind of move that made at least one evaluated round.

    Example:
        >>> from langgraph_refine import Attempt, Evaluation
        >>> first = Attempt(index=0, response="a", evaluation=Evaluation(score=0.4))
        >>> better = Attempt(index=1, response="b", parent=0, evaluation=Evaluation(score=0.6))
        >>> round_stats([first, better])
        {'refine': MoveStats(rounds=1, raised=1, fell=0)}
    """
    stats: dict[str, MoveStats] = {}
    for k in range(1, len(attempts)):
        for kind, outcome in latest_round_stats(attempts[: k + 1]).items():
            stats[kind] = stats.get(kind, MoveStats()) + outcome
    return stats


def latest_round_stats(attempts: Sequence[Attempt]) -> dict[str, MoveStats]:
    """The latest attempt's round alone, as `round_stats` counts it (empty for attempt 0).

    What a run adds to the pooled record after each evaluated round.
    """
    if len(attempts) < 2:
        return {}
    kind, outcome = _outcome(attempts)
    if kind is None:
        return {}
    latest = attempts[-1]
    if latest.rung is None or latest.model is None:
        return {kind: outcome}
    # A ladder's round also counts for its rung (see `_ladder`): `"rung:<model>"`.
    return {kind: outcome, f"{RUNG_KIND}{latest.model}": outcome}


def run_state(attempts: Sequence[Attempt]) -> str | None:
    """The state a run is in after `attempts`: where its next move starts from.

    `"b<band>/<phase>"`: the band of the best score so far (`STATE_BANDS` equal bands,
    a PASS counting as 1.0) and whether the latest round raised it (`"start"` after
    attempt 0 alone, `"up"` if the latest attempt raised the best, else `"flat"`).
    None while nothing is evaluated.

    Example:
        >>> from langgraph_refine import Attempt, Evaluation
        >>> first = Attempt(index=0, response="a", evaluation=Evaluation(score=0.4))
        >>> run_state([first])
        'b1/start'
        >>> same = Attempt(index=1, response="b", parent=0, evaluation=Evaluation(score=0.4))
        >>> run_state([first, same])
        'b1/flat'
    """
    best = best_attempt(attempts)
    if best is None or best.evaluation is None:
        return None
    band = _band(rank_value(best))
    phase = "start" if len(attempts) == 1 else "up" if _raised_best(attempts) else "flat"
    return f"b{band}/{phase}"


def state_kind(kind: str, state: str) -> str:
    """The key of a kind of move's counts in one state: `"<kind>@<state>"`."""
    return f"{kind}{STATE_MARK}{state}"


def latest_state_stats(attempts: Sequence[Attempt]) -> dict[str, MoveStats]:
    """The latest round's counts keyed by kind of move and the state it started from.

    As `latest_round_stats`, with each kind `k` counted as `"k@<state>"` (`state_kind`),
    the state being `run_state` of the attempts before the latest one. A ladder's round
    also counts its kind of move under the state joined with the rung that made it,
    `"k@<state>|<model>"` (`rung_state`).
    """
    return {state_kind(k, state): s for state, k, s in _latest_by_state(attempts)}


def rung_state(state: str, model: str) -> str:
    """A state joined with the ladder rung that moves from it: `"<state>|<model>"`."""
    return f"{state}{RUNG_STATE_MARK}{model}"


def _latest_by_state(attempts: Sequence[Attempt]) -> list[tuple[str, str, MoveStats]]:
    """The latest round's (state, kind, counts), as `latest_state_stats` keys them."""
    state = run_state(attempts[:-1]) if len(attempts) >= 2 else None
    if state is None:
        return []
    stats = latest_round_stats(attempts)
    if any(kind.startswith(RUNG_KIND) for kind in stats) and not _raised_by_a_band(attempts):
        # A rung's round counts as raising the best only by a band's width: a cheap model
        # creeping up a word at a time from a low band is not progress to pay for.
        stats = {
            kind: MoveStats(s.rounds, 0, s.fell) if kind.startswith(RUNG_KIND) else s
            for kind, s in stats.items()
        }
    out = [(state, kind, s) for kind, s in stats.items()]
    model = attempts[-1].model
    if attempts[-1].rung is not None and model is not None:
        # Which rung made a move decides what it did: a strong rung's fresh answer says
        # nothing of what the cheap rung's would have done.
        here = rung_state(state, model)
        out += [(here, kind, s) for kind, s in stats.items() if not kind.startswith(RUNG_KIND)]
    return out


def _raised_by_a_band(attempts: Sequence[Attempt]) -> bool:
    """Whether the latest attempt raised the best by a band's width (`1 / STATE_BANDS`).

    Or to 1.0 (a PASS counts as 1.0) from less than a band below.
    """
    earlier = max((rank_value(a) for a in attempts[:-1] if a.evaluation is not None), default=0.0)
    return rank_value(attempts[-1]) >= min(1.0, earlier + 1.0 / STATE_BANDS) - 1e-9 and (
        _raised_best(attempts)
    )


def state_stats(attempts: Sequence[Attempt]) -> dict[str, dict[str, MoveStats]]:
    """This run's rounds by the state each started from, then by kind of move.

    Example:
        >>> from langgraph_refine import Attempt, Evaluation
        >>> first = Attempt(index=0, response="a", evaluation=Evaluation(score=0.4))
        >>> better = Attempt(index=1, response="b", parent=0, evaluation=Evaluation(score=0.6))
        >>> state_stats([first, better])
        {'b1/start': {'refine': MoveStats(rounds=1, raised=1, fell=0)}}
    """
    by_state: dict[str, dict[str, MoveStats]] = {}
    for k in range(2, len(attempts) + 1):
        for label, kind, outcome in _latest_by_state(attempts[:k]):
            kinds = by_state.setdefault(label, {})
            kinds[kind] = kinds.get(kind, MoveStats()) + outcome
    return {state: kinds for state, kinds in by_state.items() if kinds}


def in_state(record: Mapping[str, MoveStats], state: str | None) -> dict[str, MoveStats]:
    """The counts of one state, by kind of move, from counts keyed by `state_kind`."""
    if state is None:
        return {}
    suffix = f"{STATE_MARK}{state}"
    return {k[: -len(suffix)]: v for k, v in record.items() if k.endswith(suffix)}


def _outcome(attempts: Sequence[Attempt]) -> tuple[str | None, MoveStats]:
    """The kind of move of the latest attempt and its round's counts (None: not evaluated)."""
    latest = attempts[-1]
    if latest.evaluation is None:
        return None, MoveStats()
    start = _start(attempts)
    fell = (
        start is not None
        and start.evaluation is not None
        and rank_value(latest) < rank_value(start)
    )
    kind = latest.move or ("sample" if latest.parent is None else "refine")
    return kind, MoveStats(rounds=1, raised=int(_raised_best(attempts)), fell=int(fell))


def _start(attempts: Sequence[Attempt]) -> Attempt | None:
    """The attempt the latest one started from: its parent, or attempt 0 for a fresh sample."""
    wanted = attempts[-1].parent if attempts[-1].parent is not None else attempts[0].index
    return next((a for a in attempts[:-1] if a.index == wanted), None)


def choose_next(
    strategy: Strategy,
    attempts: Sequence[Attempt],
    task: str,
    record: Mapping[str, MoveStats] | None = None,
    *,
    rung: str | None = None,
) -> Choice:
    """What the next round generates: a fresh sample, or a refinement of which attempt.

    Args:
        strategy: `"chain"`, `"explore"` or `"sample"`.
        attempts: Every attempt so far, in order; the last was just evaluated.
        task: The task, which seeds the explore strategy's draws.
        record: Counts per kind of move pooled over earlier runs of the same model and
            evaluator, not counting this run's rounds (explore adds those itself from
            `attempts`). Keys `"<kind>@<state>"` (`state_kind`) hold the counts of the
            rounds that started from one state (`run_state`); keys
            `"<kind>[@<band>]#<outcome>"` (`score_kind`) hold the score counts, each
            outcome's count as `rounds`. None or empty: explore starts knowing nothing.
        rung: The model of the ladder rung that will make the move, if known: explore
            then weighs that rung's own rounds from the run's state first.

    Returns:
        The kind of move and the attempt it starts from.

    Example:
        >>> from langgraph_refine import Attempt, Evaluation
        >>> first = Attempt(index=0, response="a", evaluation=Evaluation(score=0.4))
        >>> choose_next("chain", [first], "t")
        Choice(move='refine', parent=0)
        >>> choose_next("sample", [first], "t")
        Choice(move='sample', parent=None)
    """
    if not attempts or strategy == "sample":
        return SAMPLE
    if strategy == "chain":
        return _refine(attempts[-1].index)
    return _explore(attempts, task, record or {}, rung)


def _refine(index: int) -> Choice:
    return Choice("refine", index)


def _explore(
    attempts: Sequence[Attempt],
    task: str,
    record: Mapping[str, MoveStats],
    rung: str | None = None,
) -> Choice:
    progress = _progress(attempts)
    best = progress.best
    if best is None:  # nothing evaluated
        return SAMPLE
    if attempts[-1].parent is not None and progress.latest_raised:
        return _refine(best.index)  # a refinement just worked here: exploit it
    if rung is None and _scored_rounds(record, FRESH_MOVES[0]):
        # Score counts pool every model's answers: with a ladder, the rung's counts by
        # state decide (measured: the pooled scores moved the ladder's runs to dearer rungs).
        return _explore_by_gain(attempts, record, best)
    if _pooled_rounds(record):  # a record written before score counts
        return _explore_with_record(attempts, task, record, best, rung)
    if len(attempts) == 1:
        return _refine(best.index)
    refine_wins, refines = progress.refine
    sample_wins, samples = progress.sample
    # A refinement that scored below its parent is evidence of a model that degrades what
    # it refines (the local 135M model: two in three of its refinements fall, 2-4% raise;
    # `make bench BENCH=refine_outcomes`); one that kept its parent's score is not (a
    # strong model that missed a fix). Then: which kind
    # of move has raised the best score more often so far (Laplace-smoothed, ties to
    # refining)? With a handful of rounds a greedy choice measured better than a Thompson
    # draw: a draw samples away from a refiner that works half the time.
    if _fell(attempts) > refine_wins:
        return SAMPLE
    if (sample_wins + 1) / (samples + 2) > (refine_wins + 1) / (refines + 2):
        return SAMPLE
    rng = random.Random(_seed(task, len(attempts)))
    refined = _times_refined(attempts)
    draws = [
        (_draw(rng, rank_value(a), refined.get(a.index, 0)), a.index)
        for a in attempts
        if a.evaluation is not None
    ]
    return _refine(max(draws, key=lambda d: d[0])[1])  # ties go to the earlier attempt


def _explore_with_record(
    attempts: Sequence[Attempt],
    task: str,
    record: Mapping[str, MoveStats],
    best: Attempt,
    rung: str | None = None,
) -> Choice:
    """Explore's choice weighing the pooled record with this run's own rounds.

    When the record holds at least `STATE_MIN_ROUNDS` rounds that started from the
    state this run is in (`run_state`), those counts and this run's own rounds from that
    state are weighed; else the counts pooled over every state and all of this run's.
    Two Thompson draws over "raised the best score" rates: refining the best attempt
    against a fresh answer (every fresh kind's counts together), then, if fresh, which
    fresh kind. A kind's belief is `Beta(1 + k*raised, 1 + k*(rounds - raised))` over
    pooled plus own counts, sharpened by `k = min(RECORD_SHARPEN_MAX, 1 + pooled/
    RECORD_SHARPEN_ROUNDS)` as the pooled record grows: a thin record explores, a
    thick one mostly acts on what it says (so a kind it says hurts is rarely tried).
    """
    state = run_state(attempts)
    credit = KEPT_CREDIT
    own = round_stats(attempts)
    labels = [state] if rung is None or state is None else [rung_state(state, rung), state]
    for label in labels:  # the moving rung's rounds from here first, then any rung's
        scoped = in_state(record, label)
        if _pooled_rounds(scoped) >= STATE_MIN_ROUNDS:  # enough rounds from where it stands
            record, credit = scoped, STATE_KEPT_CREDIT
            own = state_stats(attempts).get(label or "", {})
            break
    counts = _counts(record, own)
    rng = random.Random(_seed(task, len(attempts)))
    sharpen = min(RECORD_SHARPEN_MAX, 1.0 + _pooled_rounds(record) / RECORD_SHARPEN_ROUNDS)

    def total(*kinds: str) -> MoveStats:
        return sum((counts.get(kind, MoveStats()) for kind in kinds), MoveStats())

    def draw(stats: MoveStats) -> float:
        kept = stats.rounds - stats.raised - stats.fell
        worth = stats.raised + credit * kept
        return rng.betavariate(1.0 + sharpen * worth, 1.0 + sharpen * (stats.rounds - worth))

    def first_wins(first: MoveStats, second: MoveStats) -> bool:
        # A side never tried does not displace one that has never failed to raise the
        # best (as without a record, where sampling starts only once refining fails).
        if second.rounds == 0 and first.raised == first.rounds:
            return True
        if first.rounds == 0 and second.raised == second.rounds:
            return False
        return draw(first) >= draw(second)  # ties go to the first

    if first_wins(total("refine"), total(*FRESH_MOVES)):
        return _refine(best.index)
    kind = FRESH_MOVES[0]
    for other in FRESH_MOVES[1:]:
        if not first_wins(total(kind), total(other)):
            kind = other
    return Choice(kind)


def score_counts(attempts: Sequence[Attempt]) -> dict[str, dict[str, int]]:
    """This run's outcomes by kind of move, as the record's score counts keep them.

    A fresh answer (attempt 0 included) counts its score under its kind: `{"sample":
    {"7": 1}}` for a sample scored 0.7. A move that started from an attempt (a
    refinement) counts how far its score moved from that attempt's, under its kind and
    the band of the attempt's score (`run_state`'s bands): `{"refine@b1": {"+2": 1}}`
    for a refinement of a 0.4 attempt scored 0.6. Scores count in tenths (`SCORE_BINS`),
    a PASS as 1.0; unevaluated attempts do not count.

    Example:
        >>> from langgraph_refine import Attempt, Evaluation
        >>> first = Attempt(index=0, response="a", evaluation=Evaluation(score=0.4))
        >>> better = Attempt(index=1, response="b", parent=0, evaluation=Evaluation(score=0.6))
        >>> score_counts([first, better])
        {'sample': {'4': 1}, 'refine@b1': {'+2': 1}}
    """
    counts: dict[str, dict[str, int]] = {}
    by_index = {a.index: a for a in attempts}
    for attempt in attempts:
        outcome = _scored_outcome(attempt, by_index)
        if outcome is not None:
            bins = counts.setdefault(outcome[0], {})
            bins[outcome[1]] = bins.get(outcome[1], 0) + 1
    return counts


def score_kind(kind: str, outcome: str) -> str:
    """The key of one outcome's count among the counts handed to `choose_next`."""
    return f"{kind}{SCORE_MARK}{outcome}"


def scores_as_counts(scores: Mapping[str, Mapping[str, int]]) -> dict[str, MoveStats]:
    """Score counts as `choose_next` takes them: each outcome's count as the rounds of its key.

    Example:
        >>> scores_as_counts({"refine@b1": {"+2": 3}})
        {'refine@b1#+2': MoveStats(rounds=3, raised=0, fell=0)}
    """
    return {
        score_kind(kind, outcome): MoveStats(rounds=n)
        for kind, outcomes in scores.items()
        for outcome, n in outcomes.items()
    }


def _scored_outcome(attempt: Attempt, by_index: Mapping[int, Attempt]) -> tuple[str, str] | None:
    """(kind, outcome bin) of one evaluated attempt, as `score_counts` counts it."""
    if attempt.evaluation is None:
        return None
    kind = attempt.move or ("sample" if attempt.parent is None else "refine")
    if attempt.parent is None:
        return kind, str(round(rank_value(attempt) * SCORE_BINS))
    start = by_index.get(attempt.parent)
    if start is None or start.evaluation is None:
        return None
    moved = round((rank_value(attempt) - rank_value(start)) * SCORE_BINS)
    return f"{kind}@b{_band(rank_value(start))}", f"{moved:+d}"


def _scored_rounds(record: Mapping[str, MoveStats], kind: str) -> int:
    prefix = f"{kind}{SCORE_MARK}"
    return sum(stats.rounds for key, stats in record.items() if key.startswith(prefix))


def _explore_by_gain(
    attempts: Sequence[Attempt], record: Mapping[str, MoveStats], best: Attempt
) -> Choice:
    """Explore's choice from the record's score counts: the move expected to raise the best most.

    For each move, the outcomes it had (pooled over earlier runs, and this run's own),
    with `SCORES_PRIOR` pseudo-outcomes spread evenly over every outcome it can have
    from here (any score for a fresh answer; a move to any score for a refinement),
    give its expected gain: how far, on average, its answer would score above the best
    so far. A fresh answer's outcomes are its scores wherever the run stood (where a
    run stands does not change a fresh answer); a refinement's are how far it moved
    from the attempt it refined, when that attempt's score was in the band the best is
    in now; from a band where the record holds no refinement, the run refines once
    (`_worth_a_try`), then what refinements did from every band and what every answer
    did stand in (`_refine_worth`). Refining the best wins ties.
    """
    top = rank_value(best)
    own = score_counts(attempts)
    seen = _outcomes(record, own)
    answers = {
        kind: [
            (_worth(score / SCORE_BINS - top, top), n) for score, n in seen.get(kind, {}).items()
        ]
        for kind in FRESH_MOVES
    }
    band = f"refine{STATE_MARK}b{_band(top)}"
    borrow = not _in_record(record, band)
    if borrow and band not in own and _worth_a_try(seen):
        # Exploration: a band that would borrow is refined from once, so it gathers
        # evidence of its own; a borrowed low value would keep it sampling for good.
        return _refine(best.index)
    refined = _refine_worth(seen, top, [a for found in answers.values() for a in found], borrow)
    spread = _mean(_worth(score / SCORE_BINS - top, top) for score in range(SCORE_BINS + 1))
    fresh = {kind: _backed_off([answers[kind]], spread) for kind in FRESH_MOVES}
    costs = _costs(attempts)
    if "refine" in costs and "sample" in costs:  # per dollar, when this run has priced both
        refined /= costs["refine"]
        # A fresh kind not called yet is priced as a plain sample (the task, and a little more).
        fresh = {k: value / costs.get(k, costs["sample"]) for k, value in fresh.items()}
    kind = FRESH_MOVES[0]
    for other in FRESH_MOVES[1:]:  # ties: the earlier in FRESH_MOVES
        if fresh[other] > fresh[kind] + TIE:
            kind = other
    return _refine(best.index) if refined >= fresh[kind] - TIE else Choice(kind)


def _refine_worth(
    seen: Mapping[str, Mapping[int, int]],
    top: float,
    answers: Sequence[tuple[float, int]],
    borrow: bool,
) -> float:
    """The expected worth of refining the best (scored `top`), from the outcomes `seen`.

    From the best's band, its refinements' moves with `SCORES_PRIOR` pseudo-outcomes
    spread evenly. When the record holds no refinement from that band (`borrow`; this
    run's own may), the band backs off (`_backed_off`) to the refinements from every band,
    each move taken as the same share of the room above or below (`_rescaled`), then to
    every answer's worth from here (`answers`: the fresh ones), then to the even spread.
    The spread keeps a weight of `SCORES_PRIOR` times the share of refinements seen that
    did not fall: a model whose refinements have always fallen gets no benefit of the
    doubt in a band it has not refined from, one whose refinements mostly held still
    tries there.

    Measured (`make bench BENCH=strategies`): backing off also where the band holds a
    few refinements of the record lost on the medium refiners (warm explore above both
    fixed rules on 5-7 of 11 against 11 of 11): refinements from another band say too
    little of this one's for a thin band to give up its own spread. Where it applies
    alone it costs too: a band that borrows a low value is not refined from, so it never
    gathers refinements of its own (about one random refiner in twenty missed "within
    0.01"); `_explore_by_gain` therefore tries such a band once first (`_worth_a_try`),
    and borrowing decides only after that try or where refinements have only fallen.
    """
    here = round(top * SCORE_BINS)  # a refinement of the best moves it to a score in 0..1
    even = _mean(_worth(moved / SCORE_BINS, top) for moved in range(-here, SCORE_BINS - here + 1))
    band = seen.get(f"refine{STATE_MARK}b{_band(top)}", {})
    own = [(_worth(moved / SCORE_BINS, top), n) for moved, n in band.items()]
    moves = _refinement_moves(seen)
    if not borrow or not moves:
        return _backed_off([own], even)
    pooled = [
        (_worth(_rescaled(moved, kind, top) / SCORE_BINS, top), n) for kind, moved, n in moves
    ]
    held = sum(n for _, moved, n in moves if moved >= 0) / sum(n for _, _, n in moves)
    return _backed_off([own, pooled, [*pooled, *answers]], even, hope=SCORES_PRIOR * held)


def _refinement_moves(seen: Mapping[str, Mapping[int, int]]) -> list[tuple[str, int, int]]:
    """Every refinement's (kind with band, move in tenths, count) among the outcomes `seen`."""
    return [
        (kind, moved, n)
        for kind, bins in seen.items()
        if kind.startswith(f"refine{STATE_MARK}b")
        for moved, n in bins.items()
    ]


def _worth_a_try(seen: Mapping[str, Mapping[int, int]]) -> bool:
    """Whether a band no earlier run refined from is refined from once, before it borrows.

    Yes when some refinement was seen (else nothing would be borrowed: the band's even
    spread decides, `_refine_worth`), unless refinements have fallen `TRY_FALLS` times
    and none kept or raised what it refined: a model whose refinements always fall is not
    tried again from every new band (the runs of a model like that sample from round 1).
    One fallen refinement, or falls among refinements that held, are not enough to say
    a band the record has not seen is not worth a round: without this try such a band
    borrowed a low value, chose a fresh answer, and never gathered evidence of its own.
    """
    moves = _refinement_moves(seen)
    held = sum(n for _, moved, n in moves if moved >= 0)
    fell = sum(n for _, moved, n in moves if moved < 0)
    return bool(moves) and (held > 0 or fell < TRY_FALLS)


def _costs(attempts: Sequence[Attempt]) -> dict[str, float]:
    """The mean cost of this run's rounds by kind of move, where every one of them is priced.

    A round's cost is its attempt's usage (its generation and its judging). A refinement's
    prompt carries the attempt and its feedback, so it usually costs more than a fresh
    answer's; explore weighs the gains per dollar once this run has priced both.
    """
    spent: dict[str, list[float]] = {}
    for attempt in attempts:
        kind = attempt.move or ("sample" if attempt.parent is None else "refine")
        spent.setdefault(kind, []).append(attempt.usage.cost or 0.0)
    return {k: sum(v) / len(v) for k, v in spent.items() if all(c > 0 for c in v)}


def _outcomes(
    record: Mapping[str, MoveStats], own: Mapping[str, Mapping[str, int]]
) -> dict[str, dict[int, int]]:
    """Every outcome by kind (and band), the record's score counts and this run's own together."""
    seen: dict[str, dict[int, int]] = {}
    for kind, bins in own.items():
        for outcome, n in bins.items():
            found = seen.setdefault(kind, {})
            found[int(outcome)] = found.get(int(outcome), 0) + n
    for key, stats in record.items():
        kind, mark, outcome = key.partition(SCORE_MARK)
        if mark:
            found = seen.setdefault(kind, {})
            found[int(outcome)] = found.get(int(outcome), 0) + stats.rounds
    return seen


def _in_record(record: Mapping[str, MoveStats], kind: str) -> bool:
    """Whether the record (earlier runs, not this one) holds an outcome of `kind`."""
    return any(key.partition(SCORE_MARK)[0] == kind for key in record)


def _rescaled(moved: int, kind: str, top: float) -> float:
    """A refinement's move (in tenths) from its band, as the same share of the room from `top`.

    A move up is the share of the room above its start it took (the start taken at its
    band's middle), a move down the share of the room below it; that share of the room
    above or below `top` is how far it moves here. So a refinement that finished a
    nearly done answer says it may finish one further off, and one that dropped most
    of what it refined says it drops most of this one too.
    """
    start = (int(kind.rpartition("b")[2]) + 0.5) * SCORE_BINS / STATE_BANDS
    here = top * SCORE_BINS
    if moved >= 0:
        return min(1.0, moved / (SCORE_BINS - start)) * (SCORE_BINS - here)
    return max(-1.0, moved / start) * here


def _backed_off(
    levels: Sequence[Sequence[tuple[float, int]]], prior: float, hope: float = 0.0
) -> float:
    """A move's expected worth, each level of evidence shrunk towards the coarser one above it.

    `levels` hold the worth of each outcome seen and how often it was seen, finest first
    (say, from the best's band), each coarser one pooling more (from every band). The
    coarsest level's mean worth is shrunk towards `prior` (the mean worth of an even
    spread over every outcome the move can have) by `SCORES_PRIOR` pseudo-outcomes, and
    each finer level's towards the estimate of the level above by `BACKOFF_ROUNDS`:
    `(sum of its outcomes' worth + k * coarser) / (outcomes + k)`, the standard
    pseudo-count back-off. So a level that has seen little starts from what the coarser
    ones know, not from nothing, and a few of its own outcomes soon outweigh them. The
    finest of several levels also keeps `hope` pseudo-outcomes of `prior`.

    Example:
        >>> round(_backed_off([[(0.2, 3)]], prior=0.1), 3)  # (3 * 0.2 + 1 * 0.1) / (3 + 1)
        0.175
    """
    estimate, weight = prior, SCORES_PRIOR
    for depth, level in enumerate(reversed(levels), start=1):
        extra = hope if depth == len(levels) > 1 else 0.0
        total = sum(worth * n for worth, n in level) + weight * estimate + extra * prior
        estimate = total / (sum(n for _, n in level) + weight + extra)
        weight = BACKOFF_ROUNDS
    return estimate


def _mean(values: Iterable[float]) -> float:
    found = list(values)
    return sum(found) / len(found)


def _worth(moved: float, top: float) -> float:
    """What an answer scored `moved` from the best (`top`) is worth to the run.

    How far it raises the best (`_above`, at most to 1.0), less `FALL_WEIGHT` times how
    far it falls below it: between two moves that raise the best alike (say neither ever
    does), the one whose answers stay near the best wins.
    """
    return min(_above(moved), 1.0 - top) - FALL_WEIGHT * max(0.0, -moved)


def _above(moved: float) -> float:
    """How far above the best an outcome `moved` from it lands, on average.

    An outcome is known to its bin (a tenth): its score is taken to be anywhere in it,
    so one in the best's own bin raises it by a fortieth on average, and one in a bin
    below or above by nothing or by the whole difference.
    """
    half = 0.5 / SCORE_BINS
    if moved >= half:
        return moved
    if moved <= -half:
        return 0.0
    return (moved + half) ** 2 / (4 * half)


def _band(score: float) -> int:
    return min(STATE_BANDS - 1, int(score * STATE_BANDS))


def _pooled_rounds(record: Mapping[str, MoveStats]) -> int:
    # Counts of every state (pooled kinds); the state-keyed ones (`"refine@..."`) are not summed.
    return sum(record[kind].rounds for kind in ("refine", *FRESH_MOVES) if kind in record)


def _counts(record: Mapping[str, MoveStats], own: Mapping[str, MoveStats]) -> dict[str, MoveStats]:
    return {
        kind: record.get(kind, MoveStats()) + own.get(kind, MoveStats()) for kind in {*record, *own}
    }


class _Progress(NamedTuple):
    """What explore reads from a run's attempts, found in one pass (see `_progress`)."""

    best: Attempt | None  # the best evaluated attempt (`best_attempt`)
    latest_raised: bool  # the latest attempt beat every earlier one (`_raised_best`)
    refine: tuple[int, int]  # (wins, rounds) of refinements after the first attempt
    sample: tuple[int, int]  # (wins, rounds) of fresh samples after the first attempt


def _progress(attempts: Sequence[Attempt]) -> _Progress:
    """The best attempt, whether the latest raised the best, and each kind's wins and rounds.

    A win is a round whose attempt raised the best score of the attempts before it (by
    the best-attempt rule; ties: the earlier stays). One pass, not one search per round.
    """
    refine, sample = [0, 0], [0, 0]
    best: Attempt | None = None
    best_rank = UNRANKED
    raised = False
    for k, attempt in enumerate(attempts):
        raised = best is None  # an unevaluated latest "raised" only an empty history
        if attempt.evaluation is None:
            continue
        rank = attempt_rank(attempt)
        raised = raised or rank > best_rank
        if k >= 1:
            kind = sample if attempt.parent is None else refine
            kind[1] += 1
            kind[0] += raised
        if raised:
            best, best_rank = attempt, rank
    return _Progress(best, raised, (refine[0], refine[1]), (sample[0], sample[1]))


def _fell(attempts: Sequence[Attempt]) -> int:
    """How many refinements scored below the attempt they refined."""
    by_index = {a.index: a for a in attempts}
    return sum(
        1
        for a in attempts
        if a.parent is not None
        and a.evaluation is not None
        and a.parent in by_index
        and rank_value(a) < rank_value(by_index[a.parent])
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


def _draw(rng: random.Random, score: float, tries: int) -> float:
    alpha = 1.0 + EXPLORE_WEIGHT * score
    beta = 1.0 + EXPLORE_WEIGHT * (1.0 - score) + tries
    return rng.betavariate(alpha, beta)


def _seed(task: str, round_number: int) -> int:
    digest = hashlib.sha256(f"{round_number}:{task}".encode()).digest()
    return int.from_bytes(digest[:8], "big")

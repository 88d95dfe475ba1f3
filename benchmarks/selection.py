"""Judging that survives a noisy judge: pairwise final choice and confirmed passes.

Scripted loops whose attempts have a hidden true quality, judged by simulated judges:

- a pointwise judge that sees the quality plus Gaussian noise (sd 0.05 to 0.30);
- a pairwise judge that perceives the difference of the two qualities plus the same
  noise, plus a position bias (it adds `POSITION_BIAS` in favour of whichever response
  is shown first), and answers "tie" when what it perceives is within `TIE_BAND`.

Each trial draws one loop: attempt 0's quality is uniform in [0.3, 0.7], each refinement
moves it by a normal step (mean +0.03, sd 0.10), clipped to [0, 1]; five attempts
(`max_iterations=4`, no early stop). The same trial (same attempts, same pointwise
scores) is run through `refine` twice, with `select="score"` and `select="pairwise"`
(the library's own selection code, in its finalize step, each comparison a counted
call). Regret is the oracle's quality (the best attempt's) minus the returned one's.

False-PASS stops: the judge says PASS when its noisy score is at least 0.8; an attempt
truly passes when its quality is at least 0.8. A loop that stops "passed" on an attempt
whose quality is below 0.8 is a false-PASS stop. Each trial runs with and without
`confirm_pass=True` (the second judgment has its own noise).

The defaults of `select_top` and `select_margin` are chosen on a grid at noise sd 0.15,
using the selection code directly on trials of their own. Intervals are 95% bootstrap
intervals over trials (paired: the same resampled trials for both variants).
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from benchmarks._harness import BenchResult, Figure, md_table
from langgraph_refine import Attempt, Evaluation, refine
from langgraph_refine._loop._select import (
    DEFAULT_SELECT_MARGIN,
    DEFAULT_SELECT_TOP,
    CallableComparer,
    Selection,
)
from langgraph_refine.evaluators import CallableEvaluator

ATTEMPTS = 5
NOISE_LEVELS = (0.05, 0.10, 0.15, 0.20, 0.30)
HEADLINE_NOISE = 0.15
POSITION_BIAS = 0.10
TIE_BAND = 0.02
PASS_QUALITY = 0.8
TOPS = (2, 3, 4, 5)
MAX_DEFAULT_CALLS = 6.0
"""The defaults may cost at most this many comparison calls per run on average: a five-round
loop with a judge costs ten calls, and selection should not cost much more than half of it."""
MARGINS = (0.05, 0.1, 0.2, 0.3, 1.0)
NEAR_BEST = 0.02
"""Cuts within two points count as equal (the bootstrap intervals are about 20 points wide)."""
BOOTSTRAP = 1000
TASK = "Write the best answer you can."


@dataclass
class Trial:
    """One loop: the attempts' true qualities and the pointwise judge's scores."""

    quality: list[float]
    scores: list[float]
    seed: int


def clip(x: float) -> float:
    return min(1.0, max(0.0, x))


def draw(rng: random.Random, sd: float, seed: int) -> Trial:
    quality = [rng.uniform(0.3, 0.7)]
    for _ in range(ATTEMPTS - 1):
        quality.append(clip(quality[-1] + rng.gauss(0.03, 0.10)))
    # Kept below 1.0 so that no loop stops early on `target_score=1.0`: every loop has
    # all five attempts, the ones the oracle chooses from.
    scores = [min(clip(q + rng.gauss(0.0, sd)), 0.999) for q in quality]
    return Trial(quality, scores, seed)


def pairwise_judge(trial: Trial, sd: float) -> Callable[[str, str, str], str]:
    """The position-biased, noisy pairwise judge of one trial (its own seeded noise)."""
    rng = random.Random(trial.seed * 7919 + 1)

    def compare(task: str, first: str, second: str) -> str:
        a, b = int(first[1:]), int(second[1:])
        seen = trial.quality[a] - trial.quality[b] + POSITION_BIAS + rng.gauss(0.0, sd)
        if seen > TIE_BAND:
            return "first"
        if seen < -TIE_BAND:
            return "second"
        return "tie"

    return compare


def run_loop(trial: Trial, sd: float, select: str) -> tuple[float, int]:
    """The returned attempt's true quality and the model calls the run made."""

    def generate(state: Any) -> str:
        return f"a{len(state['attempts'])}"

    def evaluate(response: str, state: Any) -> float:
        return trial.scores[int(response[1:])]

    options: dict[str, Any] = {}
    if select == "pairwise":
        options = {"select": "pairwise", "comparer": pairwise_judge(trial, sd)}
    result = refine(
        generate,
        TASK,
        CallableEvaluator(evaluate, calls_model=True),  # a judge: one call per evaluation
        max_iterations=ATTEMPTS - 1,
        patience=None,
        target_score=1.0,
        strategy="chain",
        **options,
    )
    assert result.best_index is not None
    return trial.quality[result.best_index], result.usage.calls


def bootstrap_ratio(
    num: Sequence[float], den: Sequence[float], seed: int = 1
) -> tuple[float, float]:
    """95% bootstrap interval of sum(num)/sum(den), resampling trials (paired)."""
    rng = random.Random(seed)
    n = len(num)
    ratios = []
    for _ in range(BOOTSTRAP):
        idx = [rng.randrange(n) for _ in range(n)]
        d = sum(den[i] for i in idx)
        if d > 0:
            ratios.append(sum(num[i] for i in idx) / d)
    ratios.sort()
    return ratios[int(0.025 * len(ratios))], ratios[int(0.975 * len(ratios)) - 1]


def bootstrap_mean(values: Sequence[float], seed: int = 2) -> tuple[float, float]:
    rng = random.Random(seed)
    n = len(values)
    means = sorted(
        statistics.fmean(values[rng.randrange(n)] for _ in range(n)) for _ in range(BOOTSTRAP)
    )
    return means[int(0.025 * BOOTSTRAP)], means[int(0.975 * BOOTSTRAP) - 1]


def selection_sweep(trials: Sequence[Trial], sd: float) -> dict[str, Any]:
    """Regret with score and pairwise selection, through the full loop."""
    regret_score, regret_pair, q_score, q_pair, calls_score, calls_pair = [], [], [], [], [], []
    for trial in trials:
        oracle = max(trial.quality)
        qs, cs = run_loop(trial, sd, "score")
        qp, cp = run_loop(trial, sd, "pairwise")
        regret_score.append(oracle - qs)
        regret_pair.append(oracle - qp)
        q_score.append(qs)
        q_pair.append(qp)
        calls_score.append(cs)
        calls_pair.append(cp)
    total_score = sum(regret_score)
    cut = 1 - sum(regret_pair) / total_score if total_score else 0.0
    low, high = bootstrap_ratio(regret_pair, regret_score)
    return {
        "sd": sd,
        "regret_score": statistics.fmean(regret_score),
        "regret_pair": statistics.fmean(regret_pair),
        "quality_score": statistics.fmean(q_score),
        "quality_pair": statistics.fmean(q_pair),
        "oracle": statistics.fmean(max(t.quality) for t in trials),
        "cut": cut,
        "cut_low": 1 - high,
        "cut_high": 1 - low,
        "calls_score": statistics.fmean(calls_score),
        "calls_pair": statistics.fmean(calls_pair),
    }


def grid(trials: Sequence[Trial], sd: float) -> list[dict[str, Any]]:
    """Regret cut and comparisons per (select_top, select_margin), with the selection code."""
    rows = []
    for top in TOPS:
        for margin in MARGINS:
            regret_score, regret_pair, compared = [], [], []
            for trial in trials:
                attempts = [
                    Attempt(index=i, response=f"a{i}", evaluation=Evaluation(score=s))
                    for i, s in enumerate(trial.scores)
                ]
                selection = Selection(
                    TASK, attempts, top, margin, CallableComparer(pairwise_judge(trial, sd))
                )
                record = selection.run(lambda fn, *args: fn(*args))
                by_score = max(range(ATTEMPTS), key=lambda i: (trial.scores[i], -i))
                oracle = max(trial.quality)
                regret_score.append(oracle - trial.quality[by_score])
                regret_pair.append(oracle - trial.quality[record["chosen"]])
                compared.append(2 * len(record["comparisons"]))
            cut = 1 - sum(regret_pair) / sum(regret_score)
            rows.append(
                {"top": top, "margin": margin, "cut": cut, "calls": statistics.fmean(compared)}
            )
    return rows


def false_pass(trials: Sequence[Trial], sd: float) -> dict[str, Any]:
    """False-PASS stops per run, with and without `confirm_pass`."""
    out: dict[str, Any] = {}
    for confirm in (False, True):
        false_stops, calls, quality = [], [], []
        for trial in trials:
            rng = random.Random(trial.seed * 104729 + 3)
            stopped_on: list[int] = []

            def generate(state: Any) -> str:
                return f"a{len(state['attempts'])}"

            def evaluate(
                response: str, state: Any, trial: Trial = trial, rng: random.Random = rng
            ) -> Evaluation:
                i = int(response[1:])
                score = clip(trial.quality[i] + rng.gauss(0.0, sd))
                verdict = "PASS" if score >= PASS_QUALITY else "NEEDS_IMPROVEMENT"
                return Evaluation(score=score, verdict=verdict)

            result = refine(
                generate,
                TASK,
                CallableEvaluator(evaluate, calls_model=True),
                max_iterations=ATTEMPTS - 1,
                patience=None,
                target_score=1.0,
                strategy="chain",
                confirm_pass=confirm,
            )
            if result.stop_reason == "passed":
                stopped_on.append(result.attempts[-1].index)
            false_stops.append(
                1.0 if stopped_on and trial.quality[stopped_on[0]] < PASS_QUALITY else 0.0
            )
            calls.append(result.usage.calls)
            assert result.best_index is not None
            quality.append(trial.quality[result.best_index])
        key = "confirm" if confirm else "plain"
        out[key] = {
            "rate": statistics.fmean(false_stops),
            "stops": false_stops,
            "calls": statistics.fmean(calls),
            "quality": statistics.fmean(quality),
        }
    low, high = bootstrap_ratio(out["confirm"]["stops"], out["plain"]["stops"])
    out["ratio"] = (
        out["confirm"]["rate"] / out["plain"]["rate"] if out["plain"]["rate"] else float("nan")
    )
    out["ratio_low"], out["ratio_high"] = low, high
    return out


def run(quick: bool = False) -> BenchResult:
    """Measure pairwise selection and confirmed passes on scripted noisy judges."""
    n = 60 if quick else 400
    sweeps = []
    headline: dict[str, Any] = {}
    trials_by_sd: dict[float, list[Trial]] = {}
    for k, sd in enumerate(NOISE_LEVELS):
        rng = random.Random(1000 + k)
        trials = [draw(rng, sd, seed=10_000 * k + i) for i in range(n)]
        trials_by_sd[sd] = trials
        sweep = selection_sweep(trials, sd)
        sweeps.append(sweep)
        if sd == HEADLINE_NOISE:
            headline = sweep
    # The defaults are chosen on trials of their own, so the headline figure (measured
    # with them) is not judged on the trials that chose them.
    tuning = random.Random(5000)
    tuning_trials = [draw(tuning, HEADLINE_NOISE, seed=900_000 + i) for i in range(n)]
    grid_rows = grid(tuning_trials, HEADLINE_NOISE)
    affordable = [r for r in grid_rows if r["calls"] <= MAX_DEFAULT_CALLS]
    best_cut = max(r["cut"] for r in affordable)
    # The cheapest affordable setting whose cut is within NEAR_BEST of the best affordable.
    chosen = min(
        (r for r in affordable if r["cut"] >= best_cut - NEAR_BEST),
        key=lambda r: (r["calls"], -r["cut"]),
    )
    passes = false_pass(trials_by_sd[HEADLINE_NOISE], HEADLINE_NOISE)

    figures = [
        Figure(
            name=f"regret cut by select='pairwise' at noise sd {HEADLINE_NOISE} "
            f"(defaults top={DEFAULT_SELECT_TOP}, margin={DEFAULT_SELECT_MARGIN})",
            value=100 * headline["cut"],
            unit="%",
            target=">= 40%",
            passed=headline["cut"] >= 0.40,
            spread=f"95% CI {100 * headline['cut_low']:.0f}-{100 * headline['cut_high']:.0f}% "
            f"(n={n})",
        ),
        Figure(
            name="false-PASS stops with confirm_pass, relative to without",
            value=passes["ratio"],
            unit="x",
            target="<= 0.5x",
            passed=passes["ratio"] <= 0.5,
            spread=f"95% CI {passes['ratio_low']:.2f}-{passes['ratio_high']:.2f} (n={n})",
        ),
        Figure(
            name=f"grid's choice (cheapest within {100 * NEAR_BEST:.0f} points of the best cut "
            f"costing at most {MAX_DEFAULT_CALLS:g} comparison calls): "
            f"top={chosen['top']}, margin={chosen['margin']}; library defaults match",
            value=100 * chosen["cut"],
            unit="%",
            target="defaults = choice",
            passed=(chosen["top"], chosen["margin"]) == (DEFAULT_SELECT_TOP, DEFAULT_SELECT_MARGIN),
        ),
        Figure(
            name=f"extra calls per run for pairwise selection (sd {HEADLINE_NOISE})",
            value=headline["calls_pair"] - headline["calls_score"],
            unit="",
        ),
        Figure(
            name="extra calls per run for confirm_pass",
            value=passes["confirm"]["calls"] - passes["plain"]["calls"],
            unit="",
        ),
    ]
    sweep_table = md_table(
        [
            "noise sd",
            "oracle quality",
            "returned, score",
            "returned, pairwise",
            "regret cut (95% CI)",
            "calls, score",
            "calls, pairwise",
        ],
        [
            [
                f"{s['sd']:.2f}",
                f"{s['oracle']:.3f}",
                f"{s['quality_score']:.3f}",
                f"{s['quality_pair']:.3f}",
                f"{100 * s['cut']:.0f}% ({100 * s['cut_low']:.0f}-{100 * s['cut_high']:.0f}%)",
                f"{s['calls_score']:.1f}",
                f"{s['calls_pair']:.1f}",
            ]
            for s in sweeps
        ],
    )
    grid_table = md_table(
        ["select_top", "select_margin", "regret cut", "comparison calls per run"],
        [[r["top"], r["margin"], f"{100 * r['cut']:.0f}%", f"{r['calls']:.1f}"] for r in grid_rows],
    )
    pass_table = md_table(
        ["", "false-PASS stops per run", "mean returned quality", "calls per run"],
        [
            [
                label,
                f"{passes[key]['rate']:.3f}",
                f"{passes[key]['quality']:.3f}",
                f"{passes[key]['calls']:.2f}",
            ]
            for label, key in (("without confirm_pass", "plain"), ("confirm_pass=True", "confirm"))
        ],
    )
    notes = [
        "Scripted judges, not a real model: attempt 0's true quality is uniform in [0.3, 0.7], "
        "each refinement adds a normal step (mean +0.03, sd 0.10), five attempts per loop. The "
        "pointwise judge sees the quality plus N(0, sd). The pairwise judge perceives the "
        "quality difference plus the same N(0, sd) per call, plus a position bias of "
        f"+{POSITION_BIAS} towards the response shown first, and says tie within "
        f"±{TIE_BAND}. Both orders of a pair are asked; disagreeing orders are a tie.",
        "Every run goes through `refine` (the finalize step makes the comparisons, counted as "
        "model calls: the pointwise judge counts one call per evaluation). The grid below "
        "uses the same selection code directly, on separate trials drawn for choosing the "
        "defaults (so the headline is not measured on the trials that chose them).",
        "Defaults: among the grid's settings costing at most "
        f"{MAX_DEFAULT_CALLS:g} comparison calls per run on average (a five-round loop with a "
        "judge costs ten calls), the cheapest whose regret cut is within "
        f"{100 * NEAR_BEST:.0f} points of the best of them. (A first run took the largest "
        "cut outright and chose select_margin=1.0, one point above 0.3 for a fifth more "
        "calls; cuts that close are within the noise, so the rule now prefers the cheaper.) "
        "Wider settings cut more regret (all five attempts compared cut the most) at k(k-1) "
        "calls for k candidates; pass select_top and select_margin to buy more.",
        "False-PASS stops: PASS when the noisy score is >= 0.8; a stop is false when the "
        "attempt's true quality is below 0.8. With confirm_pass the second judgment has its "
        "own independent noise, which is the best case for confirmation: a judge whose "
        "errors repeat on the same response (a stable bias) would be caught less often.",
    ]
    if headline["cut_low"] < 0.40 <= headline["cut"]:
        notes.append(
            f"The headline cut ({100 * headline['cut']:.0f}%) meets the 40% goal as a point "
            f"estimate; its 95% interval reaches down to {100 * headline['cut_low']:.0f}%, so "
            "the goal is not met with 95% confidence on these trials."
        )
    return BenchResult(
        name="selection",
        title="Pairwise final choice and confirmed passes against noisy judges (scripted)",
        figures=figures,
        notes=notes,
        tables=[
            "Returned quality and regret by noise level\n\n" + sweep_table,
            f"select_top / select_margin at noise sd {HEADLINE_NOISE}\n\n" + grid_table,
            f"False-PASS stops at noise sd {HEADLINE_NOISE}\n\n" + pass_table,
        ],
    )

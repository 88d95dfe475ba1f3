"""A judge you can calibrate: does a calibrated PASS hold on labels it never saw?

Scripted judges with known faults score scripted responses; scripted people label them.
Each response has a hidden quality `q` in [0, 1], a length and whether its key point
comes first; people pass it when `q >= PASS_LINE`, except for `LABEL_NOISE` of the
labels, flipped (people disagree with themselves too). Every judge says PASS at a score
of `JUDGE_PASS` or more, and each has one fault:

- `lenient`: scores `0.35 + 0.65 q` (plus a little noise, sd 0.03): it passes what
  people fail;
- `harsh`: scores `0.8 q - 0.05`: it fails what people pass (its PASS is safe, and
  costly);
- `noisy`: scores `q` plus wide noise (sd 0.15);
- `position-biased`: `0.75 q`, plus 0.25 when the key point comes first, whatever the
  quality;
- `length-biased`: `0.7 q`, plus up to 0.3 for long responses, whatever the quality.

For each fault a pool of `POOL` labelled responses is drawn once; each split draws a
random training set of `TRAIN` labels from it (and, in their own tables, 100 and 1000)
and holds the rest out. `evaluators.calibrate`
(alpha `ALPHA`, confidence 0.9) sees the training labels only; on the held-out labels the
calibrated judge (PASS at its threshold) and the judge alone (its own PASS) are each
measured: the false-PASS rate (the share of its passes people did not pass) and the
false-FAIL rate (the share of people's passes it did not pass). The figure is the share
of splits whose held-out false-PASS rate is at most `ALPHA`.

New tasks (`task-biased`): labels come in tasks, `PER_TASK` responses each, and the
judge's error depends on the task: it scores `q` plus an offset drawn once per task (sd
`TASK_SPREAD`), as a real judge is lenient on some kinds of task and harsh on others. Each split
calibrates on the labels of `TRAIN_TASKS` random tasks of `TASKS` and measures on the
other tasks' responses: a judge calibrated on some tasks and used on new ones. The same
labels are calibrated twice, with the folds dealt by task (the library's rule) and by
label (every label in one `group`, which deals the labels: the earlier rule), with the
same seed.

The cost in rounds: for each fault one calibrated judge (from the first split) and the
judge alone each run the library's loop (`refine`, `max_iterations=6`, no plateau stop)
on the same scripted tasks: a first draft of quality U(0.2, 0.6), each refinement adding
U(0.05, 0.2). The calibrated loop runs with `require_calibration=True`, so only a
calibrated PASS stops it. Reported: the mean rounds each loop ran, and the share of
loops that stopped on a PASS people would not give.
"""

from __future__ import annotations

import random
import statistics
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from benchmarks._harness import BenchResult, Figure, md_table
from langgraph_refine import Evaluation, refine
from langgraph_refine.evaluators import CalibratedEvaluator, CalibrationWarning, calibrate

PASS_LINE = 0.7
JUDGE_PASS = 0.7
LABEL_NOISE = 0.01
ALPHA = 0.1
POOL = 1600
TRAIN = 400
OTHER_TRAIN = (100, 1000)
SPLITS = 200
QUICK_SPLITS = 20
LOOP_TASKS = 60
QUICK_LOOP_TASKS = 10
TARGET_SHARE = 0.9
TASKS = 120
PER_TASK = 10
TRAIN_TASKS = 60
TASK_SPREAD = 0.1


def _attributes(text: str) -> tuple[float, float, bool]:
    """A scripted response's hidden quality, length (0-1) and whether its point comes first."""
    _, q, length, first, _ = text.split("|")
    return float(q), float(length), first == "1"


def response(rng: random.Random, quality: float) -> str:
    """A scripted response of this quality, with a random length and order (and a nonce)."""
    return f"resp|{quality:.4f}|{rng.random():.4f}|{int(rng.random() < 0.5)}|{rng.random():.6f}"


def person_passes(text: str) -> bool:
    """The people's verdict: quality at the line, flipped for a few labels."""
    quality, _, _ = _attributes(text)
    flipped = random.Random(f"person|{text}").random() < LABEL_NOISE
    return (quality >= PASS_LINE) != flipped


def _clip(value: float) -> float:
    return max(0.0, min(1.0, value))


FAULTS: dict[str, Callable[[float, float, bool, random.Random], float]] = {
    "lenient": lambda q, length, first, r: 0.35 + 0.65 * q + r.gauss(0, 0.03),
    "harsh": lambda q, length, first, r: 0.8 * q - 0.05 + r.gauss(0, 0.03),
    "noisy": lambda q, length, first, r: q + r.gauss(0, 0.15),
    "position-biased": lambda q, length, first, r: 0.75 * q + 0.25 * first + r.gauss(0, 0.03),
    "length-biased": lambda q, length, first, r: 0.7 * q + 0.3 * length + r.gauss(0, 0.03),
}


def judge_for(fault: str) -> Callable[[str, Any], Evaluation]:
    """The scripted judge with `fault`: the same text always gets the same score."""
    scored = FAULTS[fault]

    def judge(text: str, state: Any) -> Evaluation:
        quality, length, first = _attributes(text)
        score = _clip(scored(quality, length, first, random.Random(f"{fault}|{text}")))
        verdict = "PASS" if score >= JUDGE_PASS else "NEEDS_IMPROVEMENT"
        return Evaluation(score=score, verdict=verdict, feedback="improve it")

    judge.__name__ = f"{fault.replace('-', '_')}_judge"
    return judge


@dataclass
class SplitOutcome:
    """One split's held-out rates, the calibrated judge's and the judge's alone."""

    met: bool
    calibrated_fp: float
    calibrated_ff: float
    judge_fp: float
    judge_ff: float
    threshold: float | None


def _rates(passes: list[bool], people: list[bool]) -> tuple[float, float]:
    """False-PASS share of the passes; false-FAIL share of people's passes."""
    passed = [p for j, p in zip(passes, people, strict=True) if j]
    people_pass = [j for j, p in zip(passes, people, strict=True) if p]
    fp = (len(passed) - sum(passed)) / len(passed) if passed else 0.0
    ff = (len(people_pass) - sum(people_pass)) / len(people_pass) if people_pass else 0.0
    return fp, ff


def one_split(
    fault: str, pool: list[str], rng: random.Random, train_size: int
) -> tuple[SplitOutcome, CalibratedEvaluator]:
    judge = judge_for(fault)
    order = list(range(len(pool)))
    rng.shuffle(order)
    train = [pool[i] for i in order[:train_size]]
    held = [pool[i] for i in order[train_size:]]
    labels = [{"task": "t", "response": text, "passed": person_passes(text)} for text in train]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CalibrationWarning)  # counted as `met` instead
        calibrated = calibrate(
            judge, labels, alpha=ALPHA, confidence=0.9, seed=rng.randrange(10**6)
        )
    people = [person_passes(text) for text in held]
    judged = [judge(text, None) for text in held]
    threshold = calibrated.threshold
    calibrated_fp, calibrated_ff = _rates(
        [threshold is not None and e.score >= threshold for e in judged], people
    )
    judge_fp, judge_ff = _rates([e.verdict == "PASS" for e in judged], people)
    outcome = SplitOutcome(
        calibrated.report.met, calibrated_fp, calibrated_ff, judge_fp, judge_ff, threshold
    )
    return outcome, calibrated


def task_bias(task: str) -> float:
    """The task-biased judge's offset on one task, drawn once per task."""
    return random.Random(f"bias|{task}").gauss(0, TASK_SPREAD)


def task_biased_judge(text: str, state: Any) -> Evaluation:
    """A judge whose leniency depends on the task (see the module's docstring)."""
    quality, _, _ = _attributes(text)
    noise = random.Random(f"task-biased|{text}").gauss(0, 0.03)
    score = _clip(quality + task_bias(state["task"]) + noise)
    verdict = "PASS" if score >= JUDGE_PASS else "NEEDS_IMPROVEMENT"
    return Evaluation(score=score, verdict=verdict, feedback="improve it")


def new_task_split(pool: list[tuple[str, str]], rng: random.Random) -> dict[bool, SplitOutcome]:
    """Calibrate on some tasks, measure on the others: folds by task (True) and by label."""
    tasks = sorted({task for task, _ in pool})
    rng.shuffle(tasks)
    train = set(tasks[:TRAIN_TASKS])
    labels = [
        {"task": task, "response": text, "passed": person_passes(text)}
        for task, text in pool
        if task in train
    ]
    held = [(task, text) for task, text in pool if task not in train]
    people = [person_passes(text) for _, text in held]
    judged = [task_biased_judge(text, {"task": task}) for task, text in held]
    seed = rng.randrange(10**6)
    outcomes = {}
    for by_task in (True, False):
        # By label: one group for all, so the folds deal labels (the earlier rule).
        given = labels if by_task else [{**label, "group": "all"} for label in labels]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CalibrationWarning)
            calibrated = calibrate(task_biased_judge, given, alpha=ALPHA, seed=seed)
        threshold = calibrated.threshold
        fp, ff = _rates([threshold is not None and e.score >= threshold for e in judged], people)
        judge_fp, judge_ff = _rates([e.verdict == "PASS" for e in judged], people)
        outcomes[by_task] = SplitOutcome(
            calibrated.report.met, fp, ff, judge_fp, judge_ff, threshold
        )
    return outcomes


def new_tasks(splits: int) -> tuple[list[Figure], str]:
    """The figures and table of calibrating on some tasks and judging new ones."""
    rng = random.Random("new tasks")
    pool = [
        (f"task {t}", response(rng, rng.random())) for t in range(TASKS) for _ in range(PER_TASK)
    ]
    runs = [new_task_split(pool, rng) for _ in range(splits)]
    figures, rows = [], []
    for by_task, name in ((True, "folds by task"), (False, "folds by label")):
        outcomes = [run[by_task] for run in runs]
        met = [o for o in outcomes if o.met]
        within = _share([o.calibrated_fp <= ALPHA for o in outcomes])
        figures.append(
            Figure(
                f"task-biased: splits with new-task false-PASS <= {ALPHA}, {name}",
                within * 100,
                unit="%",
                target=f">= {TARGET_SHARE:.0%}" if by_task else "",
                passed=within >= TARGET_SHARE if by_task else None,
                spread=f"{splits} splits",
            )
        )
        rows.append(
            [
                *_row(f"task-biased, {name}", outcomes),
                f"{_share([o.calibrated_fp <= ALPHA for o in met]):.0%} of {len(met)}",
            ]
        )
    header = [
        "fault, folds",
        "alpha met",
        "threshold (median)",
        f"new-task false PASS <= {ALPHA}: calibrated",
        "judge alone",
        "false-PASS rate: calibrated (median)",
        "judge alone (median)",
        "false-FAIL rate: calibrated (median)",
        "judge alone (median)",
        f"<= {ALPHA} where alpha was met",
    ]
    table = (
        f"New tasks: calibrated on the labels of {TRAIN_TASKS} tasks ({PER_TASK} responses "
        f"each), measured on the other {TASKS - TRAIN_TASKS} tasks' responses:\n\n"
        + md_table(header, rows)
    )
    return figures, table


def loop_rounds(evaluator: Any, tasks: int, seed: int, **options: Any) -> tuple[float, float]:
    """Mean rounds the loop ran, and the share that stopped on a PASS people would not give."""
    rounds, false_stops = [], 0
    for task in range(tasks):
        rng = random.Random(f"{seed}|{task}")
        state = {"q": rng.uniform(0.2, 0.6)}

        def generate(_: Any, rng: random.Random = rng, state: dict[str, float] = state) -> str:
            text = response(rng, state["q"])
            state["q"] = min(1.0, state["q"] + rng.uniform(0.05, 0.2))
            return text

        result = refine(
            generate,
            f"task {task}",
            evaluator,
            max_iterations=6,
            patience=None,
            target_score=1.0,
            strategy="chain",
            **options,
        )
        rounds.append(result.iterations)
        false_stops += result.stop_reason == "passed" and not person_passes(result.value)
    return statistics.fmean(rounds), false_stops / tasks


def run(quick: bool = False) -> BenchResult:
    splits = QUICK_SPLITS if quick else SPLITS
    tasks = QUICK_LOOP_TASKS if quick else LOOP_TASKS
    figures: list[Figure] = []
    rows: list[list[Any]] = []
    other_rows: dict[int, list[list[Any]]] = {size: [] for size in OTHER_TRAIN}
    loop_rows: list[list[Any]] = []
    for number, fault in enumerate(FAULTS):
        rng = random.Random(number)
        pool = [response(rng, rng.random()) for _ in range(POOL)]
        outcomes = []
        first: CalibratedEvaluator | None = None  # the first split's that met alpha
        for _ in range(splits):
            outcome, calibrated = one_split(fault, pool, rng, TRAIN)
            outcomes.append(outcome)
            if first is None and calibrated.report.met:
                first = calibrated
        for size in OTHER_TRAIN:
            others = [one_split(fault, pool, rng, size)[0] for _ in range(splits)]
            other_rows[size].append(_row(fault, others))
        within = _share([o.calibrated_fp <= ALPHA for o in outcomes])
        judge_within = _share([o.judge_fp <= ALPHA for o in outcomes])
        judge_exceeds = statistics.median(o.judge_fp for o in outcomes) > ALPHA
        figures.append(
            Figure(
                f"{fault}: splits with held-out false-PASS <= {ALPHA}, calibrated "
                f"(judge alone {judge_within:.0%})",
                within * 100,
                unit="%",
                target=f">= {TARGET_SHARE:.0%}" if judge_exceeds else "",
                passed=within >= TARGET_SHARE if judge_exceeds else None,
                spread=f"{splits} splits",
            )
        )
        rows.append(_row(fault, outcomes))
        if first is None:  # no split met alpha: the last one's judge, which passes nothing
            first = calibrated
        calibrated_rounds, calibrated_false = loop_rounds(
            first, tasks, number, require_calibration=True
        )
        judge_rounds, judge_false = loop_rounds(judge_for(fault), tasks, number)
        loop_rows.append(
            [
                fault,
                _num(first.threshold),
                f"{judge_rounds:.2f}",
                f"{calibrated_rounds:.2f}",
                f"{calibrated_rounds - judge_rounds:+.2f}",
                f"{judge_false:.0%}",
                f"{calibrated_false:.0%}",
            ]
        )
    task_figures, task_table = new_tasks(splits)
    figures += task_figures
    header = [
        "fault",
        "alpha met",
        "threshold (median)",
        f"held-out false PASS <= {ALPHA}: calibrated",
        "judge alone",
        "false-PASS rate: calibrated (median)",
        "judge alone (median)",
        "false-FAIL rate: calibrated (median)",
        "judge alone (median)",
    ]
    notes = [
        (
            f"{POOL} labelled responses per fault; {splits} random splits of {TRAIN} training "
            f"labels (the rest, {POOL - TRAIN}, held out), and {splits} each of "
            f"{' and '.join(map(str, OTHER_TRAIN))}. alpha {ALPHA}, confidence 0.9 (the "
            f"defaults), people pass quality >= {PASS_LINE} with {LABEL_NOISE:.0%} of labels "
            f"flipped; every judge's own PASS is a score >= {JUDGE_PASS}. A split whose "
            "labels cannot show alpha (`alpha met` is the share that could) has no "
            "calibrated PASS at all: its false-PASS rate is 0 and its false-FAIL rate 1. "
            "The false-FAIL rate is the share of people's passes the judge did not pass."
        ),
        (
            "Done when: for every fault whose uncalibrated judge exceeds alpha (median "
            "held-out false-PASS rate over alpha), the calibrated judge's held-out "
            "false-PASS rate is at most alpha in at least 90% of the splits (the summary's "
            "figures). The harsh judge's own PASS is already safe; calibration lowers its "
            "threshold and cuts its false FAILs. Where a fault gives good and bad responses "
            "the same score (noise, position, length), the threshold must rise above the "
            "bias, and the price is false FAILs, paid in rounds (the last table: the "
            "calibrated loop runs with `require_calibration=True`, so only a calibrated "
            "PASS stops it)."
        ),
        (
            "A caveat the loop table shows: the guarantee is over all the judge's passes, "
            "and a loop stops at the first attempt over the threshold, the marginal one, "
            "where false passes gather; so a loop's share of false PASS stops can exceed "
            "alpha (the harsh judge's calibrated loop, whose threshold is lowest, stops "
            "sooner and more often on a PASS people would not give). The loop's other "
            "faults stay well under the judge alone's share."
        ),
        (
            "The floor is the label count: with no false pass at all, n passes bound the "
            "rate at 1 - 0.1^(1/n), so alpha 0.1 needs at least 22 labelled passes above "
            "the threshold in every training fold, and more when some of them are false. "
            "With 100 labels (about 30 people's passes) alpha is rarely shown, and the "
            "calibrated judge then passes nothing: safe, and all cost. The held-out "
            "guarantee holds at every label count; what more labels buy is fewer false "
            "FAILs; with 1000 the rule runs closer to alpha, and the share of splits "
            "within it is lower (still at least 90%)."
        ),
        (
            "New tasks: where the judge's error depends on the task, the labels of one task "
            "are not independent, and folds that split a task let the rule see part of "
            "each held-out task. Dealt by task, each fold's threshold is counted on tasks it "
            "never saw, so the held-out bound speaks for new tasks. On this synthetic set "
            "the two rules choose nearly the same thresholds, and both keep the new-task "
            "false-PASS rate within alpha in the goal's share of splits: the rule's "
            "tightening and the strictest-of-folds threshold already leave room for a task "
            "offset of this size. The grouping is what makes the bound a promise about new "
            "tasks rather than about new responses to the tasks labelled. The last column "
            "is that share among the splits that met alpha."
        ),
    ]
    loop_header = [
        "fault",
        "threshold",
        "rounds, judge alone",
        "rounds, calibrated",
        "extra rounds",
        "false PASS stops, judge alone",
        "calibrated",
    ]
    return BenchResult(
        name="calibration",
        title="calibrated judges: held-out false-PASS rate against alpha, and its cost in rounds",
        figures=figures,
        notes=notes,
        tables=[
            f"Training on {TRAIN} labels:\n\n" + md_table(header, rows),
            *(
                f"Training on {size} labels:\n\n" + md_table(header, other_rows[size])
                for size in OTHER_TRAIN
            ),
            task_table,
            f"The loop (`refine`, {tasks} scripted tasks per fault, max 6 refinements):\n\n"
            + md_table(loop_header, loop_rows),
        ],
    )


def _row(fault: str, outcomes: list[SplitOutcome]) -> list[Any]:
    thresholds = [o.threshold for o in outcomes if o.threshold is not None]
    return [
        fault,
        f"{_share([o.met for o in outcomes]):.0%}",
        _num(statistics.median(thresholds) if thresholds else None),
        f"{_share([o.calibrated_fp <= ALPHA for o in outcomes]):.0%}",
        f"{_share([o.judge_fp <= ALPHA for o in outcomes]):.0%}",
        f"{statistics.median(o.calibrated_fp for o in outcomes):.3f}",
        f"{statistics.median(o.judge_fp for o in outcomes):.3f}",
        f"{statistics.median(o.calibrated_ff for o in outcomes):.3f}",
        f"{statistics.median(o.judge_ff for o in outcomes):.3f}",
    ]


def _share(flags: list[bool]) -> float:
    return sum(flags) / len(flags) if flags else 0.0


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"

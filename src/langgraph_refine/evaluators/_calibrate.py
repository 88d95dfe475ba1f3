"""A judge calibrated against people's labels: its PASS means what a person would pass.

`calibrate(judge, labels)` judges every labelled response (through the judge's own
`evaluate` / `aevaluate`, counted by a budget meter, each distinct response once),
measures how the judge agrees with the people, and chooses the score threshold a PASS
needs (see `_agreement` for the rule: the false-PASS rate's upper confidence bound, on
held-out folds, at most `alpha`). The `CalibratedEvaluator` it returns judges as the
judge does, with `verdict` PASS exactly when `score >= threshold`; every evaluation
carries the calibration in `details["calibration"]`, which is how the loop's result and
`require_calibration` know the PASS was calibrated.
"""

from __future__ import annotations

import asyncio
import json
import os
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from langgraph_refine._calls._budget import Budget, BudgetMeter, BudgetStop, metered
from langgraph_refine._decisions._regressions import criteria_verdicts, normalised
from langgraph_refine._state import Evaluation, Judgment, Usage
from langgraph_refine.evaluators._agreement import (
    Agreement,
    CurvePoint,
    agreement,
    cross_validated,
    curve,
    upper_bound,
)
from langgraph_refine.evaluators._base import (
    BaseEvaluator,
    EvaluatorLike,
    ajudge_once,
    judge_once,
)
from langgraph_refine.evaluators._combine import as_evaluator
from langgraph_refine.evaluators._labels import Label, LabelsLike, read_labels

FILE_FORMAT = "langgraph-refine calibration"
"""The `format` of a calibration file (`CalibratedEvaluator.save`)."""

FILE_VERSION = 1


class CalibrationWarning(UserWarning):
    """No threshold meets `alpha` with these labels: the calibrated judge never passes."""


@dataclass(frozen=True)
class CalibrationReport:
    """How the judge agrees with people, and the threshold its PASS needs.

    The agreement fields are the calibrated judge's (PASS when `score >= threshold`) on
    every label; `judge` holds the same for the judge's own verdicts (PASS, or without a
    verdict a score of 1.0), for comparison.

    Attributes:
        n: Labels judged (unjudged ones are left out; see `unjudged`).
        accuracy: Share of labels where the calibrated judge and the person agree.
        kappa: Cohen's kappa of that agreement (chance-corrected).
        false_pass: Share of the calibrated judge's passes the person did not pass.
        false_fail: Share of its non-passes the person passed.
        threshold: The score a PASS needs; None when `met` is False (no PASS at all).
        bound: The upper confidence bound of the false-PASS rate on held-out folds.
        alpha: The false-PASS rate allowed.
        confidence: The bound's confidence.
        met: Whether a threshold met `alpha` with these labels.
        criteria: Per criterion (when labels have `criteria` and the judge reports
            them, as `checklist` does): `{"n", "accuracy", "kappa"}`.
        judge: The uncalibrated judge's agreement: `accuracy`, `kappa`, `false_pass`,
            `false_fail`.
        unjudged: Labels the judge could not judge (or the budget did not reach).
        usage: The model calls, tokens and cost of judging the labels.
        curve: The false-PASS rate and its (in-sample) bound at each threshold.
        folds: The folds of the held-out check.
        candidate: The threshold the rule chose on all labels, even when the held-out
            bound refused it.
        rule_alpha: The level the threshold rule was run at (at most `alpha`: tightened
            until its held-out bound met `alpha`); None when none did.
    """

    n: int
    accuracy: float
    kappa: float
    false_pass: float
    false_fail: float
    threshold: float | None
    bound: float
    alpha: float
    confidence: float
    met: bool
    criteria: dict[str, dict[str, float]] = field(default_factory=dict)
    judge: dict[str, float] = field(default_factory=dict)
    unjudged: int = 0
    usage: Usage = field(default_factory=Usage)
    curve: tuple[CurvePoint, ...] = ()
    folds: int = 0
    candidate: float | None = None
    rule_alpha: float | None = None

    def summary(self) -> dict[str, Any]:
        """A result's `metadata["calibration"]`: n, kappa, alpha, threshold, bound, met."""
        return {
            "n": self.n,
            "kappa": round(self.kappa, 4),
            "alpha": self.alpha,
            "threshold": self.threshold,
            "bound": round(self.bound, 4),
            "met": self.met,
        }

    def to_dict(self) -> dict[str, Any]:
        """The report as plain JSON values."""
        data = asdict(self)
        data["usage"] = self.usage.model_dump(mode="json")
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CalibrationReport:
        """The report `to_dict` wrote.

        Raises:
            ValueError: If a field is missing or mistyped.
        """
        try:
            values = dict(data)
            values["usage"] = Usage(**(values.get("usage") or {}))
            values["curve"] = tuple(CurvePoint(**point) for point in values.get("curve") or ())
            return cls(**values)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"not a calibration report: {exc}") from None


class CalibratedEvaluator(BaseEvaluator):
    """A judge whose PASS is calibrated: `verdict` PASS exactly when `score >= threshold`.

    Its evaluations are the judge's (score, feedback, details), with the verdict set by
    the threshold: PASS at or above it, else the judge's FAIL, else NEEDS_IMPROVEMENT.
    `details["calibration"]` holds `report.summary()`. Built by `calibrate`, or loaded
    from a file `save` wrote (`CalibratedEvaluator.load(path, judge)`).

    Args:
        judge: The judge that was calibrated (any evaluator form).
        report: Its calibration.
    """

    def __init__(self, judge: EvaluatorLike, report: CalibrationReport) -> None:
        self.judge = as_evaluator(judge, option="judge")
        self.report = report
        self.name = self.judge.name
        self.calls_model = self.judge.calls_model
        self.is_async = self.judge.is_async
        self.inline = self.judge.inline

    @property
    def threshold(self) -> float | None:
        """The score a PASS needs (None: no PASS, the labels did not meet `alpha`)."""
        return self.report.threshold

    def evaluate(self, response: str, state: Mapping[str, Any]) -> Evaluation:
        return self.calibrated(self.judge.evaluate(response, state))

    async def aevaluate(self, response: str, state: Mapping[str, Any]) -> Evaluation:
        return self.calibrated(await self.judge.aevaluate(response, state))

    def calibrated(self, evaluation: Evaluation) -> Evaluation:
        """The judge's evaluation with the calibrated verdict and the calibration's summary."""
        threshold = self.threshold
        passed = threshold is not None and evaluation.score >= threshold
        verdict = (
            "PASS" if passed else "FAIL" if evaluation.verdict == "FAIL" else "NEEDS_IMPROVEMENT"
        )
        feedback = evaluation.feedback
        if evaluation.verdict == "PASS" and not passed:
            # The judge was satisfied, people would not have been: say what is missing.
            needed = "no score is enough" if threshold is None else f"a score of {threshold:.2f}"
            feedback = (
                f"{feedback.strip()}\n(Not passed yet: against people's verdicts this judge's "
                f"PASS needs {needed}; this scored {evaluation.score:.2f}. Make it clearly "
                "better.)"
            ).strip()
        details = {**evaluation.details, "calibration": self.report.summary()}
        return evaluation.model_copy(
            update={"verdict": verdict, "feedback": feedback, "details": details}
        )

    def save(self, path: str | os.PathLike[str], *, judge_spec: str | None = None) -> None:
        """Write the calibration to a JSON file (`load` reads it; the CLI's `--calibration`).

        Args:
            path: The file.
            judge_spec: What the judge was (the command line's `-e` specs), kept so a run
                with another judge is refused.
        """
        data = {
            "format": FILE_FORMAT,
            "version": FILE_VERSION,
            "judge": judge_spec or self.name,
            "report": self.report.to_dict(),
        }
        Path(path).write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: str | os.PathLike[str], judge: EvaluatorLike) -> CalibratedEvaluator:
        """The calibrated `judge`, from a file `save` wrote.

        Raises:
            ValueError: If the file is missing, not JSON or not a calibration (naming it).
        """
        return cls(judge, read_calibration(path)[1])


def read_calibration(path: str | os.PathLike[str]) -> tuple[str, CalibrationReport]:
    """The judge's description and the report a calibration file holds.

    Raises:
        ValueError: If the file is missing, not JSON or not a calibration (naming it).
    """
    where = str(path)
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(f"calibration file {where!r} does not exist") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"calibration file {where!r} is not JSON: {exc}") from None
    if not isinstance(data, dict) or data.get("format") != FILE_FORMAT:
        raise ValueError(
            f"{where!r} is not a calibration file (no 'format': {FILE_FORMAT!r}); write one "
            "with evaluators.calibrate(...).save(path) or langgraph-refine calibrate --out"
        )
    try:
        report = CalibrationReport.from_dict(data.get("report") or {})
    except ValueError as exc:
        raise ValueError(f"calibration file {where!r}: {exc}") from None
    return str(data.get("judge") or ""), report


def calibrate(
    judge: EvaluatorLike,
    labels: LabelsLike,
    *,
    alpha: float = 0.1,
    confidence: float = 0.9,
    folds: int = 5,
    budget: Budget | None = None,
    seed: int = 0,
) -> CalibratedEvaluator:
    """Calibrate `judge` against people's labels: its PASS then means what they would pass.

    Judges every labelled response (the judge's `evaluate`; an async judge on
    `asyncio.run`, use `acalibrate` inside a running event loop), measures agreement,
    and chooses the lowest score threshold whose false-PASS rate (a judge PASS a person
    would not pass) has an upper confidence bound (Clopper-Pearson, at `confidence`), on
    held-out folds, of at most `alpha`: the rule is chosen on each fold's training part
    and counted on the fold it never saw, tightened until that held-out bound meets
    `alpha`, and the PASS needs the strictest of the thresholds it chose on all labels
    and on each fold. Too few labels to show that is said plainly: `report.met` is
    False, a `CalibrationWarning` is issued, and the calibrated judge never passes.

    Args:
        judge: Any evaluator form (`llm_judge`, `checklist`, a callable, ...).
        labels: A JSONL file's path, or labels (dicts or `Label`s); see `Label`.
        alpha: The false-PASS rate allowed, in (0, 1).
        confidence: The confidence of the bound, in (0, 1).
        folds: Folds of the held-out check (>= 2).
        budget: Limits on the judge's model calls (labels past it stay unjudged).
        seed: The folds' shuffle.

    Returns:
        The calibrated judge; `.report` holds the agreement and the threshold.

    Raises:
        ValueError: For no labels, a malformed label, or `alpha` / `confidence` /
            `folds` out of range.
        TypeError: For an async judge (use `acalibrate`).

    Example:
        >>> from langgraph_refine import evaluators
        >>> labels = [{"task": "t", "response": "good " * i, "passed": i > 30} for i in range(60)]
        >>> judge = lambda response, state: min(1.0, len(response.split()) / 40)
        >>> calibrated = evaluators.calibrate(judge, labels, alpha=0.1)
        >>> calibrated.report.met, calibrated.threshold  # 32 words; people pass 31 and more
        (True, 0.8)
    """
    evaluator, read = _checked(judge, labels, alpha, confidence, folds)
    if evaluator.is_async:  # the sync path stays sync, as `refine` does
        raise TypeError("the judge is async; calibrate it with: await acalibrate(judge, labels)")
    meter = BudgetMeter(budget, Usage(), what="calibration")
    judged: dict[tuple[str, str], Judgment | None] = {}
    with metered(meter):
        for label in read:
            key = (label.task, label.response)
            if key not in judged:
                judged[key] = _judge(meter, evaluator, *key)
    return _calibrated(evaluator, read, judged, meter.total(), alpha, confidence, folds, seed)


async def acalibrate(
    judge: EvaluatorLike,
    labels: LabelsLike,
    *,
    alpha: float = 0.1,
    confidence: float = 0.9,
    folds: int = 5,
    budget: Budget | None = None,
    seed: int = 0,
    concurrency: int = 4,
) -> CalibratedEvaluator:
    """Async twin of `calibrate`: the judge's `aevaluate`, `concurrency` labels at a time."""
    evaluator, read = _checked(judge, labels, alpha, confidence, folds)
    meter = BudgetMeter(budget, Usage(), what="calibration")
    gate = asyncio.Semaphore(max(1, concurrency))
    keys = list(dict.fromkeys((label.task, label.response) for label in read))

    async def one(task: str, response: str) -> Judgment | None:
        async with gate:
            return await _ajudge(meter, evaluator, task, response)

    with metered(meter):
        results = await asyncio.gather(*(one(*key) for key in keys))
    judged = dict(zip(keys, results, strict=True))
    return _calibrated(evaluator, read, judged, meter.total(), alpha, confidence, folds, seed)


def _checked(
    judge: EvaluatorLike, labels: LabelsLike, alpha: float, confidence: float, folds: int
) -> tuple[BaseEvaluator, list[Label]]:
    for name, value in (("alpha", alpha), ("confidence", confidence)):
        if not isinstance(value, int | float) or isinstance(value, bool) or not 0 < value < 1:
            raise ValueError(
                f"{name} must be a number strictly between 0 and 1, got {value!r} "
                "(e.g. alpha=0.1: at most 1 judge PASS in 10 that a person would not pass)"
            )
    if not isinstance(folds, int) or isinstance(folds, bool) or folds < 2:
        raise ValueError(f"folds must be an integer >= 2, got {folds!r}")
    if isinstance(judge, CalibratedEvaluator):
        judge = judge.judge  # recalibrating: the judge underneath, not its old threshold
    return as_evaluator(judge, option="judge"), read_labels(labels)


def _judge(meter: BudgetMeter, judge: BaseEvaluator, task: str, response: str) -> Judgment | None:
    """The judge's judgment of one labelled response; None when the budget refused it."""
    try:
        with meter.invocation(model_call=judge.calls_model) as done:
            return done(judge_once(judge, response, {"task": task}))
    except BudgetStop:
        return None


async def _ajudge(
    meter: BudgetMeter, judge: BaseEvaluator, task: str, response: str
) -> Judgment | None:
    """Async twin of `_judge`."""
    try:
        with meter.invocation(model_call=judge.calls_model) as done:
            return done(await ajudge_once(judge, response, {"task": task}))
    except BudgetStop:
        return None


def _calibrated(
    judge: BaseEvaluator,
    labels: Sequence[Label],
    judged: Mapping[tuple[str, str], Judgment | None],
    usage: Usage,
    alpha: float,
    confidence: float,
    folds: int,
    seed: int,
) -> CalibratedEvaluator:
    pairs = [
        (label, evaluation)
        for label in labels
        if isinstance(evaluation := judged.get((label.task, label.response)), Evaluation)
    ]
    unjudged = len(labels) - len(pairs)
    scores = [evaluation.score for _, evaluation in pairs]
    person = [label.passed for label, _ in pairs]
    choice = cross_validated(
        scores, person, alpha=alpha, confidence=confidence, folds=folds, seed=seed
    )
    threshold, met, candidate = choice.threshold, choice.threshold is not None, choice.candidate
    calibrated = agreement([threshold is not None and s >= threshold for s in scores], person)
    own = agreement([_judge_passed(evaluation) for _, evaluation in pairs], person)
    report = CalibrationReport(
        n=len(pairs),
        accuracy=calibrated.accuracy,
        kappa=calibrated.kappa,
        false_pass=calibrated.false_pass,
        false_fail=calibrated.false_fail,
        threshold=threshold,
        bound=choice.bound if pairs else upper_bound(0, 0, confidence),
        alpha=alpha,
        confidence=confidence,
        met=met,
        criteria=_per_criterion(pairs),
        judge=_rates(own),
        unjudged=unjudged,
        usage=usage,
        curve=tuple(curve(scores, person, confidence)) if pairs else (),
        folds=folds,
        candidate=candidate,
        rule_alpha=choice.level,
    )
    if not met:
        warnings.warn(_unmet(report), CalibrationWarning, stacklevel=3)
    return CalibratedEvaluator(judge, report)


def _unmet(report: CalibrationReport) -> str:
    return (
        f"no score threshold keeps this judge's false-PASS rate at or under alpha={report.alpha} "
        f"with {report.confidence:.0%} confidence on held-out labels (n={report.n}, held-out "
        f"bound {report.bound:.2f}): the calibrated judge will not pass anything. Add labels "
        "(more of the responses the judge passes), or allow a larger alpha"
    )


def _judge_passed(evaluation: Evaluation) -> bool:
    """The judge's own PASS: its verdict, or without one a full score (as `cascade` reads it)."""
    if evaluation.verdict is not None:
        return evaluation.verdict == "PASS"
    return evaluation.score >= 1.0


def _rates(a: Agreement) -> dict[str, float]:
    return {
        "accuracy": a.accuracy,
        "kappa": a.kappa,
        "false_pass": a.false_pass,
        "false_fail": a.false_fail,
    }


def _per_criterion(pairs: Sequence[tuple[Label, Evaluation]]) -> dict[str, dict[str, float]]:
    """Agreement per criterion, where the label and the judge's details both name it."""
    verdicts: dict[str, tuple[list[bool], list[bool]]] = {}
    for label, evaluation in pairs:
        if not label.criteria:
            continue
        judged = criteria_verdicts(evaluation)
        for name, passed in label.criteria.items():
            if normalised(name) in judged:
                judge_side, person_side = verdicts.setdefault(name, ([], []))
                judge_side.append(judged[normalised(name)][1])
                person_side.append(passed)
    out = {}
    for name, (judge_side, person_side) in verdicts.items():
        a = agreement(judge_side, person_side)
        out[name] = {"n": a.n, "accuracy": a.accuracy, "kappa": a.kappa}
    return out

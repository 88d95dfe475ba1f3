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
import contextvars
import json
import math
import os
import tempfile
import warnings
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from langgraph_refine._calls._budget import Budget, BudgetMeter, BudgetStop, metered
from langgraph_refine._decisions._regressions import criteria_verdicts, normalised
from langgraph_refine._errors import CalibrationMismatchError
from langgraph_refine._state import Evaluation, Judgment, NoJudgment, Usage
from langgraph_refine.evaluators._agreement import (
    Agreement,
    Choice,
    CurvePoint,
    agreement,
    best_kappa,
    cross_validated,
    curve,
    upper_bound,
)
from langgraph_refine.evaluators._base import (
    BaseEvaluator,
    EvaluatorLike,
    ajudge_once,
    judge_once,
    request_criteria,
)
from langgraph_refine.evaluators._combine import as_evaluator
from langgraph_refine.evaluators._identity import judge_identity, mismatches
from langgraph_refine.evaluators._labels import Label, LabelsLike, read_labels

FILE_FORMAT = "langgraph-refine calibration"
"""The `format` of a calibration file (`CalibratedEvaluator.save`)."""

FILE_VERSION = 2
"""Version 2 records the judge's identity (`_identity`); version 1 files are refused."""

SEPARATES = 0.1
"""The best kappa under which a judge is said not to tell passes from fails."""


class CalibrationWarning(UserWarning):
    """A calibration that passes nothing: no threshold met `alpha` with these labels.

    Issued by `calibrate` (with what was measured and the advice it points to), and once
    when a loop is built with such a calibration.
    """


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
        best_threshold: The threshold `bound` was reached at: the one chosen when
            `met`, else the one that came closest.
        bound_held_out: Whether `bound` was counted on held-out folds; False when not
            even the labels the rule chose from met `alpha` (then `bound` is the lowest
            in-sample bound of any threshold, as the plot draws it).
        tasks: Distinct tasks (or `group`s) among the labels judged.
        grouped: Whether the folds were dealt by task (at least two tasks): the bound
            is then counted on tasks the threshold was not chosen on.
        best_kappa: The highest kappa any threshold gives the judge's scores: how well
            it separates what people pass from what they do not.
        distinct_scores: How many different scores the judge gave.
        diagnosis: `met`, `one_verdict` (the labels are all passes or all fails),
            `no_separation` (the judge does not tell passes from fails),
            `false_passes` (at its best threshold too many passes are false: more labels
            will not help), `too_few_labels`, or `no_labels` (none judged).
        advice: What the diagnosis points to ("" when met).
        unjudged_labels: Each label left unjudged: `label` (its number, from 1),
            `task` (its start) and `reason`.
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
    best_threshold: float | None = None
    bound_held_out: bool = True
    tasks: int = 0
    grouped: bool = False
    best_kappa: float = 0.0
    distinct_scores: int = 0
    diagnosis: str = ""
    advice: str = ""
    unjudged_labels: list[dict[str, Any]] = field(default_factory=list)

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

    A calibration belongs to its judge: `identity` records what the judge is (checks,
    model, criteria, prompt; see `judge_identity`). Given one (a loaded file), the judge
    must be that judge, and every evaluation checks that the request adds the criteria
    it was calibrated with, before any call.

    Args:
        judge: The judge that was calibrated (any evaluator form).
        report: Its calibration.
        identity: What the calibrated judge was; None: `judge` itself, as given.
        warn: Warn once when a loop is built with a calibration that passes nothing
            (False: the caller says it in its own words, as the command line does).

    Raises:
        CalibrationMismatchError: If `judge` is not the judge `identity` describes.
    """

    def __init__(
        self,
        judge: EvaluatorLike,
        report: CalibrationReport,
        *,
        identity: Mapping[str, Any] | None = None,
        warn: bool = True,
    ) -> None:
        self.judge = as_evaluator(judge, option="judge")
        self.warn = warn
        self.report = report
        self.name = self.judge.name
        self.calls_model = self.judge.calls_model
        self.is_async = self.judge.is_async
        self.inline = self.judge.inline
        own = judge_identity(self.judge)
        if identity is None:
            identity = own
        else:
            # The criteria a request adds are checked at each evaluation (`check`).
            added = list(identity.get("criteria") or [])[len(own["criteria"]) :]
            refuse(identity, judge_identity(self.judge, criteria=added), what="this judge")
        self.identity: dict[str, Any] = dict(identity)

    @property
    def threshold(self) -> float | None:
        """The score a PASS needs (None: no PASS, the labels did not meet `alpha`)."""
        return self.report.threshold

    @property
    def can_pass(self) -> bool:
        """Whether this calibration can pass anything (False when `alpha` was not met)."""
        return self.report.met and self.threshold is not None

    def check(self, state: Mapping[str, Any]) -> None:
        """Refuse a request whose criteria are not the ones the judge was calibrated with.

        Raises:
            CalibrationMismatchError: Naming both sets of criteria.
        """
        own = judge_identity(self.judge)["criteria"]
        given = own + request_criteria(state)
        made = list(self.identity.get("criteria") or [])
        if given != made:
            raise CalibrationMismatchError(
                f"this calibration was made for a judge with criteria {made!r}, but this "
                f"request judges with {given!r}: a calibration holds only for its own judge; "
                "run with the criteria it was calibrated with, or calibrate the judge with "
                "these (calibrate(judge, labels, criteria=...), or calibrate --criterion)"
            )

    def evaluate(self, response: str, state: Mapping[str, Any]) -> Evaluation:
        self.check(state)
        return self.calibrated(self.judge.evaluate(response, state))

    async def aevaluate(self, response: str, state: Mapping[str, Any]) -> Evaluation:
        self.check(state)
        return self.calibrated(await self.judge.aevaluate(response, state))

    def calibrated(self, evaluation: Evaluation) -> Evaluation:
        """The judge's evaluation with the calibrated verdict and the calibration's summary.

        A judge PASS under the threshold is told to improve in the judge's own words; the
        generator never sees the threshold or anything else of the calibration's.
        """
        threshold = self.threshold
        passed = self.can_pass and threshold is not None and evaluation.score >= threshold
        verdict = (
            "PASS" if passed else "FAIL" if evaluation.verdict == "FAIL" else "NEEDS_IMPROVEMENT"
        )
        feedback = evaluation.feedback
        if evaluation.verdict == "PASS" and not passed:
            feedback = f"{feedback.strip()}\n(Not passed yet: make it clearly better.)".strip()
        details = {**evaluation.details, "calibration": self.report.summary()}
        return evaluation.model_copy(
            update={"verdict": verdict, "feedback": feedback, "details": details}
        )

    def save(self, path: str | os.PathLike[str], *, judge_spec: str | None = None) -> None:
        """Write the calibration to a JSON file, whole (`load` reads it; `--calibration`).

        Args:
            path: The file (written beside, then moved in place: never half written).
            judge_spec: What the judge was on the command line (its `-e` specs), kept so
                a run with other checks is refused.
        """
        identity = {**self.identity, "spec": judge_spec or self.identity.get("spec")}
        data = {
            "format": FILE_FORMAT,
            "version": FILE_VERSION,
            "judge": identity,
            "report": self.report.to_dict(),
        }
        write_whole(Path(path), json.dumps(data, indent=2) + "\n")

    @classmethod
    def load(cls, path: str | os.PathLike[str], judge: EvaluatorLike) -> CalibratedEvaluator:
        """The calibrated `judge`, from a file `save` wrote.

        Raises:
            ValueError: If the file is missing, not JSON or not a calibration (naming it).
            CalibrationMismatchError: If `judge` is not the judge the file was made for
                (another model, other criteria or checks, another prompt).
        """
        identity, report = read_calibration(path)
        try:
            return cls(judge, report, identity=identity)
        except CalibrationMismatchError as exc:
            raise CalibrationMismatchError(f"calibration file {str(path)!r}: {exc}") from None


def passes_nothing(evaluator: Any) -> bool:
    """Whether `evaluator` is a calibrated judge whose calibration can pass nothing."""
    return isinstance(evaluator, CalibratedEvaluator) and not evaluator.can_pass


def nothing_passes_text(evaluator: CalibratedEvaluator, *, required: bool) -> str:
    """What a loop built with a calibration that passes nothing is told, once."""
    report = evaluator.report
    measured = (
        f"its labels did not meet alpha {report.alpha} (n={report.n}, best false-PASS bound "
        f"{report.bound:.2f})"
    )
    if required:
        return (
            f"require_calibration with a calibration that can pass nothing: {measured}, so no "
            "PASS could ever stop the loop and every round would be paid for nothing; the "
            f"loop refuses to start. {report.advice}"
        ).strip()
    return (
        f"this calibrated judge passes nothing: {measured}; its PASS is untrusted and "
        f"a loop stops only at its other limits or its target score. {report.advice}"
    ).strip()


def refuse_to_start(
    evaluator: Any, *, require_calibration: bool, state: Mapping[str, Any] | None = None
) -> None:
    """Refuse a loop its calibration cannot serve, before any model call.

    Args:
        evaluator: The loop's evaluator.
        require_calibration: The run's option.
        state: What the run's judge will see (its `criteria`), checked against the
            criteria the judge was calibrated with.

    Raises:
        ValueError: When `require_calibration` would run without any possible PASS,
            saying what the calibration measured.
        CalibrationMismatchError: When the run's criteria are not the calibration's.
    """
    if not isinstance(evaluator, CalibratedEvaluator):
        return
    if state is not None:
        evaluator.check(state)
    if require_calibration and not evaluator.can_pass:
        raise ValueError(nothing_passes_text(evaluator, required=True))


def warn_at_build(evaluator: Any, *, require_calibration: bool) -> None:
    """Say once, when a loop is built, that its calibration can pass nothing."""
    if passes_nothing(evaluator) and evaluator.warn:
        text = nothing_passes_text(evaluator, required=require_calibration)
        warnings.warn(text, CalibrationWarning, stacklevel=4)


def refuse(recorded: Mapping[str, Any], current: Mapping[str, Any], *, what: str) -> None:
    """Raise when `current` is not the judge a calibration `recorded` (`mismatches`).

    Raises:
        CalibrationMismatchError: Naming each difference and how to fix it.
    """
    differences = mismatches(recorded, current)
    if differences:
        raise CalibrationMismatchError(
            f"this calibration was made for another judge than {what} ("
            + "; ".join(differences)
            + "): a calibration holds only for its own judge; use the judge it was made "
            "for, or calibrate this one on the labels"
        )


def write_whole(path: Path, text: str) -> None:
    """Write `text` to a file beside `path`, then move it in place (never half written)."""
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent or None)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def read_calibration(path: str | os.PathLike[str]) -> tuple[dict[str, Any], CalibrationReport]:
    """The judge's identity (`judge_identity`) and the report a calibration file holds.

    Raises:
        ValueError: If the file is missing, not JSON, not a calibration (naming it) or
            made before calibrations recorded their judge.
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
    identity = data.get("judge")
    if data.get("version") != FILE_VERSION or not isinstance(identity, dict):
        raise ValueError(
            f"calibration file {where!r} is version {data.get('version')!r}, which does not "
            f"record its judge's model, criteria and prompt (version {FILE_VERSION} does): "
            "calibrate the judge again to write one"
        )
    try:
        report = CalibrationReport.from_dict(data.get("report") or {})
    except ValueError as exc:
        raise ValueError(f"calibration file {where!r}: {exc}") from None
    return identity, report


def calibrate(
    judge: EvaluatorLike,
    labels: LabelsLike,
    *,
    alpha: float = 0.1,
    confidence: float = 0.9,
    folds: int = 5,
    budget: Budget | None = None,
    seed: int = 0,
    criteria: str | Sequence[str] | None = None,
    concurrency: int = 1,
) -> CalibratedEvaluator:
    """Calibrate `judge` against people's labels: its PASS then means what they would pass.

    Judges every labelled response (the judge's `evaluate`; an async judge on
    `asyncio.run`, use `acalibrate` inside a running event loop), measures agreement,
    and chooses the lowest score threshold whose false-PASS rate (a judge PASS a person
    would not pass) has an upper confidence bound (Clopper-Pearson, at `confidence`), on
    held-out folds, of at most `alpha`: the rule is chosen on each fold's training part
    and counted on the fold it never saw, tightened until that held-out bound meets
    `alpha`, and the PASS needs the strictest of the thresholds it chose on all labels
    and on each fold. The folds are dealt by task (a label's `group`, else its `task`):
    the labels of one task are never on both sides, so the bound is what the judge
    meets on tasks it was not calibrated on (with labels of one task only, the labels
    are dealt, and the bound holds for new responses to that task).

    When the labels cannot show `alpha` the report says what was measured and what it
    points to (`report.diagnosis`, `report.advice`, and a `CalibrationWarning`): a judge
    that does not tell passes from fails, too few labels (and about how many more), or
    labels of one verdict (refused: a false-PASS rate needs both); `report.met` is
    False, `report.bound` the best bound reached at `report.best_threshold`, and the
    calibrated judge never passes.

    Args:
        judge: Any evaluator form (`llm_judge`, `checklist`, a callable, ...).
        labels: A JSONL file's path, or labels (dicts or `Label`s); see `Label`.
        alpha: The false-PASS rate allowed, in (0, 1).
        confidence: The confidence of the bound, in (0, 1).
        folds: Folds of the held-out check (>= 2).
        budget: Limits on the judge's model calls (labels past it stay unjudged).
        seed: The folds' shuffle.
        criteria: Criteria every judgment adds (a run's `criteria`): the calibration
            then holds for runs with these criteria, and only those.
        concurrency: Labels judged at a time (>= 1; in threads, as `panel` does).

    Returns:
        The calibrated judge; `.report` holds the agreement and the threshold,
        `.identity` what the judge was.

    Raises:
        ValueError: For no labels, a malformed label, or `alpha` / `confidence` /
            `folds` / `concurrency` out of range.
        TypeError: For an async judge (use `acalibrate`).

    Example:
        >>> from langgraph_refine import evaluators
        >>> labels = [{"task": "t", "response": "good " * i, "passed": i > 30} for i in range(60)]
        >>> judge = lambda response, state: min(1.0, len(response.split()) / 40)
        >>> calibrated = evaluators.calibrate(judge, labels, alpha=0.1)
        >>> calibrated.report.met, calibrated.threshold  # 32 words; people pass 31 and more
        (True, 0.8)
    """
    evaluator, read, added = _checked(judge, labels, alpha, confidence, folds, criteria)
    _check_concurrency(concurrency)
    if evaluator.is_async:  # the sync path stays sync, as `refine` does
        raise TypeError("the judge is async; calibrate it with: await acalibrate(judge, labels)")
    meter = BudgetMeter(budget, Usage(), what="calibration")
    keys = _distinct(read)
    with metered(meter):
        if concurrency == 1:
            results = [_judge(meter, evaluator, task, response, added) for task, response in keys]
        else:
            # Each label in a thread with a copy of this context: the meter sees every call.
            with ThreadPoolExecutor(max_workers=concurrency) as pool:
                futures = [
                    pool.submit(
                        contextvars.copy_context().run,
                        _judge,
                        meter,
                        evaluator,
                        task,
                        answer,
                        added,
                    )
                    for task, answer in keys
                ]
                results = [future.result() for future in futures]
    judged = dict(zip(keys, results, strict=True))
    return _calibrated(
        evaluator, read, judged, meter.total(), alpha, confidence, folds, seed, added
    )


async def acalibrate(
    judge: EvaluatorLike,
    labels: LabelsLike,
    *,
    alpha: float = 0.1,
    confidence: float = 0.9,
    folds: int = 5,
    budget: Budget | None = None,
    seed: int = 0,
    criteria: str | Sequence[str] | None = None,
    concurrency: int = 4,
) -> CalibratedEvaluator:
    """Async twin of `calibrate`: the judge's `aevaluate`, `concurrency` labels at a time."""
    evaluator, read, added = _checked(judge, labels, alpha, confidence, folds, criteria)
    _check_concurrency(concurrency)
    meter = BudgetMeter(budget, Usage(), what="calibration")
    gate = asyncio.Semaphore(concurrency)
    keys = _distinct(read)

    async def one(task: str, response: str) -> Judgment | None:
        async with gate:
            return await _ajudge(meter, evaluator, task, response, added)

    with metered(meter):
        results = await asyncio.gather(*(one(*key) for key in keys))
    judged = dict(zip(keys, results, strict=True))
    return _calibrated(
        evaluator, read, judged, meter.total(), alpha, confidence, folds, seed, added
    )


def _distinct(labels: Sequence[Label]) -> list[tuple[str, str]]:
    """Each distinct (task, response) once: a response labelled twice is judged once."""
    return list(dict.fromkeys((label.task, label.response) for label in labels))


def _check_concurrency(concurrency: int) -> None:
    if not isinstance(concurrency, int) or isinstance(concurrency, bool) or concurrency < 1:
        raise ValueError(
            f"concurrency must be an integer >= 1 (labels judged at a time), got {concurrency!r}"
        )


def _checked(
    judge: EvaluatorLike,
    labels: LabelsLike,
    alpha: float,
    confidence: float,
    folds: int,
    criteria: str | Sequence[str] | None,
) -> tuple[BaseEvaluator, list[Label], list[str]]:
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
    added = request_criteria({"criteria": criteria})
    if not isinstance(criteria, str | None) and not all(isinstance(c, str) for c in criteria):
        raise ValueError(f"criteria must be a string or a list of strings, got {criteria!r}")
    return as_evaluator(judge, option="judge"), read_labels(labels), added


def _state(task: str, criteria: Sequence[str]) -> dict[str, Any]:
    return {"task": task, "criteria": list(criteria)} if criteria else {"task": task}


def _judge(
    meter: BudgetMeter, judge: BaseEvaluator, task: str, response: str, criteria: Sequence[str]
) -> Judgment | None:
    """The judge's judgment of one labelled response; None when the budget refused it."""
    try:
        with meter.invocation(model_call=judge.calls_model) as done:
            return done(judge_once(judge, response, _state(task, criteria)))
    except BudgetStop:
        return None


async def _ajudge(
    meter: BudgetMeter, judge: BaseEvaluator, task: str, response: str, criteria: Sequence[str]
) -> Judgment | None:
    """Async twin of `_judge`."""
    try:
        with meter.invocation(model_call=judge.calls_model) as done:
            return done(await ajudge_once(judge, response, _state(task, criteria)))
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
    criteria: Sequence[str],
) -> CalibratedEvaluator:
    pairs = [
        (label, evaluation)
        for label in labels
        if isinstance(evaluation := judged.get((label.task, label.response)), Evaluation)
    ]
    scores = [evaluation.score for _, evaluation in pairs]
    person = [label.passed for label, _ in pairs]
    groups = [label.group or label.task for label, _ in pairs]
    tasks = len(set(groups))
    choice = cross_validated(
        scores, person, alpha=alpha, confidence=confidence, folds=folds, seed=seed, groups=groups
    )
    one_verdict = bool(pairs) and len(set(person)) == 1
    threshold = None if one_verdict else choice.threshold  # a false-PASS rate needs both
    calibrated = agreement([threshold is not None and s >= threshold for s in scores], person)
    own = agreement([_judge_passed(evaluation) for _, evaluation in pairs], person)
    diagnosis, advice = _diagnosis(scores, person, choice, threshold, alpha, confidence, folds)
    report = CalibrationReport(
        n=len(pairs),
        accuracy=calibrated.accuracy,
        kappa=calibrated.kappa,
        false_pass=calibrated.false_pass,
        false_fail=calibrated.false_fail,
        threshold=threshold,
        bound=choice.bound,
        alpha=alpha,
        confidence=confidence,
        met=threshold is not None,
        criteria=_per_criterion(pairs),
        judge=_rates(own),
        unjudged=len(labels) - len(pairs),
        usage=usage,
        curve=tuple(curve(scores, person, confidence)) if pairs else (),
        folds=folds,
        candidate=choice.candidate,
        rule_alpha=choice.level if threshold is not None else None,
        best_threshold=choice.best_threshold,
        bound_held_out=choice.held_out,
        tasks=tasks,
        grouped=tasks >= 2,
        best_kappa=best_kappa(scores, person) if pairs else 0.0,
        distinct_scores=len(set(scores)),
        diagnosis=diagnosis,
        advice=advice,
        unjudged_labels=_unjudged(labels, judged),
    )
    if not report.met:
        warnings.warn(unmet_text(report), CalibrationWarning, stacklevel=3)
    return CalibratedEvaluator(judge, report, identity=judge_identity(judge, criteria=criteria))


def _unjudged(
    labels: Sequence[Label], judged: Mapping[tuple[str, str], Judgment | None]
) -> list[dict[str, Any]]:
    """Each label the judge could not judge: its number, its task's start and why."""
    out = []
    for number, label in enumerate(labels, 1):
        outcome = judged.get((label.task, label.response))
        if isinstance(outcome, Evaluation):
            continue
        reason = outcome.reason if isinstance(outcome, NoJudgment) else "the budget ran out"
        out.append({"label": number, "task": label.task[:60], "reason": reason})
    return out


def _diagnosis(
    scores: Sequence[float],
    person: Sequence[bool],
    choice: Choice,
    threshold: float | None,
    alpha: float,
    confidence: float,
    folds: int,
) -> tuple[str, str]:
    """What the labels showed (`CalibrationReport.diagnosis`) and the one change it points to."""
    if not scores:
        return "no_labels", (
            "No label could be judged (see the unjudged labels): fix what stopped the "
            "judge, then calibrate again"
        )
    if len(set(person)) == 1:
        kind, other = ("passes", "would not pass") if person[0] else ("fails", "would pass")
        return "one_verdict", (
            f"Every label is one of the people's {kind}: a false-PASS rate needs both "
            f"kinds, so nothing is calibrated. Add labels of responses people {other}"
        )
    kappa, distinct = best_kappa(scores, person), len(set(scores))
    if distinct == 1 or kappa < SEPARATES:
        seen = (
            f"it gave every response the score {scores[0]:.2f}"
            if distinct == 1
            else f"the best kappa of any threshold on its scores is {kappa:.2f}"
        )
        return "no_separation", (
            f"This judge does not tell passes from fails ({seen}): more labels will not "
            "help. Use a stronger judge model, or other criteria"
        )
    if threshold is not None:
        return "met", ""
    return _short(scores, person, choice, alpha, confidence, folds)


def _short(
    scores: Sequence[float],
    person: Sequence[bool],
    choice: Choice,
    alpha: float,
    confidence: float,
    folds: int,
) -> tuple[str, str]:
    """Why a judge that separates did not meet `alpha`: false passes, or too few labels."""
    points = curve(scores, person, confidence)
    at = next((p for p in points if p.threshold == choice.best_threshold), None)
    if at is None:
        at = min(points, key=lambda p: p.bound)
    if at.rate >= alpha:
        return "false_passes", (
            f"At its best threshold ({at.threshold:.2f}) {at.rate:.0%} of the judge's passes "
            f"are ones people did not pass, over alpha {alpha}: more labels will not bring "
            f"that under alpha. Allow an alpha above {at.rate:.2f}, or use a stronger judge "
            "model or other criteria"
        )
    # Each fold's threshold is chosen on (folds - 1) / folds of the labels.
    needed = math.ceil(_passes_needed(at.rate, alpha, confidence) * folds / (folds - 1))
    share = at.passes / len(scores)  # of the labels, those scoring at least the threshold
    more = max(1, math.ceil((needed - at.passes) / share))
    return "too_few_labels", (
        f"The judge separates passes from fails, but only {at.passes} labels score "
        f"{at.threshold:.2f} or more ({at.false_passes} of them false passes): too few to "
        f"show alpha {alpha} on labels held out. Add about {more} more labels (about "
        f"{max(1, needed - at.passes)} more the judge scores {at.threshold:.2f} or more)"
    )


def _passes_needed(rate: float, alpha: float, confidence: float) -> int:
    """The fewest passes whose bound at this false-PASS rate is at most `alpha`."""
    passes = 1
    while passes < 1_000_000:
        if upper_bound(math.floor(rate * passes), passes, confidence) <= alpha:
            return passes
        passes = math.ceil(passes * 1.02) if passes > 500 else passes + 1
    return passes


def unmet_text(report: CalibrationReport) -> str:
    """One line on a calibration that passes nothing: what was measured, and the advice."""
    at = "" if report.best_threshold is None else f" at threshold {report.best_threshold:.2f}"
    kind = "held-out" if report.bound_held_out else "in-sample"
    return (
        f"alpha={report.alpha} not met with {report.confidence:.0%} confidence (n={report.n}, "
        f"best {kind} false-PASS bound {report.bound:.2f}{at}): the calibrated judge will "
        f"not pass anything. {report.advice}"
    ).strip()


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

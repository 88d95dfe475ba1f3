"""`cascade`: evaluators run in stages, cheapest first, each gating the next.

A word count or a schema check costs nothing; an LLM judge costs a model call. In a
cascade the judge reads only the responses the cheap checks let through (OpenEvolve's
staged evaluators work the same way): a stage runs only when every earlier stage reached
its threshold, and what was not run is neither paid for, counted against the budget, nor
reported as a score of 0.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from langgraph_refine._calls._budget import counted_inside, model_invocation
from langgraph_refine._state import Evaluation, Verdict
from langgraph_refine.evaluators._base import BaseEvaluator, EvaluatorLike, member_feedback
from langgraph_refine.evaluators._combine import _labels, as_evaluator

# A stage that stopped the cascade counts below a full pass, so a response stopped at
# stage k always scores below one that reached stage k + 1 (even when the stage gave it
# a score of 1.0 with a verdict short of PASS).
_STOPPED_AT_MOST = 0.99

# A response stopped before the last stage scores below this: a target score at or above
# it is reached only through the last stage's own score.
_STOPPED_BAND = 0.5


class CascadeEvaluator(BaseEvaluator):
    """Runs its stages in order while each reaches its threshold. See `cascade`.

    Example:
        >>> from langgraph_refine.evaluators import contains_all, word_count
        >>> ev = CascadeEvaluator([word_count(1, 3), contains_all(["owl"])], [None, None])
        >>> ev.evaluate("one two three four five six", {}).details["stopped_at"]
        'word_count'
    """

    name = "cascade"

    def __init__(self, stages: Sequence[BaseEvaluator], thresholds: Sequence[float | None]) -> None:
        self.stages = list(stages)
        self.thresholds = list(thresholds)
        self.labels = _labels(self.stages)
        self.calls_model = any(stage.calls_model for stage in self.stages)
        self.is_async = any(stage.is_async for stage in self.stages)
        self.inline = all(stage.inline for stage in self.stages)

    @property
    def parts(self) -> list[BaseEvaluator]:
        """The stages (named like a combination's parts, for the strategy record's key)."""
        return self.stages

    def reached(self, index: int, result: Evaluation) -> bool:
        """Whether stage `index` let the response through to the next stage.

        A threshold `t` asks for `score >= t`; no threshold asks for a full pass: verdict
        PASS or, without a verdict, a score of 1.0.
        """
        threshold = self.thresholds[index]
        if threshold is not None:
            return result.score >= threshold
        return _full_pass(result)

    def evaluate(self, response: str, state: Mapping[str, Any]) -> Evaluation:
        results: list[Evaluation] = []
        for index, stage in enumerate(self.stages):
            with self._counted(stage):
                results.append(stage.evaluate(response, state))
            if not self.reached(index, results[-1]):
                break
        return self._merge(results)

    async def aevaluate(self, response: str, state: Mapping[str, Any]) -> Evaluation:
        results: list[Evaluation] = []
        for index, stage in enumerate(self.stages):
            with self._counted(stage):
                results.append(await stage.aevaluate(response, state))
            if not self.reached(index, results[-1]):
                break
        return self._merge(results)

    @contextlib.contextmanager
    def _counted(self, stage: BaseEvaluator) -> Iterator[None]:
        """Run a stage as the loop runs an evaluator: a model-calling one as a model call.

        The loop runs the whole cascade as one model-calling invocation (it may call a
        model); each model-calling stage is its own invocation inside it, and the cascade
        tells the loop's that it was counted, so a judge stage that is not reached costs
        no call.
        """
        if self.calls_model:
            counted_inside()
        if not stage.calls_model:
            yield
            return
        with model_invocation():
            yield

    def _feedback(self, results: list[Evaluation], stopped: bool) -> str:
        """The deciding stage's feedback, after that of earlier stages short of a full pass.

        An earlier stage that reached a threshold below a full pass still has problems
        (say a length 10% over): they are kept, labelled, so the next round sees them.
        """
        labels, last = self.labels, results[-1]
        earlier = [
            (label, r) for label, r in zip(labels, results[:-1], strict=False) if not _full_pass(r)
        ]
        if not earlier:
            return last.feedback.strip() or (
                f"[{labels[len(results) - 1]}] {member_feedback(last)}" if stopped else ""
            )
        lines = [*earlier, (labels[len(results) - 1], last)]
        return "\n".join(
            f"[{label}] score {r.score:.2f}: {member_feedback(r)}" for label, r in lines
        )

    def _merge(self, results: list[Evaluation]) -> Evaluation:
        """The cascade's evaluation from the stages that ran (the last one decided)."""
        n, k = len(self.stages), len(results) - 1
        last = results[-1]
        stopped = not self.reached(k, last)
        return Evaluation(
            score=_score(k, n, last.score),
            feedback=self._feedback(results, stopped),
            verdict=_verdict(last.verdict, stopped=stopped, before_last=k < n - 1),
            details={
                "stopped_at": self.labels[k] if stopped else None,
                "stage": k,
                "stages": n,
                "scores": {label: r.score for label, r in zip(self.labels, results, strict=False)},
                "not_run": self.labels[k + 1 :],
                "parts": [
                    {
                        "name": label,
                        "score": r.score,
                        "threshold": threshold,
                        "verdict": r.verdict,
                        "feedback": r.feedback,
                        "details": r.details,
                    }
                    for label, threshold, r in zip(
                        self.labels, self.thresholds, results, strict=False
                    )
                ],
            },
        )


def _score(k: int, n: int, score: float) -> float:
    """The cascade's score when stage `k` of `n` decided with `score`.

    The last stage's score is the cascade's: the cheap stages it passed add nothing, so
    a judge's 0.8 stays 0.8 and a target of 0.9 is not reached. A response stopped
    before it scores in [0, 0.5), higher the further it got.
    """
    score = min(1.0, max(0.0, score))
    if k == n - 1:
        return score
    return _STOPPED_BAND * (k + min(score, _STOPPED_AT_MOST)) / (n - 1)


def _full_pass(result: Evaluation) -> bool:
    """A stage's full pass: verdict PASS or, without a verdict, a score of 1.0."""
    return result.verdict == "PASS" or (result.verdict is None and result.score >= 1.0)


def _verdict(verdict: Verdict | None, *, stopped: bool, before_last: bool) -> Verdict | None:
    """The cascade's verdict: the deciding stage's, never PASS before the last stage.

    Never PASS for a response that did not reach every threshold (a stage may say PASS
    below the threshold it was given). A response stopped before the last stage was not
    seen by the later ones, so it is not finished: NEEDS_IMPROVEMENT, unless its stage
    said FAIL (or NEEDS_IMPROVEMENT).
    """
    if stopped and verdict == "PASS":
        return "NEEDS_IMPROVEMENT"
    if before_last and verdict is None:
        return "NEEDS_IMPROVEMENT"
    return verdict


def cascade(
    *stages: EvaluatorLike, thresholds: Sequence[float | None] | None = None
) -> CascadeEvaluator:
    """Evaluate in stages, cheapest first: each stage runs only if the earlier ones passed.

    Stage `k` (0-based) runs only when every earlier stage reached its threshold. A
    response the last stage judged scores that stage's score `s`: the cheap stages it
    passed add nothing, so the cascade reaches a loop's `target_score` exactly when its
    last stage does. A response stopped at stage `k < n - 1` scores
    `0.5 * (k + s) / (n - 1)` (with `s` counted at most 0.99), below 0.5 and higher the
    further it got. Put the cheap deterministic checks
    first and the LLM judge last: a draft of the wrong length, or JSON that does not
    validate, never reaches the judge, and a stage that does not run makes no model
    call, costs nothing and is not counted against the loop's `Budget`.

    The feedback and verdict are those of the stage that decided (the one that stopped
    the response, else the last); the feedback of an earlier stage that reached its
    threshold short of a full pass comes first, each stage's line labelled with its name
    and score, so its problems are not dropped. The verdict is PASS only when every
    stage reached its threshold: a response stopped before the last stage gets
    NEEDS_IMPROVEMENT, or FAIL when its stage said FAIL; a last stage's PASS below its
    threshold becomes NEEDS_IMPROVEMENT. Stages may be any evaluator form. An error a
    stage raises propagates, and the stages after it do not run: `Unjudged` (the stage
    could not judge) leaves the attempt unjudged in the loop. With an async loop the
    stages still run one after another (each waits for the verdict of the one before).

    A loop's `target_score` applies to the cascade's score: a response stopped before the
    last stage scores below 0.5, so it never reaches a target of 0.5 or more (the default
    is 0.9).

    Args:
        *stages: One or more evaluators in any accepted form, cheapest first.
        thresholds: One per stage: a score in [0, 1] the stage must reach (`score >=
            threshold`), or None for a full pass (verdict PASS, or no verdict and a score
            of 1.0). Default: a full pass at every stage.

    Returns:
        An evaluator whose `details` hold `stopped_at` (the label of the stage that
        stopped the response, or None when every stage reached its threshold), `stage`
        (the index of the deciding stage), `stages` (how many there are), `scores` (each
        run stage's label and score; stages not run are absent, never 0), `not_run` (the
        labels of the stages not run) and `parts` (each run stage's name, score,
        threshold, verdict, feedback and details). Labels are the stages' names, made
        unique as in `combine` (`word_count#2`).

    Raises:
        ValueError: If no stage is given, a stage is not an evaluator, or the thresholds
            do not fit (not one per stage, not a number, outside [0, 1]).

    Example:
        >>> from langgraph_refine import evaluators
        >>> judge = lambda response, state: 0.8  # stands in for an LLM judge
        >>> ev = evaluators.cascade(evaluators.word_count(3, 6), judge)
        >>> stopped = ev.evaluate("far too many words in this one draft here", {})
        >>> stopped.score, stopped.verdict, stopped.details["not_run"]
        (0.25, 'NEEDS_IMPROVEMENT', ['<lambda>'])
        >>> ev.evaluate("short enough draft", {}).score
        0.8
    """
    if not stages:
        raise ValueError(
            "cascade() needs at least one stage, e.g. cascade(word_count(50, 80), judge)"
        )
    parts = [as_evaluator(s, option=f"cascade() stage {i + 1}") for i, s in enumerate(stages)]
    return CascadeEvaluator(parts, _thresholds(thresholds, len(parts)))


def _thresholds(thresholds: Sequence[float | None] | None, n: int) -> list[float | None]:
    """Check the thresholds: one per stage, each None or a number in [0, 1]."""
    if thresholds is None:
        return [None] * n
    if isinstance(thresholds, str | bytes) or not isinstance(thresholds, Sequence):
        raise ValueError(
            f"cascade() thresholds must be a list with one entry per stage, got {thresholds!r}"
        )
    if len(thresholds) != n:
        raise ValueError(
            f"cascade() got {n} stages but {len(thresholds)} thresholds ({list(thresholds)!r}); "
            "give one per stage (None for a full pass)"
        )
    for i, t in enumerate(thresholds):
        if t is None:
            continue
        if (
            not isinstance(t, int | float)
            or isinstance(t, bool)
            or math.isnan(t)
            or not 0.0 <= t <= 1.0
        ):
            raise ValueError(
                f"cascade() threshold {i + 1} must be a number in [0, 1] or None (a full "
                f"pass), got {t!r}"
            )
    return [None if t is None else float(t) for t in thresholds]

"""`combine` and `as_evaluator`: how any accepted evaluator form becomes one evaluator.

`combine` takes a weighted mean of several evaluators, with labelled feedback;
`as_evaluator` turns a callable, a chat model (an LLM judge) or a list (combined) into a
`BaseEvaluator`. The two live together because they recurse into each other: a list
combines its parts, and each part may be any form, a list included.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping, Sequence
from typing import Any

from langgraph_refine._kinds import kind_of
from langgraph_refine._state import Evaluation, Verdict
from langgraph_refine.evaluators._base import (
    BaseEvaluator,
    CallableEvaluator,
    EvaluatorLike,
    member_feedback,
)
from langgraph_refine.evaluators._judge import llm_judge
from langgraph_refine.evaluators._openevals import OpenEvalsEvaluator, is_openevals_evaluator
from langgraph_refine.evaluators._runnable import RunnableEvaluator


class CombinedEvaluator(BaseEvaluator):
    """Evaluates with every part and reports the weighted mean of their scores. See `combine`.

    Example:
        >>> from langgraph_refine.evaluators import word_count
        >>> ev = CombinedEvaluator([word_count(1, 2), word_count(1, 2)], [1.0, 1.0])
        >>> list(ev.evaluate("one", {}).details["scores"])
        ['word_count', 'word_count#2']
    """

    name = "combined"

    def __init__(self, parts: Sequence[BaseEvaluator], weights: Sequence[float]) -> None:
        self.parts = list(parts)
        self.weights = [float(w) for w in weights]
        self.calls_model = any(part.calls_model for part in self.parts)
        self.is_async = any(part.is_async for part in self.parts)
        self.inline = all(part.inline for part in self.parts)

    def evaluate(self, response: str, state: Mapping[str, Any]) -> Evaluation:
        return self._merge([part.evaluate(response, state) for part in self.parts])

    async def aevaluate(self, response: str, state: Mapping[str, Any]) -> Evaluation:
        if self.inline:  # quick checks only: no task or thread for each part
            return self.evaluate(response, state)
        results = await asyncio.gather(*(p.aevaluate(response, state) for p in self.parts))
        return self._merge(list(results))

    def _merge(self, results: list[Evaluation]) -> Evaluation:
        total = sum(self.weights)
        score = sum(w * r.score for w, r in zip(self.weights, results, strict=True)) / total
        labels = _labels(self.parts)
        feedback = "\n".join(
            f"[{label}] score {r.score:.2f}: {member_feedback(r)}"
            for label, r in zip(labels, results, strict=True)
        )
        parts = [
            {
                "name": label,
                "score": r.score,
                "weight": w,
                "verdict": r.verdict,
                "feedback": r.feedback,
                "details": r.details,
            }
            for label, w, r in zip(labels, self.weights, results, strict=True)
        ]
        return Evaluation(
            score=min(1.0, max(0.0, score)),
            feedback=feedback,
            verdict=combined_verdict(results),
            details={
                "scores": {label: r.score for label, r in zip(labels, results, strict=True)},
                "parts": parts,
            },
        )


def _labels(parts: Sequence[BaseEvaluator]) -> list[str]:
    """Part names, made unique (`word_count`, `word_count#2`) so feedback stays unambiguous."""
    seen: dict[str, int] = {}
    labels = []
    for part in parts:
        seen[part.name] = seen.get(part.name, 0) + 1
        labels.append(part.name if seen[part.name] == 1 else f"{part.name}#{seen[part.name]}")
    return labels


def combined_verdict(results: Sequence[Evaluation]) -> Verdict | None:
    """The verdict of a combination.

    PASS only if some part says PASS and every other part passes too (PASS or a perfect
    score); FAIL if any part says FAIL; otherwise NEEDS_IMPROVEMENT if any part gave a
    verdict, else None (the score alone decides).
    """
    verdicts = [r.verdict for r in results]
    if not any(verdicts):
        return None
    if "FAIL" in verdicts:
        return "FAIL"
    if all(r.verdict == "PASS" or (r.verdict is None and r.score >= 1.0) for r in results):
        return "PASS"
    return "NEEDS_IMPROVEMENT"


def combine(
    *evaluators: EvaluatorLike, weights: Sequence[float] | None = None
) -> CombinedEvaluator:
    """Combine evaluators into one whose score is the weighted mean of theirs.

    Each part may be any evaluator form (a ready evaluator, a callable, a chat model used
    as a judge). With an async loop (`arefine`/`ainvoke`) the parts run concurrently.

    The combined verdict is FAIL if any part says FAIL; PASS only if some part says PASS
    and every other part passes too (PASS, or no verdict and a perfect score);
    NEEDS_IMPROVEMENT if any part gave a verdict; otherwise None (the score decides).

    Args:
        *evaluators: One or more evaluators in any accepted form.
        weights: One non-negative weight per evaluator (not all zero); equal by default.

    Returns:
        An evaluator whose feedback holds each part's score and feedback, labelled
        with the part's name (`[word_count] score 0.50: ...`; a repeated name gets
        `#2`), whose
        `details["scores"]` maps each label to its part's score, and whose
        `details["parts"]` lists each part's name, score, weight, verdict, feedback and
        details.

    Raises:
        ValueError: If no evaluator is given, a part is not an evaluator, or the
            weights do not fit (wrong count, negative, not finite, all zero).

    Example:
        >>> from langgraph_refine import evaluators
        >>> ev = evaluators.combine(lambda r, s: 1.0, lambda r, s: 0.0, weights=[3, 1])
        >>> ev.evaluate("text", {"task": "t"}).score
        0.75
    """
    if not evaluators:
        raise ValueError("combine() needs at least one evaluator")
    parts = [as_evaluator(e, option=f"combine() part {i + 1}") for i, e in enumerate(evaluators)]
    if weights is None:
        weights = [1.0] * len(parts)
    weights = list(weights)
    if len(weights) != len(parts):
        raise ValueError(
            f"combine() got {len(parts)} evaluators but {len(weights)} weights; give one each"
        )
    if (
        any(
            not isinstance(w, int | float) or isinstance(w, bool) or not math.isfinite(w) or w < 0
            for w in weights
        )
        or sum(weights) <= 0
    ):
        raise ValueError(
            f"combine() weights must be finite non-negative numbers, not all zero; got {weights!r}"
        )
    return CombinedEvaluator(parts, weights)


def as_evaluator(evaluator: EvaluatorLike, *, option: str = "evaluator") -> BaseEvaluator:
    """Turn any accepted evaluator form into a `BaseEvaluator`.

    Args:
        evaluator: See `EvaluatorLike`; an openevals-style callable (keyword-only
            `outputs`) becomes an `OpenEvalsEvaluator`, a graph or other runnable that
            is not a chat model (a `create_agent` judge) a `RunnableEvaluator`.
        option: The option name, for error messages.

    Raises:
        ValueError: If `evaluator` is not callable, or is an empty list.

    Example:
        >>> as_evaluator([lambda r, s: 1.0, lambda r, s: 0.5]).evaluate("text", {}).score
        0.75
    """
    if isinstance(evaluator, BaseEvaluator):
        return evaluator
    kind = kind_of(evaluator)
    if kind == "chat":
        return llm_judge(evaluator)
    if kind == "runnable":  # a graph or other runnable: a judge that may use tools
        return RunnableEvaluator(evaluator)
    if isinstance(evaluator, list | tuple):
        if not evaluator:
            raise ValueError(f"{option} must not be an empty list")
        return combine(*evaluator)
    if is_openevals_evaluator(evaluator):
        return OpenEvalsEvaluator(evaluator)
    if callable(evaluator):
        return CallableEvaluator(evaluator)
    raise ValueError(
        f"{option} must be callable (response, state) -> float | Evaluation, a chat model, "
        f"or a list of these; got {type(evaluator).__name__} ({evaluator!r:.80})"
    )

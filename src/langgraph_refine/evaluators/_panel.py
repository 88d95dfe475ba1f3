"""`panel`: a jury of evaluators judging concurrently, a judge that fails left out.

A jury of different judges agrees with people more often than one judge does (PoLL,
Verga et al. 2024). The panel runs its members at once; the score is their mean (or
their minimum); the verdict is decided by a rule; each member's feedback is labelled
with its name. A member that fails with a provider or connection error (an HTTP status,
a timeout, a dropped connection: see `langgraph_refine._calls._retry`) is left out of the rule
and the feedback says so; it never counts as a FAIL. A member that raises `Unjudged` is
left out the same way. When no member can judge, the panel raises `Unjudged` (the loop
keeps the attempt unjudged).
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, get_args

from langgraph_refine._calls._budget import BudgetStop
from langgraph_refine._calls._retry import is_transient, status_code
from langgraph_refine._errors import Unjudged
from langgraph_refine._state import Evaluation, PanelRule, Verdict
from langgraph_refine.evaluators._base import (
    BaseEvaluator,
    EvaluatorLike,
    describe_error,
    member_feedback,
)
from langgraph_refine.evaluators._combine import as_evaluator, combined_verdict

_ORDER: dict[Verdict, int] = {"FAIL": 0, "NEEDS_IMPROVEMENT": 1, "PASS": 2}


def is_provider_error(exc: BaseException) -> bool:
    """True for a provider's or the connection's failure (left out of a panel), not a bug.

    Any error carrying an HTTP status, and the transient errors the retry policy retries
    (connection errors, timeouts).
    """
    return status_code(exc) is not None or is_transient(exc)


class PanelEvaluator(BaseEvaluator):
    """Evaluates with every member at once and decides by a rule. See `panel`."""

    name = "panel"

    def __init__(self, members: Sequence[BaseEvaluator], rule: PanelRule) -> None:
        self.members = list(members)
        self.rule = rule
        self.labels = _labels(self.members)
        self.calls_model = any(m.calls_model for m in self.members)
        self.is_async = any(m.is_async for m in self.members)

    @property
    def parts(self) -> list[BaseEvaluator]:
        """The members (named like a combination's parts, for the strategy record's key)."""
        return self.members

    def evaluate(self, response: str, state: Mapping[str, Any]) -> Evaluation:
        # Each member in its own thread, with a copy of this context: the loop's meter
        # (in the run's config) sees and checks every member's model calls.
        with ThreadPoolExecutor(max_workers=len(self.members)) as pool:
            futures = [
                pool.submit(contextvars.copy_context().run, m.evaluate, response, state)
                for m in self.members
            ]
            outcomes: list[Evaluation | BaseException] = []
            for future in futures:
                try:
                    outcomes.append(future.result())
                except Exception as exc:
                    outcomes.append(exc)
        return self._decide(outcomes)

    async def aevaluate(self, response: str, state: Mapping[str, Any]) -> Evaluation:
        outcomes = await asyncio.gather(
            *(m.aevaluate(response, state) for m in self.members), return_exceptions=True
        )
        return self._decide(list(outcomes))

    def _decide(self, outcomes: Sequence[Evaluation | BaseException]) -> Evaluation:
        judged: list[tuple[str, Evaluation]] = []
        left_out: list[tuple[str, BaseException]] = []
        for label, outcome in zip(self.labels, outcomes, strict=True):
            if isinstance(outcome, Evaluation):
                judged.append((label, outcome))
            elif isinstance(outcome, Unjudged) or (
                isinstance(outcome, Exception)
                and not isinstance(outcome, BudgetStop)
                and is_provider_error(outcome)
            ):
                left_out.append((label, outcome))
            else:
                raise outcome  # a bug, a budget stop or a cancellation: not the panel's call
        if not judged:
            reasons = "; ".join(f"[{label}] {describe_error(exc)}" for label, exc in left_out)
            raise Unjudged(
                f"no member of the panel could judge ({len(left_out)} of them): {reasons}"
            ) from left_out[0][1]
        results = [e for _, e in judged]
        scores = [e.score for e in results]
        score = min(scores) if self.rule == "min" else sum(scores) / len(scores)
        lines = [
            f"[{label}] score {e.score:.2f}"
            + (f" ({e.verdict})" if e.verdict else "")
            + f": {member_feedback(e)}"
            for label, e in judged
        ]
        lines += [
            f"[{label}] left out: it failed with {failed}; the panel decided without it"
            for label, failed in ((label, describe_error(exc)) for label, exc in left_out)
        ]
        return Evaluation(
            score=min(1.0, max(0.0, score)),
            feedback="\n".join(lines),
            verdict=_verdict(self.rule, results),
            details={
                "rule": self.rule,
                "scores": {label: e.score for label, e in judged},
                "verdicts": {label: e.verdict for label, e in judged},
                "left_out": {label: describe_error(exc) for label, exc in left_out},
                "members": [
                    {"name": label, "score": e.score, "verdict": e.verdict, "details": e.details}
                    for label, e in judged
                ],
            },
        )


def _labels(members: Sequence[BaseEvaluator]) -> list[str]:
    seen: dict[str, int] = {}
    labels = []
    for member in members:
        seen[member.name] = seen.get(member.name, 0) + 1
        count = seen[member.name]
        labels.append(member.name if count == 1 else f"{member.name}#{count}")
    return labels


def _verdict(rule: PanelRule, results: Sequence[Evaluation]) -> Verdict | None:
    """The panel's verdict: by majority, by the strictest member, or combine's rule (mean)."""
    verdicts = [r.verdict for r in results if r.verdict is not None]
    if not verdicts:
        return None
    if rule == "min":
        return min(verdicts, key=lambda v: _ORDER[v])
    if rule == "majority":
        for verdict in ("PASS", "FAIL"):
            # A strict majority of the members that judged (those without a verdict too).
            if sum(v == verdict for v in verdicts) * 2 > len(results):
                return verdict
        return "NEEDS_IMPROVEMENT"
    return combined_verdict(results)


def panel(*evaluators: EvaluatorLike, rule: PanelRule = "mean") -> PanelEvaluator:
    """A jury: evaluators that judge each response concurrently, decided by `rule`.

    Each member may be any evaluator form (an LLM judge, a chat model, a callable, a
    graph such as a `create_agent` judge). Under `arefine`/`ainvoke` the members run as
    concurrent tasks; under `refine`/`invoke`, in threads.

    - `rule="mean"`: the score is the members' mean; the verdict follows `combine`'s rule
      (FAIL if any says FAIL, PASS only if every member passes).
    - `rule="majority"`: the score is the mean; the verdict is PASS (or FAIL) when more
      than half of the members that judged say so, else NEEDS_IMPROVEMENT.
    - `rule="min"`: the score is the lowest; the verdict the worst given.

    A member that fails with a provider or connection error (an HTTP error, a timeout,
    a dropped connection) is left out: the rule applies to the others, and the feedback
    names it and its error. It never counts as a FAIL; so is a member that raises
    `Unjudged`. When no member can judge, the panel raises `Unjudged` (the loop keeps the
    attempt unjudged). Other errors are raised.

    Args:
        *evaluators: Two or more evaluators, in any accepted form.
        rule: `"mean"`, `"majority"` or `"min"`.

    Returns:
        An evaluator whose feedback holds each member's score, verdict and feedback,
        labelled with its name (`[llm_judge] score 0.80 (PASS): ...`), and whose details
        hold `scores`, `verdicts`, `left_out` and `members`.

    Raises:
        ValueError: For fewer than two members, a member that is no evaluator, or an
            unknown rule.
        Exception: When evaluating, the error of the first member if every member failed.

    Example:
        >>> from langgraph_refine import Evaluation, evaluators
        >>> jury = evaluators.panel(
        ...     lambda r, s: Evaluation(score=0.9, verdict="PASS"),
        ...     lambda r, s: Evaluation(score=0.7, verdict="PASS"),
        ...     lambda r, s: Evaluation(score=0.2, verdict="FAIL"),
        ...     rule="majority",
        ... )
        >>> result = jury.evaluate("text", {"task": "t"})
        >>> round(result.score, 2), result.verdict
        (0.6, 'PASS')
    """
    if rule not in get_args(PanelRule):
        allowed = ", ".join(repr(r) for r in get_args(PanelRule))
        raise ValueError(f"panel() rule must be one of {allowed}; got {rule!r}")
    if len(evaluators) < 2:
        raise ValueError(f"panel() needs at least two evaluators, got {len(evaluators)}")
    members = [as_evaluator(e, option=f"panel() member {i + 1}") for i, e in enumerate(evaluators)]
    return PanelEvaluator(members, rule)

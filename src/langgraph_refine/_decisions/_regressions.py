"""Regressions named: a refinement that fails a criterion its parent passed is told so.

A per-criterion judge (`evaluators.checklist`) reports each criterion's verdict in
`details["criteria"]`. When a refinement fails a criterion the attempt it refined
passed, its feedback (what the next round is shown) says so, naming the criterion:
"it passed before: ...". Decided once, for the graph and the agent (see `_round`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from langgraph_refine._state import Attempt, Evaluation


def criteria_verdicts(evaluation: Evaluation | None) -> dict[str, tuple[str, bool]]:
    """A per-criterion judge's verdicts (`details["criteria"]`), by normalised name.

    Names are compared without case or surrounding space; each keeps its own spelling.

    Example:
        >>> item = {"criterion": "Short", "passed": True}
        >>> ev = Evaluation(score=0.5, details={"criteria": [item]})
        >>> criteria_verdicts(ev)
        {'short': ('Short', True)}
    """
    items = (evaluation.details.get("criteria") if evaluation is not None else None) or []
    found: dict[str, tuple[str, bool]] = {}
    for item in items if isinstance(items, list) else []:
        if isinstance(item, Mapping) and isinstance(item.get("criterion"), str):
            name = item["criterion"]
            found[normalised(name)] = (name, bool(item.get("passed")))
    return found


def normalised(name: str) -> str:
    """A criterion's name as names are compared: spaces collapsed, case folded."""
    return " ".join(name.split()).casefold()


def regressions(parent: Evaluation | None, child: Evaluation | None) -> list[str]:
    """The criteria `child` fails that `parent` passed, in the child's order."""
    before = criteria_verdicts(parent)
    return [
        name
        for key, (name, passed) in criteria_verdicts(child).items()
        if not passed and before.get(key, ("", False))[1]
    ]


def with_regressions(attempt: Attempt, attempts: Sequence[Attempt]) -> Attempt:
    """`attempt` with its regressions against its parent named in its feedback.

    The names go to `details["regressions"]` too. An attempt without a parent, without
    per-criterion verdicts, or that broke nothing is returned as it was.

    Example:
        >>> def judged(index, passed, parent=None):
        ...     details = {"criteria": [{"criterion": "Cites a source", "passed": passed}]}
        ...     judgment = Evaluation(score=0.5, feedback="Fix it.", details=details)
        ...     return Attempt(index=index, response="r", parent=parent, evaluation=judgment)
        >>> first, second = judged(0, True), judged(1, False, parent=0)
        >>> print(with_regressions(second, [first]).evaluation.feedback)
        Fix it.
        It passed before: Cites a source. Keep what the earlier attempt got right.
    """
    evaluation = attempt.evaluation
    if evaluation is None or attempt.parent is None:
        return attempt
    parent = next((a for a in attempts if a.index == attempt.parent), None)
    broken = regressions(parent.evaluation if parent is not None else None, evaluation)
    if not broken:
        return attempt
    note = f"It passed before: {'; '.join(broken)}. Keep what the earlier attempt got right."
    feedback = f"{evaluation.feedback.strip()}\n{note}".strip()
    details = {**evaluation.details, "regressions": broken}
    return attempt.model_copy(
        update={
            "evaluation": evaluation.model_copy(update={"feedback": feedback, "details": details})
        }
    )

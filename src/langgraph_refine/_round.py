"""One round's decisions, without I/O: what the evaluate step makes of its judgments.

`EvaluatorNode` (`_evaluate`) calls the evaluator; these functions turn what it said into
the round's update: the evaluated attempt (the best candidate), the stop rules' decision,
a confirming judgment's outcome (`confirm_pass`), the strategy's next move and the
ladder's next rung. Sync and async evaluation share them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from langgraph_refine._budget import BudgetStop
from langgraph_refine._ladder import next_rung, rung_prices
from langgraph_refine._options import LoopOptions
from langgraph_refine._record import run_record
from langgraph_refine._result import best_attempt
from langgraph_refine._state import Attempt, Evaluation, StopReason, Usage
from langgraph_refine._step import Step, emit, round_event
from langgraph_refine._stop_rules import BUDGET_STOP, CONFIRMABLE_STOPS
from langgraph_refine._strategy import MoveStats, choose_next

logger = logging.getLogger("langgraph_refine")


def unevaluated(
    state: Mapping[str, Any], pending: Attempt, step: Step, stop: BudgetStop
) -> dict[str, Any]:
    """The round the budget stopped before its evaluation: the attempt kept, unscored."""
    logger.info("budget exhausted before evaluating attempt %d: %s", pending.index, stop)
    usage = step.meter.delta()
    attempt = pending.model_copy(update={"usage": pending.usage + usage})
    return {
        "attempts": [attempt],
        "pending": None,
        "usage": attempt.usage,  # the generation's and this step's
        # A reviewer's edit stays the result, unscored; anything else is a budget stop.
        "stop_reason": "edited" if is_edit(state) else BUDGET_STOP,
    }


def judged_round(
    state: Mapping[str, Any],
    pending: Attempt,
    evaluations: list[Evaluation],
    step: Step,
    options: LoopOptions,
) -> _Judged:
    """The evaluated attempt, the attempts with it, and the stop rules' decision."""
    for evaluation in evaluations:
        if not isinstance(evaluation, Evaluation):  # a custom BaseEvaluator's mistake
            raise TypeError(f"evaluator returned {type(evaluation).__name__}; return an Evaluation")
    usage = step.meter.delta()
    attempt = _choose_candidate(pending, evaluations, pending.usage + usage)
    attempts = [*(state.get("attempts") or []), attempt]
    # A reviewer's edit ends the loop whatever it scores; other attempts meet the rules.
    stop_reason: StopReason | None = "edited" if is_edit(state) else options.rules.decide(attempts)
    if stop_reason is None and len(evaluations) < len(responses(pending)):
        stop_reason = BUDGET_STOP  # it ran out while judging the candidates
    return _Judged(attempt, attempts, stop_reason)


def confirmed(
    pending: Attempt,
    judged: _Judged,
    again: Evaluation | None,
    step: Step,
    options: LoopOptions,
) -> _Judged:
    """The round after its confirming judgment (`confirm_pass`).

    If the second judgment also stops the loop, the first stands (with the second in
    `details["confirmation"]`); if not, the attempt carries the second judgment (the
    first in `details["first_judgment"]`) and the rules decide again, so the loop goes
    on with the second judgment's feedback. With no budget left for the second
    judgment, the loop stops on the budget.
    """
    first = judged.attempt.evaluation
    assert first is not None
    usage = pending.usage + step.meter.delta()  # the generation's, both judgments'
    if again is None:
        details = {**first.details, "confirmation": "not made: the budget ran out"}
        attempt = judged.attempt.model_copy(
            update={"evaluation": first.model_copy(update={"details": details}), "usage": usage}
        )
        return _Judged(attempt, [*judged.attempts[:-1], attempt], BUDGET_STOP)
    if not isinstance(again, Evaluation):
        raise TypeError(f"evaluator returned {type(again).__name__}; return an Evaluation")
    trial = [*judged.attempts[:-1], judged.attempt.model_copy(update={"evaluation": again})]
    if options.rules.decide(trial) in CONFIRMABLE_STOPS:
        kept = first.model_copy(
            update={"details": {**first.details, "confirmation": _summary(again)}}
        )
        stop_reason = judged.stop_reason
    else:
        kept = again.model_copy(
            update={"details": {**again.details, "first_judgment": _summary(first)}}
        )
        trial[-1] = judged.attempt.model_copy(update={"evaluation": kept})
        stop_reason = options.rules.decide(trial)
    attempt = judged.attempt.model_copy(update={"evaluation": kept, "usage": usage})
    return _Judged(attempt, [*judged.attempts[:-1], attempt], stop_reason)


def decided(
    state: Mapping[str, Any],
    judged: _Judged,
    options: LoopOptions,
    record: Mapping[str, MoveStats] | None,
    ladder: Sequence[str],
) -> dict[str, Any]:
    """The round's update: the evaluated attempt, the stop reason, the next move and rung."""
    attempt, attempts, stop_reason = judged
    choice = (
        None
        if stop_reason
        else choose_next(options.strategy, attempts, state["task"], record=record)
    )
    _report(options.name, attempt, best_attempt(attempts), stop_reason)
    update: dict[str, Any] = {
        "attempts": [attempt],
        "pending": None,
        "usage": attempt.usage,  # the generation's and this step's
        "refine_from": choice.parent if choice is not None else None,
        "next_move": choice.move if choice is not None else None,
    }
    if stop_reason is not None or state.get("stop_reason") is not None:
        update["stop_reason"] = stop_reason
    if ladder and choice is not None:
        update["rung"] = _next_rung(attempts, ladder, options, record)
    return update


def _next_rung(
    attempts: list[Attempt],
    ladder: Sequence[str],
    options: LoopOptions,
    record: Mapping[str, MoveStats] | None,
) -> int:
    """The ladder's rung for the next attempt, with the money left and the known costs."""
    budget = options.budget
    money_left = None
    if budget is not None and budget.max_cost is not None:
        money_left = budget.max_cost - sum(a.usage.cost or 0.0 for a in attempts)
    return next_rung(
        attempts,
        ladder,
        record=record if options.strategy == "explore" else None,
        money_left=money_left,
        prices=rung_prices(attempts, ladder, budget.pricing if budget is not None else None),
    )


def _summary(evaluation: Evaluation) -> dict[str, Any]:
    """A judgment as plain data, kept beside the one that counts."""
    return {
        "score": evaluation.score,
        "verdict": evaluation.verdict,
        "feedback": evaluation.feedback,
    }


def is_edit(state: Mapping[str, Any]) -> bool:
    """True when the pending attempt is a reviewer's edit (see `ReviewNode.apply`)."""
    return state.get("stop_reason") == "edited"


def round_record(
    state: Mapping[str, Any],
    attempts: list[Attempt],
    options: LoopOptions,
    key: Callable[[], str | None],
) -> Any:
    """The strategy record's update for this round; none for an edit (not a model's move).

    `key` gives the run's record key, asked only when the run keeps a record (`run_record`).
    """
    return None if is_edit(state) else run_record(state, attempts, options, key)


class _Judged(NamedTuple):
    attempt: Attempt
    attempts: list[Attempt]
    stop_reason: StopReason | None


def _report(name: str, attempt: Attempt, best: Attempt | None, stop_reason: str | None) -> None:
    """Log the round and send its `round` stream event."""
    evaluation = attempt.evaluation
    assert evaluation is not None
    best_score = best.score if best is not None else None
    logger.info(
        "%s round %d: score=%.3f verdict=%s best=%.3f%s",
        name,
        attempt.index,
        evaluation.score,
        evaluation.verdict,
        best_score if best_score is not None else float("nan"),
        f" -> stop ({stop_reason})" if stop_reason else "",
    )
    emit(round_event(name, attempt, best))


def read_as_object(pending: Attempt, options: LoopOptions) -> Attempt:
    """A typed loop's attempt that no generator read (a reviewer's edit), read as the object.

    Its object is kept in `output`; text that is no valid object is FAIL with the errors,
    like a generator's reply, and the evaluator is not called.
    """
    schema = options.output_schema
    if schema is None or pending.output is not None or pending.evaluation is not None:
        return pending
    if pending.candidates:
        return pending
    reply = schema.read(pending.response)
    return pending.model_copy(update={"output": reply.output, "evaluation": reply.evaluation})


def responses(pending: Attempt) -> list[tuple[str, Evaluation | None]]:
    """Each response to judge, with the evaluation it already has (an invalid object's)."""
    if pending.candidates:
        return [(c.response, c.evaluation) for c in pending.candidates]
    return [(pending.response, pending.evaluation)]


def _choose_candidate(pending: Attempt, evaluations: list[Evaluation], usage: Usage) -> Attempt:
    """The pending attempt carrying its best candidate (by the best-result rule) and usage."""
    if not pending.candidates:
        return pending.model_copy(update={"evaluation": evaluations[0], "usage": usage})
    candidates = [
        c.model_copy(update={"evaluation": evaluations[i] if i < len(evaluations) else None})
        for i, c in enumerate(pending.candidates)
    ]
    ranked = [
        Attempt(index=i, response=c.response, evaluation=c.evaluation)
        for i, c in enumerate(candidates)
    ]
    best = best_attempt(ranked)
    assert best is not None
    chosen = candidates[best.index]
    return pending.model_copy(
        update={
            "response": chosen.response,
            "evaluation": chosen.evaluation,
            "output": chosen.output,
            "reasoning": chosen.reasoning,
            "edits": chosen.edits,
            "candidates": candidates,
            "usage": usage,
        }
    )

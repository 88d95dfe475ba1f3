"""One round's decisions, written once and without I/O, for the graph and the agent.

`evaluate_round` is a flow: a generator that yields the calls it needs and returns the
round's update, the pattern of `_driver.run_flow` (and of httpx's auth flows). It asks
for the judgments of the pending attempt (`Judge`), a confirming judgment
(`Confirm`, with `confirm_pass`), each answered with what the round has spent so far,
and the strategy record (`Exchange`); it decides the evaluated attempt (the best candidate),
the stop reason (the only call to the stop rules), the next move and rung, and the
round event. Its drivers carry the calls out: `EvaluatorNode.invoke` / `ainvoke`
(`_evaluate`) and `RefineMiddleware.after_model` / `aafter_model`, each through
`drive` or `adrive`.
"""

from __future__ import annotations

import logging
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from langgraph_refine._decisions._ladder import next_rung, rung_prices
from langgraph_refine._decisions._options import LoopOptions, criteria_list
from langgraph_refine._decisions._regressions import with_regressions
from langgraph_refine._decisions._strategy import Choice, MoveStats, choose_next
from langgraph_refine._errors import Unjudged
from langgraph_refine._events import RoundEvent, round_event
from langgraph_refine._result import best_attempt
from langgraph_refine._state import (
    Attempt,
    Evaluation,
    Judgment,
    NoJudgment,
    StopReason,
    Strategy,
    Usage,
)
from langgraph_refine._stop_rules import BUDGET_STOP, CONFIRMABLE_STOPS, needs_confirmation

logger = logging.getLogger("langgraph_refine")


@dataclass(frozen=True)
class Judge:
    """Judge these responses, in order.

    Answered with `(evaluations, spent)`: the evaluations made (fewer than the responses
    when the budget ran out after the last one) and the `Usage` the round's own calls
    have spent so far.
    """

    responses: tuple[str, ...]


@dataclass(frozen=True)
class Confirm:
    """Judge this response once more.

    Answered with `(evaluation, spent)`: the `Evaluation`, or None when the budget
    refused it, and the round's `Usage` so far.
    """

    response: str


@dataclass(frozen=True)
class Exchange:
    """Trade this run's rounds for the strategy record: answered with the pooled counts.

    The driver answers None when the run keeps no record (no store, no key, not explore).
    """

    loop_id: str | None
    attempts: tuple[Attempt, ...]


Request = Judge | Confirm | Exchange
"""A call the round's flow needs carried out."""


REJUDGE_TRIES = 2
"""With `on_evaluator_error="retry"`, how many more times an unjudged response is judged
(each only while its judgment has tries left: see `_loop._judging`)."""


@dataclass
class Outcome:
    """What a round decided: the state update, its events, and the decision in parts.

    Attributes:
        update: The graph's state update (`attempts`, `usage`, `stop_reason`, ...).
        attempts: Every attempt so far, the one just evaluated last.
        stop_reason: Why the loop stops (None: it goes on).
        choice: The strategy's next move (None when the loop stops).
        events: The round's stream events, for the driver to send.
    """

    update: dict[str, Any]
    attempts: list[Attempt]
    stop_reason: StopReason | None
    choice: Choice | None = None
    events: list[RoundEvent] = field(default_factory=list)


Flow = Generator[Request, Any, Outcome]


def evaluate_round(
    state: Mapping[str, Any],
    pending: Attempt,
    options: LoopOptions,
    ladder: Sequence[str] = (),
) -> Flow:
    """The round after its generation: judge, confirm, record, decide what comes next.

    Args:
        state: The loop's state in the graph's terms (`task`, `attempts`, `stop_reason`,
            `loop_id`); the agent's is its `loop_view`.
        pending: The generated attempt (or a reviewer's edit: `move="edit"`), carrying
            its generation's usage.
        options: The run's options.
        ladder: With a ladder of models, the rungs' names, cheapest first.

    Returns:
        The round's `Outcome` (as the generator's return value).
    """
    replies = responses(pending)
    asked = tuple(response for response, preset in replies if preset is None)
    made, spent = (yield Judge(asked)) if asked else ([], Usage())
    made, spent = yield from _judged_again(asked, list(made), spent, options)
    evaluations = _in_order(replies, made)
    if not evaluations:  # the budget ran out before the first judgment
        return unevaluated(state, pending, spent)
    judged = judged_round(state, pending, evaluations, spent, options)
    if needs_confirmation(judged.stop_reason, options.confirm_pass):
        response = judged.attempt.response
        again, spent = yield Confirm(response)
        # A confirmation that cannot be made meets `on_evaluator_error` as any judgment.
        made, spent = yield from _judged_again(
            (response,), [again] if again else [], spent, options
        )
        judged = confirmed(pending, judged, made[0] if made else None, spent, options)
    record = None
    if not is_edit(pending):  # a reviewer's edit is not a model's move
        record = yield Exchange(state.get("loop_id"), tuple(judged.attempts))
    return decided(state, judged, options, record, ladder)


def _judged_again(
    asked: tuple[str, ...], made: list[Judgment], spent: Usage, options: LoopOptions
) -> Generator[Request, Any, tuple[list[Judgment], Usage]]:
    """The judgments once `on_evaluator_error` has had its say on the unjudged ones.

    `"retry"` asks for each unjudged response's judgment again (a model call like any,
    counted in the budget) up to `REJUDGE_TRIES` times; `"skip"` keeps it unjudged;
    `"raise"` raises `Unjudged`.
    """
    for _ in range(REJUDGE_TRIES if options.on_evaluator_error == "retry" else 0):
        missing = [i for i, judgment in enumerate(made) if isinstance(judgment, NoJudgment)]
        if not missing:
            break
        again, spent = yield Judge(tuple(asked[i] for i in missing))
        for i, judgment in zip(missing, again, strict=False):
            made[i] = judgment
        if len(again) < len(missing):  # the budget ran out
            break
    for judgment in made:
        if isinstance(judgment, NoJudgment):
            _raise_if_asked(judgment, options)
    return made, spent


def _raise_if_asked(judgment: NoJudgment, options: LoopOptions) -> None:
    """With `on_evaluator_error="raise"`, an unjudged response stops the run."""
    if options.on_evaluator_error == "raise":
        raise Unjudged(judgment.reason) from judgment.cause


def with_criteria(state: Mapping[str, Any], options: LoopOptions) -> Mapping[str, Any]:
    """The state the evaluators see: the run's criteria (the options', then the request's).

    LLM judges read them from `state["criteria"]` (`evaluators._base.request_criteria`).
    """
    if not options.criteria:
        return state
    return {**state, "criteria": [*options.criteria, *criteria_list(state.get("criteria"))]}


def report(name: str, outcome: Outcome) -> list[RoundEvent]:
    """Log the round; return its events for the driver to send."""
    for event in outcome.events:
        best, score = event["best_score"], event["score"]
        logger.info(
            "%s round %d: score=%.3f verdict=%s best=%.3f%s",
            name,
            event["iteration"],
            score if score is not None else float("nan"),
            event["verdict"] if score is not None else f"unjudged ({event.get('error')})",
            best if best is not None else float("nan"),
            f" -> stop ({outcome.stop_reason})" if outcome.stop_reason else "",
        )
    return outcome.events


def _in_order(replies: list[tuple[str, Evaluation | None]], made: list[Judgment]) -> list[Judgment]:
    """Each response's evaluation, in order: its preset one or the next judgment made.

    Stops at the first response left unjudged (the budget ran out there).
    """
    made_left = iter(made)
    evaluations: list[Judgment] = []
    for _, preset in replies:
        evaluation = preset if preset is not None else next(made_left, None)
        if evaluation is None:
            break
        evaluations.append(evaluation)
    return evaluations


def unevaluated(state: Mapping[str, Any], pending: Attempt, spent: Usage) -> Outcome:
    """The round the budget stopped before its evaluation: the attempt kept, unscored."""
    logger.info("budget exhausted before evaluating attempt %d", pending.index)
    attempt = pending.model_copy(update={"usage": pending.usage + spent})
    # A reviewer's edit stays the result, unscored; anything else is a budget stop.
    stop_reason: StopReason = "edited" if is_edit(pending) else BUDGET_STOP
    update = {
        "attempts": [attempt],
        "pending": None,
        "usage": attempt.usage,  # the generation's and this step's
        "stop_reason": stop_reason,
    }
    return Outcome(update, [*(state.get("attempts") or []), attempt], stop_reason)


def judged_round(
    state: Mapping[str, Any],
    pending: Attempt,
    evaluations: list[Judgment],
    spent: Usage,
    options: LoopOptions,
) -> _Judged:
    """The evaluated attempt, the attempts with it, and the stop rules' decision."""
    for evaluation in evaluations:
        if not isinstance(evaluation, Evaluation | NoJudgment):  # a custom evaluator's mistake
            raise TypeError(f"evaluator returned {type(evaluation).__name__}; return an Evaluation")
    earlier = list(state.get("attempts") or [])
    attempt = with_regressions(
        _choose_candidate(pending, evaluations, pending.usage + spent), earlier
    )
    if not is_edit(pending):
        attempt = _trust_noted(attempt, options)
    attempts = [*earlier, attempt]
    # A reviewer's edit ends the loop whatever it scores; other attempts meet the rules.
    stop_reason: StopReason | None = (
        "edited" if is_edit(pending) else options.rules.decide(attempts)
    )
    if stop_reason is None and len(evaluations) < len(responses(pending)):
        stop_reason = BUDGET_STOP  # it ran out while judging the candidates
    if stop_reason is None and unjudged_in_a_row(attempts) >= UNJUDGED_STOP:
        stop_reason = "unjudged"  # a judge that cannot judge: more answers would cost more
    return _Judged(attempt, attempts, stop_reason)


UNJUDGED_STOP = 2
"""Attempts in a row left unjudged after which the loop stops (`stop_reason="unjudged"`)."""


def unjudged_in_a_row(attempts: Sequence[Attempt]) -> int:
    """How many of the latest attempts in a row the evaluator could not judge."""
    count = 0
    for attempt in reversed(attempts):
        if attempt.evaluation is not None or attempt.error is None:
            break
        count += 1
    return count


def _trust_noted(attempt: Attempt, options: LoopOptions) -> Attempt:
    """The attempt, with `details["untrusted_stop"]` when `require_calibration` refused its stop.

    The result reads it (`metadata["untrusted_pass"]`): a run that went on past a PASS
    it did not trust says so.
    """
    evaluation = attempt.evaluation
    if evaluation is None or not options.rules.distrusted(evaluation):
        return attempt
    refused = options.rules.automatic_stop(evaluation)
    if refused is None:
        return attempt
    details = {**evaluation.details, "untrusted_stop": refused}
    return attempt.model_copy(
        update={"evaluation": evaluation.model_copy(update={"details": details})}
    )


def confirmed(
    pending: Attempt,
    judged: _Judged,
    again: Judgment | None,
    spent: Usage,
    options: LoopOptions,
) -> _Judged:
    """The round after its confirming judgment (`confirm_pass`).

    If the second judgment also stops the loop, the first stands (with the second in
    `details["confirmation"]`); if not, the attempt carries the second judgment (the
    first in `details["first_judgment"]`) and the rules decide again, so the loop goes
    on with the second judgment's feedback. With no budget left for the second
    judgment, the loop stops on the budget; when the second judgment cannot be made
    (`NoJudgment`), the first stands, with the reason in `details["confirmation"]`.
    """
    first = judged.attempt.evaluation
    if first is None:  # only a judged attempt's stop is confirmed
        return judged
    usage = pending.usage + spent  # the generation's, both judgments'
    if again is None or isinstance(again, NoJudgment):
        why = "the budget ran out" if again is None else again.reason
        details = {**first.details, "confirmation": f"not made: {why}"}
        attempt = judged.attempt.model_copy(
            update={"evaluation": first.model_copy(update={"details": details}), "usage": usage}
        )
        stop = BUDGET_STOP if again is None else judged.stop_reason
        return _Judged(attempt, [*judged.attempts[:-1], attempt], stop)
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
) -> Outcome:
    """The round's outcome: the evaluated attempt, the stop reason, the next move and rung."""
    attempt, attempts, stop_reason = judged
    # The rung first: what explore's record says of a move depends on the model making it.
    rung = _next_rung(attempts, ladder, options, record) if ladder else None
    moving = ladder[rung] if rung is not None else None
    choice: Choice | None = None
    if stop_reason is None and attempt.evaluation is None:
        choice = after_unjudged(options.strategy, attempts)
    elif stop_reason is None:
        choice = choose_next(options.strategy, attempts, state["task"], record=record, rung=moving)
    update: dict[str, Any] = {
        "attempts": [attempt],
        "pending": None,
        "usage": attempt.usage,  # the generation's and this step's
        "refine_from": choice.parent if choice is not None else None,
        "next_move": choice.move if choice is not None else None,
    }
    if stop_reason is not None or state.get("stop_reason") is not None:
        update["stop_reason"] = stop_reason
    if rung is not None:  # also when the loop stops: a reviewer's `revise` takes this rung
        update["rung"] = rung
    event = round_event(options.name, attempt, best_attempt(attempts))
    return Outcome(update, attempts, stop_reason, choice, [event])


def after_unjudged(strategy: Strategy, attempts: Sequence[Attempt]) -> Choice:
    """The next move after a round its evaluator could not judge.

    Nothing was learned of the unjudged attempt, so the loop goes on from what it knows:
    it refines the best judged attempt, or samples afresh when none was judged (and
    always with `strategy="sample"`).
    """
    best = best_attempt(attempts)
    if strategy == "sample" or best is None:
        return Choice("sample", None)
    return Choice("refine", best.index)


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


def is_edit(pending: Attempt) -> bool:
    """True when the pending attempt is a reviewer's edit (see `ReviewNode.apply`)."""
    return pending.move == "edit"


class _Judged(NamedTuple):
    attempt: Attempt
    attempts: list[Attempt]
    stop_reason: StopReason | None


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


def _choose_candidate(pending: Attempt, evaluations: list[Judgment], usage: Usage) -> Attempt:
    """The pending attempt carrying its best candidate (by the best-result rule) and usage.

    An unjudged response keeps `evaluation` None and the reason in `error`; among
    candidates the best judged one is chosen (the first, unjudged, when none was judged).
    """
    if not pending.candidates:
        return pending.model_copy(update={**_judgment(evaluations[0]), "usage": usage})
    judged = [_judgment(e)["evaluation"] for e in evaluations]
    candidates = [
        c.model_copy(update={"evaluation": judged[i] if i < len(judged) else None})
        for i, c in enumerate(pending.candidates)
    ]
    ranked = [
        Attempt(index=i, response=c.response, evaluation=c.evaluation)
        for i, c in enumerate(candidates)
    ]
    best = best_attempt(ranked)
    chosen = candidates[best.index if best is not None else 0]
    return pending.model_copy(
        update={
            "response": chosen.response,
            "evaluation": chosen.evaluation,
            "error": None if best is not None else _judgment(evaluations[0])["error"],
            "output": chosen.output,
            "reasoning": chosen.reasoning,
            "edits": chosen.edits,
            "candidates": candidates,
            "usage": usage,
        }
    )


def _judgment(judgment: Judgment) -> dict[str, Any]:
    """An attempt's `evaluation` and `error` for one judgment."""
    if isinstance(judgment, NoJudgment):
        return {"evaluation": None, "error": judgment.reason}
    return {"evaluation": judgment, "error": None}

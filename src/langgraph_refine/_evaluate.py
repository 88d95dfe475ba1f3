"""The evaluate step: judge the attempt, record it, decide whether to stop and what comes next.

After the evaluation the stop rules decide (`_stop_rules`); if the loop goes on, the
strategy picks what the next round refines (`_strategy`). Both land in state in the same
update, so one conditional edge per round is enough to route the loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from typing import Any, Generic, NamedTuple, TypeVar

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
from langgraph.types import Command, RetryPolicy

from langgraph_refine._budget import BudgetStop
from langgraph_refine._errors import RefineError
from langgraph_refine._ladder import cost_per_call, next_rung
from langgraph_refine._options import LoopOptions
from langgraph_refine._record import aexchange, compose_key, exchange, run_record
from langgraph_refine._result import best_attempt
from langgraph_refine._specs import SpecError, run_judge_model
from langgraph_refine._state import (
    Attempt,
    Evaluation,
    RefineState,
    StopReason,
    Usage,
    plain_writes,
    revive_state,
)
from langgraph_refine._step import Step, emit, round_event, run_options
from langgraph_refine._stop_rules import BUDGET_STOP, CONFIRMABLE_STOPS, needs_confirmation
from langgraph_refine._strategy import MoveStats, choose_next
from langgraph_refine.evaluators._base import BaseEvaluator, EvaluatorLike
from langgraph_refine.evaluators._combine import as_evaluator
from langgraph_refine.evaluators._from_specs import build_evaluators

logger = logging.getLogger("langgraph_refine")

StateT = TypeVar("StateT", bound=RefineState)


class EvaluatorNode(Runnable[StateT, Any], Generic[StateT]):
    """Evaluates the pending attempt, records it, and decides whether the loop stops.

    Writes the evaluated attempt to `attempts`, the spent usage to `usage`, the
    `stop_reason` chosen by the stop rules (None to go on) and, when the loop goes on,
    `refine_from` and `next_move`: the attempt the next round refines (None for a fresh
    sample) and the kind of move (the strategy's choice). Emits a custom stream event
    `{"type": "round", ...}` per evaluated attempt. After a generate step stopped by the
    budget (no pending attempt, a stop reason set) it passes the state through unchanged.

    Args:
        evaluator: A callable, chat model (LLM judge), evaluator object or list of them.
        options: The loop's options (stop rules, budget, strategy, name).
        retry_policy: The retry policy the node runs under.
        routes: Node names for `"refine"` and `"stop"`. When given, the node routes the
            loop itself (it returns a `Command` with `goto`), so the graph needs no
            conditional edge after it; without, route with `route_after_evaluation`.
        judge_model: The model of a `judge` check a run asks for in its context without
            naming a `judge_model` (see `RefineContext`).
        record_model: The generator's model as the strategy record's key names it (see
            `langgraph_refine._record`); with a store, explore keeps a record under
            `"<record_model>|<evaluator kind>"`. None: only with `record_key=` set.
        ladder: With a ladder of models, the rungs' model names, cheapest first: the
            node then writes `rung`, the rung of the next attempt (see `_ladder`).
        **settings: Shorthand for `LoopOptions` and `StopRules` fields
            (`target_score=1.0, max_iterations=3`, ...).

    Example:
        >>> node = EvaluatorNode(lambda response, state: 1.0)
        >>> from langgraph_refine import Attempt
        >>> update = node.invoke({"task": "t", "attempts": [],
        ...                       "pending": Attempt(index=0, response="r")})
        >>> update["stop_reason"]
        'target_reached'
    """

    def __init__(
        self,
        evaluator: EvaluatorLike,
        options: LoopOptions | None = None,
        *,
        retry_policy: RetryPolicy | Sequence[RetryPolicy] | None = None,
        routes: Mapping[str, str] | None = None,
        judge_model: BaseChatModel | None = None,
        record_model: str | None = None,
        ladder: Sequence[str] = (),
        **settings: Any,
    ) -> None:
        self.evaluator: BaseEvaluator = as_evaluator(evaluator)
        self.record_model = record_model
        self.ladder = list(ladder)
        self.options = LoopOptions.build(options, **settings)
        self.retry_policy = retry_policy
        self.routes = dict(routes) if routes is not None else None
        self.judge_model = judge_model
        self._run_evaluators: dict[Any, BaseEvaluator] = {}

    def evaluator_for(self, options: LoopOptions) -> BaseEvaluator:
        """The evaluator of a run: the check its context asks for, else the node's own.

        Raises:
            SpecError: If the run's `judge` check has no model to run on.
        """
        if options.checks is None:
            return self.evaluator
        # Keyed by content too: a spec's file may change between runs.
        checks = tuple((c.text, repr(c.argument)) for c in options.checks)
        key = (checks, options.judge_model, options.max_tokens)
        built = self._run_evaluators.get(key)
        if built is None:
            built = as_evaluator(build_evaluators(options.checks, lambda: self._judge(options)))
            if len(self._run_evaluators) >= 64:  # a served graph lives long: stay bounded
                self._run_evaluators.clear()
            self._run_evaluators[key] = built
        return built

    def record_key(self, options: LoopOptions) -> str | None:
        """The key of the run's strategy record: `record_key`, else model and evaluator kind.

        The evaluator is the run's own (a check its context asks for) when it has one, so
        runs judged differently keep different records. None (no record) when neither a
        `record_key` nor the generator's model (`record_model`) is known.
        """
        if options.record_key is not None or self.record_model is None:
            return options.record_key
        try:
            evaluator = self.evaluator_for(options)
        except SpecError:  # the evaluation itself reports it
            return None
        return compose_key(self.record_model, evaluator)

    def _judge(self, options: LoopOptions) -> BaseChatModel:
        if options.judge_model is not None:
            model: BaseChatModel = run_judge_model(options.judge_model, options.max_tokens)
            return model
        if self.judge_model is None:
            raise SpecError(
                "the run's 'judge' check needs a model: set judge_model in the run's context "
                "(this graph's generator is not a chat model)"
            )
        return self.judge_model

    def _route(self, state: Mapping[str, Any], update: dict[str, Any]) -> Any:
        """The update, or with `routes` a `Command` that also goes where the loop goes next."""
        stop = update.get("stop_reason", state.get("stop_reason"))
        update = plain_writes(update)
        if self.routes is None:
            return update
        return Command(update=update, goto=self.routes["stop" if stop else "refine"])

    def _begin(
        self, state: Mapping[str, Any], config: RunnableConfig | None
    ) -> tuple[Attempt, Step, LoopOptions, BaseEvaluator]:
        pending = state.get("pending")
        if pending is None:
            raise RefineError(
                "EvaluatorNode found no pending attempt in state['pending']; "
                "run a GeneratorNode before it"
            )
        options = run_options(self.options)
        pending = _read_as_object(pending, options)
        step = Step(
            options,
            state,
            config,
            node="evaluate",
            index=pending.index,
            retry_policy=self.retry_policy,
            pending_usage=pending.usage,
        )
        return pending, step, options, self.evaluator_for(options)

    def _runnable(
        self, state: Mapping[str, Any], step: Step, evaluator: BaseEvaluator
    ) -> Runnable[str, Evaluation] | None:
        """The evaluation as a child run `<loop>:evaluate`, when a callback handler listens.

        Handlers (LangSmith, ...) then see one run per evaluation with the iteration and
        best score in its metadata and the `Evaluation` as output; a judge's model call
        nests under it. Without listeners the evaluator is called directly (cheaper).
        """
        if not step.listened:
            return None

        async def aevaluate(response: str) -> Evaluation:
            return await evaluator.aevaluate(response, state)

        return RunnableLambda(lambda response: evaluator.evaluate(response, state), aevaluate)

    def invoke(self, input: StateT, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        """Evaluate the pending attempt (sync): a state update, or a `Command` with routes."""
        state = revive_state(input)
        if state.get("pending") is None and state.get("stop_reason"):
            return self._route(state, {})
        pending, step, options, evaluator = self._begin(state, config)
        traced = self._runnable(state, step, evaluator)
        # A judge's invocation is a model call, counted even if no callback sees one.
        judge = evaluator.calls_model
        evaluations: list[Evaluation] = []
        try:
            for response, preset in _responses(pending):
                if preset is not None:  # not a valid object: already FAIL (see _typed)
                    evaluations.append(preset)
                elif traced is None:
                    evaluations.append(
                        step.call(evaluator.evaluate, response, state, model_call=judge)
                    )
                else:
                    evaluations.append(
                        step.call(traced.invoke, response, step.config, model_call=judge)
                    )
        except BudgetStop as stop:
            if not evaluations:
                return self._route(state, self._unevaluated(state, pending, step, stop))
        except Exception as exc:
            step.on_error(exc, "evaluator")
            raise
        judged = self._judged(state, pending, evaluations, step, options)
        if needs_confirmation(judged.stop_reason, options.confirm_pass):
            try:
                again: Evaluation | None = step.call(
                    evaluator.evaluate, judged.attempt.response, state, model_call=judge
                )
            except BudgetStop:
                again = None
            except Exception as exc:
                step.on_error(exc, "evaluator")
                raise
            judged = self._confirmed(pending, judged, again, step, options)
        found = _record(state, judged.attempts, options, self.record_key(options))
        record = exchange(*found) if found else None
        return self._route(state, self._finish(state, judged, options, record))

    async def ainvoke(
        self, input: StateT, config: RunnableConfig | None = None, **kwargs: Any
    ) -> Any:
        """Evaluate the pending attempt (async): a state update, or a `Command` with routes."""
        state = revive_state(input)
        if state.get("pending") is None and state.get("stop_reason"):
            return self._route(state, {})
        pending, step, options, evaluator = self._begin(state, config)
        traced = self._runnable(state, step, evaluator)
        responses = _responses(pending)
        judge = evaluator.calls_model  # see invoke

        async def one(item: tuple[str, Evaluation | None]) -> Evaluation:
            response, preset = item
            if preset is not None:  # not a valid object: already FAIL (see _typed)
                return preset
            if traced is None:
                return await step.acall(evaluator.aevaluate, response, state, model_call=judge)
            return await step.acall(traced.ainvoke, response, step.config, model_call=judge)

        evaluations: list[Evaluation] = []
        try:
            # Candidates are judged concurrently unless a budget must be checked between
            # the judge calls.
            if len(responses) > 1 and options.budget is None:
                evaluations = list(await asyncio.gather(*(one(r) for r in responses)))
            else:
                for response in responses:
                    evaluations.append(await one(response))
        except BudgetStop as stop:
            if not evaluations:
                return self._route(state, self._unevaluated(state, pending, step, stop))
        except Exception as exc:
            await step.aon_error(exc, "evaluator")
            raise
        judged = self._judged(state, pending, evaluations, step, options)
        if needs_confirmation(judged.stop_reason, options.confirm_pass):
            try:
                again: Evaluation | None = await step.acall(
                    evaluator.aevaluate, judged.attempt.response, state, model_call=judge
                )
            except BudgetStop:
                again = None
            except Exception as exc:
                await step.aon_error(exc, "evaluator")
                raise
            judged = self._confirmed(pending, judged, again, step, options)
        found = _record(state, judged.attempts, options, self.record_key(options))
        record = await aexchange(*found) if found else None
        return self._route(state, self._finish(state, judged, options, record))

    def _unevaluated(
        self, state: Mapping[str, Any], pending: Attempt, step: Step, stop: BudgetStop
    ) -> dict[str, Any]:
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

    def _judged(
        self,
        state: Mapping[str, Any],
        pending: Attempt,
        evaluations: list[Evaluation],
        step: Step,
        options: LoopOptions,
    ) -> _Judged:
        """The evaluated attempt, the attempts with it, and the stop rules' decision."""
        for evaluation in evaluations:
            if not isinstance(evaluation, Evaluation):  # a custom BaseEvaluator's mistake
                raise TypeError(
                    f"evaluator returned {type(evaluation).__name__}; return an Evaluation"
                )
        usage = step.meter.delta()
        attempt = _choose_candidate(pending, evaluations, pending.usage + usage)
        attempts = [*(state.get("attempts") or []), attempt]
        # A reviewer's edit ends the loop whatever it scores; other attempts meet the rules.
        stop_reason: StopReason | None = (
            "edited" if is_edit(state) else options.rules.decide(attempts)
        )
        if stop_reason is None and len(evaluations) < len(_responses(pending)):
            stop_reason = BUDGET_STOP  # it ran out while judging the candidates
        return _Judged(attempt, attempts, stop_reason)

    def _confirmed(
        self,
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

    def _finish(
        self,
        state: Mapping[str, Any],
        judged: _Judged,
        options: LoopOptions,
        record: Mapping[str, MoveStats] | None,
    ) -> dict[str, Any]:
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
        if self.ladder and choice is not None:
            update["rung"] = _next_rung(attempts, self.ladder, options, record)
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
        prices=cost_per_call(attempts),
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


def _record(
    state: Mapping[str, Any], attempts: list[Attempt], options: LoopOptions, key: str | None
) -> Any:
    """The strategy record's update for this round; none for an edit (not a model's move)."""
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


def _read_as_object(pending: Attempt, options: LoopOptions) -> Attempt:
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


def _responses(pending: Attempt) -> list[tuple[str, Evaluation | None]]:
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

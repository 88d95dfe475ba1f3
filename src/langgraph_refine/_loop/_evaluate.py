"""The evaluate step: judge the attempt, record it, decide whether to stop and what comes next.

After the evaluation the stop rules decide (`_stop_rules`); if the loop goes on, the
strategy picks what the next round refines (`_strategy`). Both land in state in the same
update, so one conditional edge per round is enough to route the loop.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, Generic

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import Runnable, RunnableConfig
from langgraph.graph import END
from langgraph.types import Command, RetryPolicy

from langgraph_refine._calls._run_models import climbing, ladder_names
from langgraph_refine._calls._specs import SpecError, run_judge_model
from langgraph_refine._decisions._options import LoopOptions
from langgraph_refine._decisions._round import (
    Exchange,
    Flow,
    Outcome,
    evaluate_round,
    read_as_object,
    with_criteria,
)
from langgraph_refine._errors import RefineError
from langgraph_refine._loop._ends import FinalizeNode
from langgraph_refine._loop._judging import RoundCalls
from langgraph_refine._loop._step import Step, run_options
from langgraph_refine._loop._thread import current_run
from langgraph_refine._records._record import (
    RecordUpdate,
    compose_key,
    run_record,
)
from langgraph_refine._state import (
    Attempt,
    StateT,
    Usage,
    add_usage,
    plain_writes,
    revive_state,
)
from langgraph_refine.evaluators._base import BaseEvaluator, EvaluatorLike
from langgraph_refine.evaluators._combine import as_evaluator
from langgraph_refine.evaluators._from_specs import build_evaluators

logger = logging.getLogger("langgraph_refine")


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
        retry_policy: The policy a failed evaluator call is retried under, inside the
            node (`Step.call`), so the budget counts every call sent; give it here
            only, not also to `add_node` (the calls would be retried twice).
        routes: Node names for `"refine"` and `"stop"`. When given, the node routes the
            loop itself (it returns a `Command` with `goto`), so the graph needs no
            conditional edge after it; without, route with `route_after_evaluation`.
        judge_model: The model of a `judge` check a run asks for in its context without
            naming a `judge_model` (see `RefineContext`).
        record_model: The generator's model as the strategy record's key names it (see
            `langgraph_refine._records._record`); with a store, explore keeps a record under
            `"<record_model>|<evaluator kind>"`. None: only with `record_key=` set.
        ladder: With a ladder of models, the rungs' model names, cheapest first: the
            node then writes `rung`, the rung of the next attempt (see `_ladder`).
        records_run: The state has `ended_in` (`ServedKeys`): the run that stops the loop
            is written there.
        end: With `routes`, the loop's end: the node then ends the run itself when it
            stops the loop and the end needs no step of its own
            (`FinalizeNode.end_in_step`), and goes to `END`; else it goes to the
            `"stop"` route (the end's own step).
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
        records_run: bool = False,
        end: FinalizeNode | None = None,
        **settings: Any,
    ) -> None:
        self.end = end
        self.evaluator: BaseEvaluator = as_evaluator(evaluator)
        self.record_model = record_model
        self.ladder = list(ladder)
        self.options = LoopOptions.build(options, **settings)
        self.retry_policy = retry_policy
        self.routes = dict(routes) if routes is not None else None
        self.judge_model = judge_model
        self.records_run = records_run
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
        record_model = ">".join(ladder_names(options.models, self.ladder)) or self.record_model
        if options.record_key is not None or record_model is None:
            return options.record_key
        try:
            evaluator = self.evaluator_for(options)
        except SpecError:  # the evaluation itself reports it
            return None
        return compose_key(record_model, evaluator)

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

    def _route(
        self,
        state: Mapping[str, Any],
        config: RunnableConfig | None,
        outcome: Outcome | None = None,
    ) -> Any:
        """The update, or with `routes` a `Command` that also goes where the loop goes next.

        With an `end`, a stop ends the run in this step when its end needs no step of
        its own (`FinalizeNode.end_in_step`).
        """
        update = outcome.update if outcome is not None else {}
        stop = update.get("stop_reason", state.get("stop_reason"))
        ended = None
        if stop and self.end is not None and self.routes is not None:
            ended = self.end.end_in_step(_after(state, outcome), config)
        update = plain_writes(update)
        if stop and self.records_run:
            update["ended_in"] = current_run()
        if self.routes is None:
            return update
        if ended is not None:
            return Command(update=update | ended, goto=END)
        return Command(update=update, goto=self.routes["stop" if stop else "refine"])

    def _begin(self, state: Mapping[str, Any], config: RunnableConfig | None) -> _Calls:
        pending = state.get("pending")
        if pending is None:
            raise RefineError(
                "EvaluatorNode found no pending attempt in state['pending']; "
                "run a GeneratorNode before it"
            )
        options = run_options(self.options, state)
        pending = read_as_object(pending, options)
        step = Step(
            options,
            state,
            config,
            node="evaluate",
            index=pending.index,
            retry_policy=self.retry_policy,
            pending_usage=pending.usage,
        )
        return _Calls(self, state, pending, step, options)

    def invoke(self, input: StateT, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        """Evaluate the pending attempt (sync): a state update, or a `Command` with routes."""
        state = revive_state(input)
        if state.get("pending") is None and state.get("stop_reason"):
            return self._route(state, config)
        calls = self._begin(state, config)
        outcome = calls.run_round(calls.flow())
        return self._route(state, config, calls.sent(outcome))

    async def ainvoke(
        self, input: StateT, config: RunnableConfig | None = None, **kwargs: Any
    ) -> Any:
        """Evaluate the pending attempt (async): a state update, or a `Command` with routes."""
        state = revive_state(input)
        if state.get("pending") is None and state.get("stop_reason"):
            return self._route(state, config)
        calls = self._begin(state, config)
        outcome = await calls.arun_round(calls.flow())
        return self._route(state, config, calls.sent(outcome))


def _after(state: Mapping[str, Any], outcome: Outcome | None) -> dict[str, Any]:
    """The loop's state once the round's update is applied (its reducers' work done here)."""
    if outcome is None:  # a step passing a budget stop through: nothing changed
        return dict(state)
    update = outcome.update
    usage = add_usage(state.get("usage"), update.get("usage") or Usage())
    return {**state, **update, "attempts": outcome.attempts, "usage": usage}


class _Calls(RoundCalls):
    """The evaluate step's answers to the round's requests (see `_judging.RoundCalls`)."""

    def __init__(
        self,
        node: EvaluatorNode[Any],
        state: Mapping[str, Any],
        pending: Attempt,
        step: Step,
        options: LoopOptions,
    ) -> None:
        self.node, self.pending, self.options = node, pending, options
        super().__init__(
            step, with_criteria(state, options), node.evaluator_for(options), options.name
        )

    def flow(self) -> Flow:
        ladder = climbing(self.options.models, self.node.ladder)  # a run's own, else the graph's
        return evaluate_round(self.state, self.pending, self.options, ladder)

    def record(self, request: Exchange) -> tuple[Any, RecordUpdate] | None:
        """The store and this round's record update, when the run keeps a record."""
        options = self.options
        return run_record(
            request.loop_id, request.attempts, options, lambda: self.node.record_key(options)
        )

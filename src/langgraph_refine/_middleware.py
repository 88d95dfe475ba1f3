"""`RefineMiddleware`: the refine loop inside a LangChain agent built with `create_agent`.

The agent keeps its own loop (model, tools, model, ...). When it gives a final answer (an
AI message without tool calls), this middleware evaluates it and either sends the agent
back to its model with the feedback, as a human message, or ends the run with the best
answer as the last message. The loop's options (`LoopOptions`), stop rules, the
best-attempt rule, the budget, the record, the prompts and the human review are the
graph's own code; the agent's state keys and turns are in `_agent_turns`.

The hooks, in the agent's graph:

- `before_agent`: starts a loop for this run (the task is the last human message);
- `before_model`: checks the budget before every model call;
- `wrap_model_call`: counts the call and its tokens;
- `after_model`: evaluates a final answer and decides (refine, or stop);
- `after_agent`: the human review (its own step, so resuming it repeats no model call)
  and the end of the loop.

Each async hook is a thin shell around the same steps as its sync twin: only the
evaluator's and the store's calls differ.

Needs the `agents` extra: `pip install 'langgraph-refine[agents]'`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from contextlib import suppress
from typing import Any, Unpack

try:
    from langchain.agents.middleware import (
        AgentMiddleware,
        ExtendedModelResponse,
        ModelRequest,
        ModelResponse,
        hook_config,
    )
except ImportError as exc:  # the optional dependency is missing
    raise ImportError(
        "RefineMiddleware needs LangChain's agents (langchain>=1.0), which is not installed: "
        "pip install 'langgraph-refine[agents]'"
    ) from exc

from langgraph.runtime import Runtime

from langgraph_refine import _agent_loop as turns
from langgraph_refine._agent_loop import (
    LOOP_NAME,
    AgentLoop,
    Edit,
    RefineAgentState,
    resolve_evaluator,
)
from langgraph_refine._budget import BudgetStop, metered
from langgraph_refine._options import AGENT, AgentOptions, LoopOptions
from langgraph_refine._record import aexchange, exchange
from langgraph_refine._result import RefineResult
from langgraph_refine._review import ReviewNode, require_checkpointer
from langgraph_refine._state import Evaluation
from langgraph_refine._stop_rules import StopRules
from langgraph_refine.evaluators._base import EvaluatorLike


class RefineMiddleware(AgentMiddleware[RefineAgentState, Any, Any]):
    """The evaluator-optimizer loop as middleware for `langchain.agents.create_agent`.

    Each final answer of the agent (an AI message without tool calls) is evaluated. If no
    stop rule holds, the feedback goes back to the agent as a human message and the agent
    runs its model again, tools still available. When the loop stops, the agent's last
    message is the best answer (a `PASS` verdict outranks any score; ties go to the
    earlier answer), once: the other answers and the feedback turns are removed from the
    conversation (`keep_evaluation_turns=True` keeps them).
    `result(state)` turns the agent's final state into a `RefineResult`.

    Args:
        evaluator: A callable `(response, state) -> float | Evaluation` (sync or async;
            `state` holds `task`, `attempts` and the agent's `messages`), a chat model
            (LLM judge), an evaluator from `langgraph_refine.evaluators`, a list of these
            (combined), or None for an LLM judge on `judge_model`.
        options: The loop's options, built once (`LoopOptions`), e.g. the same object
            handed to `create_refine_graph`; keywords override it. Its fields give every
            option (so its `strategy` is `"explore"` unless it says otherwise); those an
            agent does not take (`memory`, `select`, `edits`, ...) must keep their
            defaults.
        keep_evaluation_turns: False (default): when the loop stops, the run's answers
            and the feedback turns the loop added are removed from the conversation and
            the best answer is appended once, so the agent's history reads as the request,
            the tool calls, and the answer. True keeps every answer and feedback turn
            (the best answer is appended unless it is already the last message).
        **settings: The options an agent takes (`AgentOptions`), each a field of
            `LoopOptions` (its meaning and default), overriding `options`. In an agent:
            `judge_model` is the default LLM judge's model (a chat model or a
            `"provider:model"` string), required when `evaluator` is None: hooks that
            run after the model cannot see the agent's model, so there is no fallback.
            `target_score`, `max_iterations`, `patience` and `min_delta` are the stop
            rules, counted in answers. `budget` limits model calls (the agent's,
            tool-calling turns included, and the judge's), tokens and seconds, checked
            before every call; `on_budget_exhausted="raise"` raises
            `BudgetExhaustedError` carrying the best answer in `.result`.
            `human_review`: `"final"` or `"every_round"`, the graph's payload and
            actions (the agent needs a checkpointer). `strategy`: `"chain"` (default
            without `options`): the agent continues its conversation with the feedback;
            `"explore"`: the graph's rule, where a fresh sample answers the request again
            without seeing the earlier answers; with the agent's store
            (`create_agent(..., store=...)`) it keeps the strategy record there, so later
            runs start from what earlier ones learned; `"sample"`: every round answers
            afresh (best-of-N). `record_key`: the strategy record's key; by default the
            agent's model and the evaluator's kind, as in the graph.

    Raises:
        ValueError: If an option is outside its allowed range, or one an agent does not
            take is given (the message names it and says why).

    Example:
        >>> from langgraph_refine import RefineMiddleware
        >>> from langgraph_refine.evaluators import contains_all
        >>> refine = RefineMiddleware(contains_all(["1889", "330"]), max_iterations=2)
        >>> refine.stop_rules.max_iterations
        2

        Then `agent = create_agent(model, tools, middleware=[refine])`, and
        `refine.result(agent.invoke(...))` for the loop's `RefineResult`.
    """

    state_schema = RefineAgentState

    def __init__(
        self,
        evaluator: EvaluatorLike = None,
        *,
        options: LoopOptions | None = None,
        keep_evaluation_turns: bool = False,
        **settings: Unpack[AgentOptions],
    ) -> None:
        super().__init__()
        if options is None:  # an agent's own default: it continues its conversation
            settings = {"strategy": "chain", **settings}
        options = LoopOptions.build(options, surface=AGENT, **settings)
        review = (
            None
            if options.human_review is None
            else ReviewNode(
                options.human_review,
                on_budget_exhausted=options.on_budget_exhausted,
                name=LOOP_NAME,
            )
        )
        evaluator_ = resolve_evaluator(evaluator, options.judge_model)
        self.loop = AgentLoop(options, evaluator_, review, bool(keep_evaluation_turns))

    @property
    def stop_rules(self) -> StopRules:
        """The loop's stop rules (from its options)."""
        return self.loop.options.rules

    # -- before_agent and before_model: a new loop per run, the budget -------------------

    def before_agent(self, state: RefineAgentState, runtime: Runtime[Any]) -> dict[str, Any]:
        """Start a loop: the task is the last human message; earlier runs' attempts go.

        Raises:
            ValueError: With `human_review`, if the agent has no checkpointer (before
                any model call).
        """
        if self.loop.review is not None:
            require_checkpointer()
        return self.loop.start(state)

    async def abefore_agent(self, state: RefineAgentState, runtime: Runtime[Any]) -> dict[str, Any]:
        """Async twin of `before_agent`."""
        return self.before_agent(state, runtime)

    @hook_config(can_jump_to=["end"])
    def before_model(self, state: RefineAgentState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Stop the loop (no model call) when a budget limit is already reached."""
        return self.loop.budget_stop(state)

    @hook_config(can_jump_to=["end"])
    async def abefore_model(
        self, state: RefineAgentState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Async twin of `before_model`."""
        return self.before_model(state, runtime)

    # -- wrap_model_call: counting ---------------------------------------------------------

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ExtendedModelResponse[Any]:
        """Call the model and count the call, its tokens, cost and time in `refine_usage`.

        The model call runs under the loop's meter, like the graph's steps: it is checked
        and priced before it is sent (an unpriced model under `max_cost` is refused), and
        counted once even if the model bypasses LangChain's callbacks. A fresh sample (or
        a refinement of an earlier answer) does not show the model the answers it sets
        aside (see `refine_hidden_to`).
        """
        meter = self.loop.meter(request.state, carried=turns.FAILED_CALLS.pop(id(request), None))
        try:
            with metered(meter), meter.invocation() as done:
                response = done(handler(turns.shown(request)))
        except BudgetStop:
            return turns.refused(meter)
        except Exception:
            turns.carry(request, meter.delta())
            raise
        return turns.counted(response, meter, turns.model_of(request))

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ExtendedModelResponse[Any]:
        """Async twin of `wrap_model_call`."""
        meter = self.loop.meter(request.state, carried=turns.FAILED_CALLS.pop(id(request), None))
        try:
            with metered(meter), meter.invocation() as done:
                response = done(await handler(turns.shown(request)))
        except BudgetStop:
            return turns.refused(meter)
        except Exception:
            turns.carry(request, meter.delta())
            raise
        return turns.counted(response, meter, turns.model_of(request))

    # -- after_model: evaluate a final answer ----------------------------------------------

    @hook_config(can_jump_to=["model"])
    def after_model(self, state: RefineAgentState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Evaluate the agent's final answer; refine (back to the model) or stop."""
        turn = self.loop.turn(state)
        if turn is None:
            return None
        evaluation: Evaluation | None = None
        with metered(turn.meter), suppress(BudgetStop):
            evaluation = self.loop.evaluator.evaluate(turn.answer, turn.view)
        update, attempts = self.loop.attempt(state, turn, evaluation)
        kept = self.loop.record(state, getattr(runtime, "store", None), attempts)
        return self.loop.decide(state, update, attempts, exchange(*kept) if kept else None)

    @hook_config(can_jump_to=["model"])
    async def aafter_model(
        self, state: RefineAgentState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Async twin of `after_model`."""
        turn = self.loop.turn(state)
        if turn is None:
            return None
        evaluation: Evaluation | None = None
        with metered(turn.meter), suppress(BudgetStop):
            evaluation = await self.loop.evaluator.aevaluate(turn.answer, turn.view)
        update, attempts = self.loop.attempt(state, turn, evaluation)
        kept = self.loop.record(state, getattr(runtime, "store", None), attempts)
        return self.loop.decide(state, update, attempts, await aexchange(*kept) if kept else None)

    # -- after_agent: review and the end ---------------------------------------------------

    @hook_config(can_jump_to=["model"])
    def after_agent(self, state: RefineAgentState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Ask the human reviewer (if any), then refine again or end with the best answer.

        A reviewer's edit is evaluated (one more evaluator call, within the budget) and
        ends the loop with the edited text.

        Raises:
            BudgetExhaustedError: On a budget stop with `on_budget_exhausted="raise"`.
        """
        outcome = self.loop.review_outcome(state)
        if not isinstance(outcome, Edit):
            return outcome
        evaluation: Evaluation | None = None
        with metered(outcome.meter), suppress(BudgetStop):
            evaluation = self.loop.evaluator.evaluate(outcome.attempt.response, outcome.view)
        return self.loop.end_with_edit(state, outcome, evaluation)

    @hook_config(can_jump_to=["model"])
    async def aafter_agent(
        self, state: RefineAgentState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Async twin of `after_agent`."""
        outcome = self.loop.review_outcome(state)
        if not isinstance(outcome, Edit):
            return outcome
        evaluation: Evaluation | None = None
        with metered(outcome.meter), suppress(BudgetStop):
            evaluation = await self.loop.evaluator.aevaluate(outcome.attempt.response, outcome.view)
        return self.loop.end_with_edit(state, outcome, evaluation)

    def result(self, state: Mapping[str, Any]) -> RefineResult:
        """The loop's outcome from the agent's final state (what `invoke` returned).

        Args:
            state: The agent's output state, or `agent.get_state(config).values`.

        Returns:
            The `RefineResult` of the run's loop: value, score, stop reason, attempts, usage.
        """
        return self.loop.result(state)


__all__ = ["RefineAgentState", "RefineMiddleware"]

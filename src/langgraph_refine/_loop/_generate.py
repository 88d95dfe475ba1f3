"""The generate step: the next attempt, a fresh sample or a refinement of an earlier one.

Which attempt a round refines is the strategy's choice, written to state as
`refine_from` by the evaluate step (see `_strategy`); this step builds the prompt for
it (see `_prompts` and `_memory`) and calls the generator: a chat model, a graph or
runnable (such as a `create_agent` agent), or a plain callable that builds its own
prompt from the state.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Generic, NamedTuple

from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.runnables import Runnable, RunnableConfig
from langgraph.types import Overwrite, RetryPolicy

from langgraph_refine._calls._budget import BudgetStop, check_rungs_priced
from langgraph_refine._calls._models import message_text
from langgraph_refine._calls._retry import is_context_length_error
from langgraph_refine._calls._run_models import run_models
from langgraph_refine._decisions._edits import edit_text
from langgraph_refine._decisions._flows import CallFlow, adrive, drive
from langgraph_refine._decisions._memory import select_attempts
from langgraph_refine._decisions._next import NextAttempt, next_attempt
from langgraph_refine._decisions._options import LoopOptions
from langgraph_refine._decisions._prompts import (
    guided_prompt,
    refinement_messages,
    scaffolding,
    smallest_prompt,
)
from langgraph_refine._decisions._view import graph_view
from langgraph_refine._errors import ContextLengthError
from langgraph_refine._loop._adapters import GeneratorAdapter, OneGenerator, adapt, adapt_ladder
from langgraph_refine._loop._ends import Prepare, starts_run
from langgraph_refine._loop._step import Step, run_options
from langgraph_refine._result import RefineResult
from langgraph_refine._state import Attempt, StateT, plain_writes, revive_state
from langgraph_refine._stop_rules import BUDGET_STOP
from langgraph_refine._typed import OutputSchema, Reply

logger = logging.getLogger("langgraph_refine")


class _Ask(NamedTuple):
    """What the generation flow asks its driver for: `times` outputs of `prompt`."""

    prompt: list[BaseMessage]
    times: int


_Flow = CallFlow[_Ask, dict[str, Any]]


class _Round(NamedTuple):
    """One round's call: its step, candidates, prompt, rung, and how its reply is read."""

    next: NextAttempt  # what the answer is (`_next.next_attempt`): move, parent, edits
    step: Step
    calls: int
    prompt: list[BaseMessage]
    rung: int | None  # its place on the ladder (None without one)
    adapter: GeneratorAdapter
    options: LoopOptions  # the run's (the step's ask an edit round's call for text)


class GeneratorNode(Runnable[StateT, dict[str, Any]], Generic[StateT]):
    """Generates the next attempt: the first answer, a fresh sample, or a refinement.

    For a chat model, a fresh sample's prompt is the task; a refinement's prompt holds
    the task, the refined attempt and the earlier ones chosen by `memory`, each with its
    feedback, and any reviewer request. A graph or runnable generator gets the same
    prompt as `{"messages": [HumanMessage(...)]}` and answers with its last AI message.
    A callable generator receives the state and builds its own prompt.

    With `output_schema`, a chat model is asked for the object through the provider's
    structured output, and every prompt ends with the schema; a graph generator's
    `structured_response` is used when it has one, else its last message is parsed; a
    callable may return the object, a dict or JSON text. A reply that is not a valid
    object is kept, already evaluated FAIL with the validation errors (see `_typed`).
    Reasoning beside the answer is kept on `Attempt.reasoning`, out of `response`.

    Args:
        generator: A chat model, a runnable / compiled graph, or a callable
            `(state) -> str` (sync or async; it may return an `AIMessage`); or a
            ladder of them (a list, cheapest first: the state's `rung` picks one).
        options: The loop's options (memory, budget, prompt form, candidates, ...).
        retry_policy: The policy a failed generator call is retried under, inside the
            node (`Step.call`), so the budget counts every call sent; give it here
            rather than to `add_node`, which would retry the whole node as well.
        judge_calls: Model calls judging an answer takes (1 when the evaluator calls a
            model), or a function of the run's options giving them (a run may bring its
            own evaluator): a generation starts only when `max_calls` leaves room for
            them too, so the budget never pays for an answer no one can judge.
        prepare: Prepares the run this step starts (`_ends.starts_run`), in the same
            step: the factory's graph has no step before the first generation. None:
            an earlier step prepares the run (a custom topology's own).
        **settings: Shorthand for `LoopOptions` fields (`memory="last"`, ...).

    Example:
        >>> node = GeneratorNode(lambda state: "draft")
        >>> node.invoke({"task": "write", "attempts": []})["pending"]["response"]
        'draft'
    """

    def __init__(
        self,
        generator: OneGenerator | Sequence[Any],
        options: LoopOptions | None = None,
        *,
        retry_policy: RetryPolicy | Sequence[RetryPolicy] | None = None,
        judge_calls: int | Callable[[LoopOptions], int] = 0,
        prepare: Prepare | None = None,
        **settings: Any,
    ) -> None:
        self.judge_calls = judge_calls
        self.prepare = prepare
        self.rungs: list[GeneratorAdapter] = adapt_ladder(generator)
        self.adapter = self.rungs[0]
        self.generator = self.adapter.generator
        self.options = LoopOptions.build(options, **settings)
        self.retry_policy = retry_policy

    # -- prompts ---------------------------------------------------------------------

    def rungs_for(self, options: LoopOptions) -> list[GeneratorAdapter]:
        """The run's ladder: the models its context names (`models`), else the node's."""
        if not options.models:
            return self.rungs
        return [adapt(model) for model in run_models(options.models)]

    def rung(
        self, state: Mapping[str, Any], options: LoopOptions | None = None
    ) -> GeneratorAdapter:
        """The generator of the next attempt: the ladder's rung the state names (the first)."""
        return self._rung(state, options or run_options(self.options, state))[1]

    def _rung(
        self, state: Mapping[str, Any], options: LoopOptions
    ) -> tuple[int | None, GeneratorAdapter]:
        """The next attempt's place on the ladder (None without one) and its generator."""
        rungs = self.rungs_for(options)
        index = min(state.get("rung") or 0, len(rungs) - 1)
        return (index if len(rungs) > 1 else None), rungs[index]

    def prompt(
        self, state: Mapping[str, Any], options: LoopOptions | None = None
    ) -> list[BaseMessage]:
        """The messages a chat-model generator is sent for the next attempt."""
        options = options or self.options
        adapter = self.rung(state, options)
        upcoming = next_attempt(graph_view(state), options, takes_prompt=adapter.takes_prompt)
        return _round_prompt(state, options, adapter, upcoming)

    # -- the call ----------------------------------------------------------------------

    def _begin(self, state: Mapping[str, Any], config: RunnableConfig | None) -> _Round:
        options = run_options(self.options, state)
        rung, adapter = self._rung(state, options)
        if not state.get("attempts") and state.get("pending") is None:
            # Before the loop's first call: every rung it may climb to must be priceable.
            check_rungs_priced(options.budget, [r.generator for r in self.rungs_for(options)])
        if options.max_tokens is not None:
            adapter.check_max_tokens(options.max_tokens)
        upcoming = next_attempt(graph_view(state), options, takes_prompt=adapter.takes_prompt)
        # An edit round asks for text (the blocks), not the object: its call is untyped.
        asked = options if upcoming.edited is None else replace(options, output_schema=None)
        reserved = self.judge_calls(options) if callable(self.judge_calls) else self.judge_calls
        step = Step(
            asked,
            state,
            config,
            node="generate",
            index=upcoming.number,
            retry_policy=self.retry_policy,
            reserved_calls=reserved,  # never pay for an answer no one can judge
        )
        count = options.candidates
        if options.budget is not None and options.budget.max_calls is not None:
            # Sample only as many candidates as the call budget still allows (at least 1).
            left = options.budget.max_calls - step.meter.total().calls - reserved
            count = max(1, min(count, left))
        prompt = _round_prompt(state, options, adapter, upcoming) if adapter.takes_prompt else []
        return _Round(upcoming, step, count, prompt, rung, adapter, options)

    # Each call below is one generator invocation: `Step.call` counts it as a model call
    # when no callback saw one inside it (a plain callable, a client outside LangChain).

    def invoke(
        self, input: StateT, config: RunnableConfig | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        """Generate the next attempt (sync)."""
        started, state = self._start(revive_state(input))
        turn = self._begin(state, config)
        step, call = turn.step, turn.adapter.invoke

        def outputs(ask: _Ask) -> list[Any]:
            return [step.call(call, ask.prompt, state, step) for _ in range(ask.times)]

        return _joined(started, drive(self._generation(state, turn), outputs))

    async def ainvoke(
        self, input: StateT, config: RunnableConfig | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        """Generate the next attempt (async): the candidates concurrently."""
        started, state = self._start(revive_state(input))
        turn = self._begin(state, config)
        step, call = turn.step, turn.adapter.ainvoke

        async def outputs(ask: _Ask) -> list[Any]:
            if ask.times == 1:  # awaited directly: gather() would cost a task per round
                return [await step.acall(call, ask.prompt, state, step)]
            calls = (step.acall(call, ask.prompt, state, step) for _ in range(ask.times))
            return list(await asyncio.gather(*calls))

        return _joined(started, await adrive(self._generation(state, turn), outputs))

    def _start(self, state: Mapping[str, Any]) -> tuple[dict[str, Any], Mapping[str, Any]]:
        """The update preparing the run this step starts ({} if none) and the state to read."""
        if self.prepare is None or not starts_run(state):
            return {}, state
        return self.prepare.start(state)

    def _generation(self, state: Mapping[str, Any], turn: _Round) -> _Flow:
        """The round's generator calls as a flow, written once for `invoke` and `ainvoke`.

        It asks for the round's outputs (`_Ask`) and is sent them, or thrown the error
        the calls raised: a budget stop ends the loop; a prompt past the model's context
        is asked once more in its smallest form; any other error is noted and raised.
        """
        step = turn.step
        try:
            outputs = yield _Ask(turn.prompt, turn.calls)
        except BudgetStop as stop:
            return _stopped(stop, step)
        except Exception as exc:
            small = self._shrink(state, turn, exc)
            if small is None:
                step.on_error(exc, "generator")
                raise
            try:
                outputs = yield _Ask(small, 1)
            except Exception as again:
                raise _overflow(state, turn, again) from again
        return self._finish(state, outputs, turn)

    def _shrink(
        self, state: Mapping[str, Any], turn: _Round, exc: Exception
    ) -> list[BaseMessage] | None:
        """The smallest prompt to retry a context overflow with; None if `exc` is another error.

        Raises:
            ContextLengthError: If the prompt overflowed and this round cannot shrink
                (a fresh sample's task alone, or a callable's own prompt).
        """
        if not is_context_length_error(exc):
            return None
        parent = turn.next.parent
        if parent is None or not turn.adapter.can_shorten:
            raise _overflow(state, turn, exc) from exc
        logger.info(
            "attempt %d: prompt exceeds the context; retrying with the smallest", turn.step.index
        )
        # The smallest prompt asks for a rewrite, so a typed loop names the object even
        # in a round that asked for edits (whose step asks for text: no output schema).
        return _smallest(state, parent, turn.options)

    # -- the update --------------------------------------------------------------------

    def _finish(self, state: Mapping[str, Any], outputs: list[Any], turn: _Round) -> dict[str, Any]:
        step, upcoming = turn.step, turn.next
        typed, adapter = turn.options.output_schema, turn.adapter

        def whole(output: Any) -> Reply:
            return adapter.read(output, step.index, typed)

        copied = _prompt_lines(state, turn.prompt)
        replies = [upcoming.read(output, whole, typed, copied) for output in outputs]
        attempt = upcoming.attempt(
            replies[0],
            model=adapter.name,
            rung=turn.rung,
            usage=step.meter.delta(),
            candidates=replies,
        )
        logger.debug("attempt %d generated (%d candidate(s))", step.index, len(replies))
        # The usage travels in the pending attempt: the evaluate step adds it to the total
        # (one write of `usage` per round). The reviewer's request is cleared only if set.
        update: dict[str, Any] = {"pending": attempt}
        if state.get("reviewer_feedback"):
            update["reviewer_feedback"] = None
        return plain_writes(update)


def _joined(started: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    """The generation's update after the run's start (`Prepare.start`) in one step.

    The start resets `usage`; what the generation spent (a budget stop writes it) then
    replaces it rather than adding to the earlier run's total.
    """
    if not started:
        return update
    if "usage" in update:
        update = {**update, "usage": Overwrite(update["usage"])}
    return started | update


def _prompt_lines(state: Mapping[str, Any], prompt: list[BaseMessage]) -> frozenset[str]:
    """The lines of this round's prompt that an answer copied back would carry (`scaffolding`)."""
    own = [str(state.get("task") or ""), *(a.response for a in state.get("attempts") or [])]
    return scaffolding([message_text(m) for m in prompt], own)


def _round_prompt(
    state: Mapping[str, Any],
    options: LoopOptions,
    adapter: GeneratorAdapter,
    upcoming: NextAttempt,
) -> list[BaseMessage]:
    """The messages of the next answer (`_next.next_attempt`): fresh, guided or a refinement."""
    parent, edited = upcoming.parent, upcoming.edited
    if parent is None:
        text = guided_prompt(state["task"], upcoming.guidance, options.max_attempt_chars)
        return _asking_for(options.output_schema, [HumanMessage(text)])
    history = _history(state.get("attempts") or [], parent, options)
    shown = select_attempts(history, options.memory)
    messages = refinement_messages(
        state["task"],
        shown,
        reviewer_feedback=state.get("reviewer_feedback"),
        omitted=len(history) - len(shown),
        max_attempt_chars=options.max_attempt_chars,
        form=adapter.prompt_form(options),
        edit=None if edited is None else edit_text(edited, options.output_schema),
    )
    return _asking_for(options.output_schema, messages) if edited is None else messages


def _smallest(state: Mapping[str, Any], parent: Attempt, options: LoopOptions) -> list[BaseMessage]:
    """The smallest refinement prompt, sent once after the provider says a prompt is too long."""
    text = smallest_prompt(state["task"], parent, state.get("reviewer_feedback"))
    return _asking_for(options.output_schema, [HumanMessage(text)])


def _overflow(state: Mapping[str, Any], turn: _Round, exc: BaseException) -> ContextLengthError:
    """The error of a round whose prompt does not fit, carrying the best result so far."""
    if isinstance(exc, ContextLengthError):
        return exc
    attempts = list(state.get("attempts") or [])
    schema = turn.options.output_schema  # the loop's object, even in an edit round
    result = RefineResult.from_state(dict(state), output_schema=schema) if attempts else None
    return ContextLengthError(
        f"attempt {turn.step.index}: the prompt exceeds the model's context even in its "
        f"smallest form (the task, the attempt cut short, its feedback): {exc}. Shorten "
        "the task, lower max_attempt_chars, or use a model with a larger context; the "
        "best result so far is in this error's .result",
        result,
    )


def _stopped(stop: BudgetStop, step: Step) -> dict[str, Any]:
    logger.info("budget exhausted before attempt %d: %s", step.index, stop)
    return plain_writes({"stop_reason": BUDGET_STOP, "pending": None, "usage": step.meter.delta()})


def _asking_for(schema: OutputSchema | None, messages: list[BaseMessage]) -> list[BaseMessage]:
    """The prompt, its last message ending with the schema when the loop is typed."""
    if schema is None:
        return messages
    last = messages[-1]
    return [*messages[:-1], HumanMessage(f"{last.text}\n\n{schema.instruction()}")]


def _history(attempts: Sequence[Attempt], parent: Attempt, options: LoopOptions) -> list[Attempt]:
    """The attempts a refinement of `parent` may show: its line of descent, ending with it.

    Under `"chain"` every earlier attempt is in the line; under the other strategies the
    line follows `parent` links back to the fresh sample it grew from.
    """
    if options.strategy == "chain":
        return [a for a in attempts if a.index <= parent.index]
    by_index = {a.index: a for a in attempts}
    line = [parent]
    while line[-1].parent is not None and line[-1].parent in by_index:
        line.append(by_index[line[-1].parent])
    return line[::-1]

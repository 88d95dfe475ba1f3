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
from typing import Any, Generic, TypeVar

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables import Runnable, RunnableConfig
from langgraph.types import RetryPolicy

from langgraph_refine._budget import BudgetStop
from langgraph_refine._edits import asks_for_edits, edit_text, read_edits
from langgraph_refine._errors import ContextLengthError, RefineError
from langgraph_refine._memory import select_attempts
from langgraph_refine._options import LoopOptions
from langgraph_refine._prompts import guided_prompt, refinement_messages, smallest_prompt
from langgraph_refine._result import RefineResult, best_attempt
from langgraph_refine._retry import is_context_length_error
from langgraph_refine._state import (
    Attempt,
    Candidate,
    MoveKind,
    RefineState,
    plain_writes,
    revive_state,
)
from langgraph_refine._step import Step, run_options
from langgraph_refine._stop_rules import BUDGET_STOP
from langgraph_refine._typed import OutputSchema, Reply, untyped_reply
from langgraph_refine.evaluators._base import acall, call_sync

logger = logging.getLogger("langgraph_refine")

StateT = TypeVar("StateT", bound=RefineState)

GeneratorLike = BaseChatModel | Runnable[Any, Any] | Callable[..., Any]
"""A chat model, a runnable or compiled graph taking `{"messages": [...]}`, or a
callable `(state) -> str | AIMessage` (sync or async; with `output_schema` it may also
return the object or a dict)."""


def next_index(state: Mapping[str, Any]) -> int:
    """The index the next attempt gets."""
    attempts = state.get("attempts") or []
    return attempts[-1].index + 1 if attempts else 0


def refined_attempt(state: Mapping[str, Any]) -> Attempt | None:
    """The attempt the next round refines, or None for a fresh sample.

    `refine_from` is set by the evaluate step; a state without the key (a custom
    topology) refines the latest attempt, as classic self-refine does.
    """
    attempts: Sequence[Attempt] = state.get("attempts") or []
    if not attempts:
        return None
    wanted = state["refine_from"] if "refine_from" in state else attempts[-1].index
    if state.get("reviewer_feedback") and wanted is None:
        wanted = attempts[-1].index  # a reviewer's "revise" always refines
    return next((a for a in attempts if a.index == wanted), None)


def next_move(state: Mapping[str, Any]) -> MoveKind:
    """The kind of move the next attempt makes (recorded as its `Attempt.move`).

    A reviewer's request makes it a `"revise"`; otherwise a refinement (`refined_attempt`)
    is a `"refine"`, and a fresh answer a `"guided"` sample if the strategy chose one
    (`next_move`), else a `"sample"`.
    """
    if refined_attempt(state) is None:
        return "guided" if state.get("next_move") == "guided" else "sample"
    return "revise" if state.get("reviewer_feedback") else "refine"


def check_max_tokens(generator: Any, max_tokens: int) -> None:
    """Refuse a run's `max_tokens` the generator cannot take.

    A run may lower the chat model's own limit (its `max_tokens`, which the served graphs
    set from `REFINE_MAX_TOKENS`), never raise it: the deployment's cap stands.

    Raises:
        ValueError: If the generator is not a chat model, or `max_tokens` is above its cap.
    """
    if not isinstance(generator, BaseChatModel):
        raise ValueError(
            f"max_tokens={max_tokens} in the run's context applies to a chat-model generator; "
            f"this graph's generator is a {type(generator).__name__}"
        )
    cap = getattr(generator, "max_tokens", None)
    if isinstance(cap, int) and max_tokens > cap:
        raise ValueError(
            f"max_tokens={max_tokens} in the run's context is above this deployment's cap of "
            f"{cap} output tokens per call (the model's max_tokens, REFINE_MAX_TOKENS on a "
            f"served graph); ask for at most {cap}"
        )


def model_kwargs(options: LoopOptions) -> dict[str, Any]:
    """Keyword arguments a chat-model call takes for this run (its `max_tokens`)."""
    return {} if options.max_tokens is None else {"max_tokens": options.max_tokens}


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
            `(state) -> str` (sync or async; it may return an `AIMessage`).
        options: The loop's options (memory, budget, prompt form, candidates, ...).
        retry_policy: The retry policy the node runs under (a `Retry-After` wait
            happens only when it retries).
        **settings: Shorthand for `LoopOptions` fields (`memory="last"`, ...).

    Example:
        >>> node = GeneratorNode(lambda state: "draft")
        >>> node.invoke({"task": "write", "attempts": []})["pending"]["response"]
        'draft'
    """

    def __init__(
        self,
        generator: GeneratorLike,
        options: LoopOptions | None = None,
        *,
        retry_policy: RetryPolicy | Sequence[RetryPolicy] | None = None,
        **settings: Any,
    ) -> None:
        if not isinstance(generator, BaseChatModel | Runnable) and not callable(generator):
            raise ValueError(
                "generator must be a chat model, a 'provider:model' string, a runnable or "
                f"compiled graph, or a callable (state) -> str; got {type(generator).__name__}"
            )
        self.generator = generator
        self.options = LoopOptions.build(options, **settings)
        self.retry_policy = retry_policy

    # -- prompts ---------------------------------------------------------------------

    def prompt(
        self, state: Mapping[str, Any], options: LoopOptions | None = None
    ) -> list[BaseMessage]:
        """The messages a chat-model generator is sent for the next attempt."""
        options = options or self.options
        parent = refined_attempt(state)
        if parent is None:
            if next_move(state) == "guided":
                text = _guided(state, options)
                return _asking_for(options.output_schema, [HumanMessage(text)])
            return _asking_for(options.output_schema, [HumanMessage(state["task"])])
        history = _history(state.get("attempts") or [], parent, options)
        shown = select_attempts(history, options.memory)
        edited = self._edited(state, options)
        messages = refinement_messages(
            state["task"],
            shown,
            reviewer_feedback=state.get("reviewer_feedback"),
            omitted=len(history) - len(shown),
            max_attempt_chars=options.max_attempt_chars,
            form=options.prompt_form if isinstance(self.generator, BaseChatModel) else "single",
            edit=None if edited is None else edit_text(edited, options.output_schema),
        )
        return _asking_for(options.output_schema, messages) if edited is None else messages

    def _edited(self, state: Mapping[str, Any], options: LoopOptions) -> Attempt | None:
        """The attempt this round asks edits to (see `_edits`), or None: written whole.

        Only a chat model or a graph gets the library's prompt, so only they are asked.
        """
        parent = refined_attempt(state)
        if parent is None or not isinstance(self.generator, BaseChatModel | Runnable):
            return None
        return parent if asks_for_edits(options.edits, parent, options.output_schema) else None

    def _smallest(self, state: Mapping[str, Any], schema: OutputSchema | None) -> list[BaseMessage]:
        text = smallest_prompt(
            state["task"], refined_attempt(state), state.get("reviewer_feedback")
        )
        return _asking_for(schema, [HumanMessage(text)])

    # -- the call ----------------------------------------------------------------------

    def _begin(
        self, state: Mapping[str, Any], config: RunnableConfig | None
    ) -> tuple[Step, int, list[BaseMessage], OutputSchema | None]:
        options = run_options(self.options)
        if options.max_tokens is not None:
            check_max_tokens(self.generator, options.max_tokens)
        index = next_index(state)
        step = Step(
            options, state, config, node="generate", index=index, retry_policy=self.retry_policy
        )
        count = options.candidates
        if options.budget is not None and options.budget.max_calls is not None:
            # Sample only as many candidates as the call budget still allows (at least 1).
            left = options.budget.max_calls - step.meter.total().calls
            count = max(1, min(count, left))
        # A plain callable builds its own prompt from the state.
        is_callable = not isinstance(self.generator, BaseChatModel | Runnable)
        prompt = [] if is_callable else self.prompt(state, options)
        # An edit round asks for text (the blocks), not for the object.
        edit_round = self._edited(state, options) is not None
        return step, count, prompt, None if edit_round else options.output_schema

    def _model(
        self, schema: OutputSchema | None, kwargs: dict[str, Any]
    ) -> tuple[Runnable[Any, Any], dict[str, Any]]:
        """The chat model and its call arguments.

        When typed, the model asks for the object through the provider's structured
        output, with the run's settings built in: a structured-output chain does not
        pass call arguments on to the model.
        """
        assert isinstance(self.generator, BaseChatModel)
        if schema is None:
            return self.generator, kwargs
        model = self.generator.model_copy(update=kwargs) if kwargs else self.generator
        structured = schema.structured(model, cache=not kwargs)
        return (structured, {}) if structured is not None else (model, {})

    # Each call below is one generator invocation: `Step.call` counts it as a model call
    # when no callback saw one inside it (a plain callable, a client outside LangChain).

    def _one(
        self,
        state: Mapping[str, Any],
        prompt: list[BaseMessage],
        step: Step,
        schema: OutputSchema | None,
    ) -> Any:
        generator = self.generator
        if isinstance(generator, BaseChatModel):
            model, kwargs = self._model(schema, model_kwargs(step.options))
            return model.invoke(prompt, step.config, **kwargs)
        if isinstance(generator, Runnable):
            graph: Runnable[Any, Any] = generator
            output = graph.invoke({"messages": prompt}, step.config)
            return _graph_answer(output, step.index, schema)
        return call_sync(generator, state, what="generator")

    async def _aone(
        self,
        state: Mapping[str, Any],
        prompt: list[BaseMessage],
        step: Step,
        schema: OutputSchema | None,
    ) -> Any:
        generator = self.generator
        if isinstance(generator, BaseChatModel):
            model, kwargs = self._model(schema, model_kwargs(step.options))
            return await model.ainvoke(prompt, step.config, **kwargs)
        if isinstance(generator, Runnable):
            graph: Runnable[Any, Any] = generator
            output = await graph.ainvoke({"messages": prompt}, step.config)
            return _graph_answer(output, step.index, schema)
        return await acall(generator, state)

    def invoke(
        self, input: StateT, config: RunnableConfig | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        """Generate the next attempt (sync)."""
        state = revive_state(input)
        step, count, prompt, schema = self._begin(state, config)
        outputs: list[Any] = []
        try:
            for _ in range(count):
                outputs.append(step.call(self._one, state, prompt, step, schema))
        except BudgetStop as stop:
            return self._stopped(stop, step, outputs)
        except Exception as exc:
            if not is_context_length_error(exc):
                step.on_error(exc, "generator")
                raise
            outputs = self._retry_small(state, step, exc, schema)
        return self._finish(state, outputs, step, schema)

    async def ainvoke(
        self, input: StateT, config: RunnableConfig | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        """Generate the next attempt (async)."""
        state = revive_state(input)
        step, count, prompt, schema = self._begin(state, config)
        outputs: list[Any] = []
        try:
            if count == 1:  # awaited directly: gather() would cost a task per round
                outputs.append(await step.acall(self._aone, state, prompt, step, schema))
            else:
                outputs = list(
                    await asyncio.gather(
                        *(step.acall(self._aone, state, prompt, step, schema) for _ in range(count))
                    )
                )
        except BudgetStop as stop:
            return self._stopped(stop, step, outputs)
        except Exception as exc:
            if not is_context_length_error(exc):
                await step.aon_error(exc, "generator")
                raise
            outputs = await self._aretry_small(state, step, exc, schema)
        return self._finish(state, outputs, step, schema)

    def _retry_small(
        self, state: Mapping[str, Any], step: Step, exc: Exception, schema: OutputSchema | None
    ) -> list[Any]:
        small = self._check_small(state, step, exc, schema)
        try:
            return [step.call(self._one, state, small, step, schema)]
        except Exception as again:
            raise self._overflow(state, step, again, schema) from again

    async def _aretry_small(
        self, state: Mapping[str, Any], step: Step, exc: Exception, schema: OutputSchema | None
    ) -> list[Any]:
        small = self._check_small(state, step, exc, schema)
        try:
            return [await step.acall(self._aone, state, small, step, schema)]
        except Exception as again:
            raise self._overflow(state, step, again, schema) from again

    def _check_small(
        self, state: Mapping[str, Any], step: Step, exc: Exception, schema: OutputSchema | None
    ) -> list[BaseMessage]:
        """The smallest prompt to retry with, or raise if this round cannot shrink."""
        if refined_attempt(state) is None or not isinstance(
            self.generator, BaseChatModel | Runnable
        ):
            # The task alone (or a callable's own prompt) does not fit: nothing to cut.
            raise self._overflow(state, step, exc, schema) from exc
        logger.info(
            "attempt %d: prompt exceeds the context; retrying with the smallest", step.index
        )
        # The smallest prompt asks for a rewrite, so a typed loop names the object even
        # in a round that asked for edits (whose call `schema` is None).
        return self._smallest(state, step.options.output_schema)

    @staticmethod
    def _overflow(
        state: Mapping[str, Any], step: Step, exc: BaseException, schema: OutputSchema | None
    ) -> ContextLengthError:
        if isinstance(exc, ContextLengthError):
            return exc
        attempts = list(state.get("attempts") or [])
        result = RefineResult.from_state(dict(state), output_schema=schema) if attempts else None
        return ContextLengthError(
            f"attempt {step.index}: the prompt exceeds the model's context even in its "
            f"smallest form (the task, the attempt cut short, its feedback): {exc}. Shorten "
            "the task, lower max_attempt_chars, or use a model with a larger context; the "
            "best result so far is in this error's .result",
            result,
        )

    # -- the update --------------------------------------------------------------------

    def _stopped(self, stop: BudgetStop, step: Step, outputs: list[Any]) -> dict[str, Any]:
        logger.info("budget exhausted before attempt %d: %s", step.index, stop)
        return plain_writes(
            {"stop_reason": BUDGET_STOP, "pending": None, "usage": step.meter.delta()}
        )

    def _finish(
        self,
        state: Mapping[str, Any],
        outputs: list[Any],
        step: Step,
        schema: OutputSchema | None,
    ) -> dict[str, Any]:
        typed = step.options.output_schema
        edited = self._edited(state, step.options)
        replies = [
            _read(output, step.index, schema)
            if edited is None
            else read_edits(output, edited, typed, lambda o: _read(o, step.index, typed))
            for output in outputs
        ]
        usage = step.meter.delta()
        parent = refined_attempt(state)
        first = replies[0]
        attempt = Attempt(
            index=step.index,
            response=first.response,
            # An invalid object comes already evaluated (FAIL): the evaluator is skipped.
            evaluation=first.evaluation,
            output=first.output,
            reasoning=first.reasoning,
            edits=first.edits,
            instruction=state.get("reviewer_feedback"),
            parent=parent.index if parent is not None else None,
            move=next_move(state),
            usage=usage,
            candidates=[
                Candidate(
                    response=r.response,
                    evaluation=r.evaluation,
                    output=r.output,
                    reasoning=r.reasoning,
                    edits=r.edits,
                )
                for r in replies
            ]
            if len(replies) > 1
            else [],
        )
        logger.debug("attempt %d generated (%d candidate(s))", step.index, len(replies))
        # The usage travels in the pending attempt: the evaluate step adds it to the total
        # (one write of `usage` per round). The reviewer's request is cleared only if set.
        update: dict[str, Any] = {"pending": attempt}
        if state.get("reviewer_feedback"):
            update["reviewer_feedback"] = None
        return plain_writes(update)


def _read(output: Any, index: int, schema: OutputSchema | None) -> Reply:
    """One generator output as an attempt's fields (see `_typed`).

    Raises:
        TypeError: If an untyped generator returned something that is not text.
    """
    if schema is not None:
        return schema.read(output)
    if not isinstance(output, str | BaseMessage):
        raise TypeError(
            f"generator returned {type(output).__name__} on attempt {index}; return a "
            "string or an AIMessage (or pass output_schema= to refine an object)"
        )
    return untyped_reply(output)


def _asking_for(schema: OutputSchema | None, messages: list[BaseMessage]) -> list[BaseMessage]:
    """The prompt, its last message ending with the schema when the loop is typed."""
    if schema is None:
        return messages
    last = messages[-1]
    return [*messages[:-1], HumanMessage(f"{last.text}\n\n{schema.instruction()}")]


def _guided(state: Mapping[str, Any], options: LoopOptions) -> str:
    """A guided sample's prompt: the task and the feedback on the best attempt so far."""
    best = best_attempt(state.get("attempts") or [])
    feedback = best.evaluation.feedback if best is not None and best.evaluation else ""
    return guided_prompt(state["task"], feedback, options.max_attempt_chars)


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


def _graph_answer(output: Any, index: int, schema: OutputSchema | None = None) -> Any:
    """The answer in a graph generator's output state: its last AI message.

    With `output_schema`, the state's `structured_response` (what
    `create_agent(response_format=...)` gives) when it has one.

    Raises:
        RefineError: If the output has no AI message, or ends on a tool call.
    """
    structured = output.get("structured_response") if isinstance(output, Mapping) else None
    if schema is not None and structured is not None:
        return structured
    messages = output.get("messages") if isinstance(output, Mapping) else None
    if isinstance(output, AIMessage):
        messages = [output]
    last = messages[-1] if messages else None
    if not isinstance(last, AIMessage):
        raise RefineError(
            f"graph generator gave no final AI message on attempt {index} (its last message "
            f"is {type(last).__name__ if last is not None else 'missing'}); the generator "
            "must end with an AIMessage holding the answer"
        )
    if last.tool_calls:
        raise RefineError(
            f"graph generator ended on a tool call on attempt {index} "
            f"({[c['name'] for c in last.tool_calls]}); give the agent a final answer step"
        )
    return last

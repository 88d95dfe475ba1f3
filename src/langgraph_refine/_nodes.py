"""The loop's steps as state-typed nodes: generate, evaluate, review, and the two ends.

`GeneratorNode` and `EvaluatorNode` are LangChain runnables with real sync and async
paths (`invoke` / `ainvoke`) sharing one body: a `_begin` part that checks the budget
and prepares the call, the call itself, and a `_finish` part that builds the state
update. They work in any graph whose state has the `RefineState` keys.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections.abc import Callable, Mapping
from typing import Any, Literal

from langchain_core.callbacks import BaseCallbackManager
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
from langchain_core.runnables.config import merge_configs, run_in_executor
from langgraph.config import get_stream_writer
from langgraph.errors import GraphBubbleUp
from langgraph.types import Overwrite, interrupt

from langgraph_refine._budget import Budget, BudgetStop, UsageMeter, metering
from langgraph_refine._errors import BudgetExhaustedError, RefineError, ReviewInputError
from langgraph_refine._memory import DEFAULT_MEMORY, MemoryPolicy, select_attempts, validate_memory
from langgraph_refine._models import message_text
from langgraph_refine._prompts import refinement_prompt
from langgraph_refine._result import RefineResult, best_attempt
from langgraph_refine._retry import ahonour_retry_after, describe_status, honour_retry_after
from langgraph_refine._state import (
    Attempt,
    Candidate,
    Evaluation,
    RefineState,
    Usage,
    revive_state,
)
from langgraph_refine._stop_rules import StopRules
from langgraph_refine.evaluators._base import BaseEvaluator, EvaluatorLike, is_async_callable
from langgraph_refine.evaluators._combine import as_evaluator

logger = logging.getLogger("langgraph_refine")

HumanReview = Literal["final", "every_round"]
REVIEW_MODES: tuple[str, ...] = ("final", "every_round")


def _emit(event: dict[str, Any]) -> None:
    """Send a custom stream event; a no-op outside a running graph."""
    try:
        writer = get_stream_writer()
    except RuntimeError:
        return
    writer(event)


def _has_listeners(config: RunnableConfig | None) -> bool:
    """False when the run's callbacks have no handler at all (nobody records runs).

    Inside a graph `callbacks` is the node run's callback manager, which carries every
    inherited handler (tracers from the environment, LangGraph's stream handlers).
    Without a config the answer is unknown, so it is True.
    """
    callbacks = (config or {}).get("callbacks")
    if callbacks is None:
        return True
    if isinstance(callbacks, BaseCallbackManager):
        return bool(callbacks.handlers or callbacks.inheritable_handlers)
    return bool(callbacks)


class _Untraced(Runnable[str, Evaluation]):
    """An evaluation called directly, when no callback handler would record its run."""

    def __init__(self, evaluator: BaseEvaluator, state: Mapping[str, Any]) -> None:
        self.evaluator = evaluator
        self.state = state

    def invoke(self, input: str, config: RunnableConfig | None = None, **kwargs: Any) -> Evaluation:
        return self.evaluator.evaluate(input, self.state)

    async def ainvoke(
        self, input: str, config: RunnableConfig | None = None, **kwargs: Any
    ) -> Evaluation:
        return await self.evaluator.aevaluate(input, self.state)


def _annotate(exc: BaseException, what: str, index: int, node: str) -> None:
    """Put the attempt number (and HTTP status, if any) into the exception's message.

    The exception keeps its type, so callers' `except` clauses and the retry policy
    still see the original error.
    """
    if isinstance(exc, GraphBubbleUp) or getattr(exc, "_langgraph_refine_annotated", False):
        return
    status = describe_status(exc)
    context = f"{what} failed on attempt {index} in node {node!r}" + (
        f" ({status})" if status else ""
    )
    if exc.args and isinstance(exc.args[0], str):
        exc.args = (f"{context}: {exc.args[0]}", *exc.args[1:])
    elif not exc.args:
        exc.args = (context,)
    else:
        exc.add_note(context)
    if hasattr(exc, "message") and isinstance(exc.message, str):
        exc.message = f"{context}: {exc.message}"
    with contextlib.suppress(AttributeError):  # exceptions with __slots__
        exc._langgraph_refine_annotated = True  # type: ignore[attr-defined]


def _next_index(state: Mapping[str, Any]) -> int:
    attempts = state.get("attempts") or []
    return attempts[-1].index + 1 if attempts else 0


def _budget_stop(reason: BudgetStop, index: int) -> dict[str, Any]:
    logger.info("budget exhausted before attempt %d: %s", index, reason)
    return {"stop_reason": "budget_exhausted"}


class GeneratorNode(Runnable[Mapping[str, Any], dict[str, Any]]):
    """Generates the next attempt: the first answer to the task, or a refinement.

    For a chat model, the first prompt is the task; refinement prompts carry the task,
    the earlier attempts chosen by `memory` with their scores and feedback, and any
    reviewer request. A callable generator receives the state and builds its own prompt.

    Args:
        generator: A chat model, or a callable `(state) -> str` (sync or async; it may
            also return an `AIMessage`, whose usage metadata is then counted).
        memory: Which earlier attempts the refinement prompt shows.
        budget: Limits checked before the call.
        name: The loop's name, used in run names and tags.
        candidates: Responses sampled per round from the same prompt (>= 1); the
            evaluator keeps the best. Each one is a model call.

    Example:
        >>> node = GeneratorNode(lambda state: "draft")
        >>> node.invoke({"task": "write", "attempts": []})["pending"].response
        'draft'
    """

    def __init__(
        self,
        generator: BaseChatModel | Callable[..., Any],
        *,
        memory: MemoryPolicy = DEFAULT_MEMORY,
        budget: Budget | None = None,
        name: str = "refine",
        candidates: int = 1,
    ) -> None:
        if not isinstance(candidates, int) or isinstance(candidates, bool) or candidates < 1:
            raise ValueError(f"candidates must be an integer >= 1, got {candidates!r}")
        if not isinstance(generator, BaseChatModel) and not callable(generator):
            raise ValueError(
                "generator must be a chat model, a 'provider:model' string or a callable "
                f"(state) -> str; got {type(generator).__name__}"
            )
        self.generator = generator
        self.memory = validate_memory(memory)
        self.budget = budget
        self.loop_name = name
        self.candidates = candidates

    def prompt(self, state: Mapping[str, Any]) -> list[BaseMessage]:
        """The messages a chat-model generator is sent for the next attempt."""
        attempts = list(state.get("attempts") or [])
        task = state["task"]
        if not attempts:
            return [HumanMessage(task)]
        shown = select_attempts(attempts, self.memory)
        text = refinement_prompt(
            task,
            shown,
            reviewer_feedback=state.get("reviewer_feedback"),
            omitted=len(attempts) - len(shown),
        )
        return [HumanMessage(text)]

    def _config(
        self, config: RunnableConfig | None, index: int, state: Mapping[str, Any]
    ) -> RunnableConfig:
        best = best_attempt(state.get("attempts") or [])
        return merge_configs(
            config,
            {
                "run_name": f"{self.loop_name}:generate",
                "tags": ["langgraph-refine", f"{self.loop_name}:generate", f"iteration:{index}"],
                "metadata": {
                    "refine_loop": self.loop_name,
                    "iteration": index,
                    "best_score": best.score if best else None,
                },
            },
        )

    def _begin(self, state: Mapping[str, Any]) -> tuple[int, UsageMeter, int]:
        index = _next_index(state)
        meter = UsageMeter(self.budget, state.get("usage") or Usage())
        return index, meter, meter.allowance(self.candidates)

    def _finish(
        self, state: Mapping[str, Any], outputs: list[Any], index: int, meter: UsageMeter
    ) -> dict[str, Any]:
        texts = []
        for output in outputs:
            if not isinstance(output, str | BaseMessage):
                raise TypeError(
                    f"generator returned {type(output).__name__} on attempt {index}; "
                    "return a string or an AIMessage"
                )
            meter.record(output)
            texts.append(message_text(output))
        usage = meter.delta()
        attempt = Attempt(
            index=index,
            response=texts[0],
            instruction=state.get("reviewer_feedback"),
            usage=usage,
            candidates=[Candidate(response=t) for t in texts] if len(texts) > 1 else [],
        )
        logger.debug("attempt %d generated (%d candidate(s))", index, len(texts))
        return {"pending": attempt, "usage": usage, "reviewer_feedback": None}

    def invoke(
        self, input: Mapping[str, Any], config: RunnableConfig | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        """Generate the next attempt (sync)."""
        input = revive_state(input)
        try:
            index, meter, count = self._begin(input)
        except BudgetStop as stop:
            return _budget_stop(stop, _next_index(input))
        try:
            if isinstance(self.generator, BaseChatModel):
                prompt, run_config = self.prompt(input), self._config(config, index, input)
                if count == 1:
                    outputs = [self.generator.invoke(prompt, run_config)]
                else:
                    outputs = self.generator.batch([prompt] * count, run_config)
            else:
                outputs = [self._call_sync(input) for _ in range(count)]
        except Exception as exc:
            _annotate(exc, "generator", index, "generate")
            honour_retry_after(exc)
            raise
        return self._finish(input, outputs, index, meter)

    async def ainvoke(
        self, input: Mapping[str, Any], config: RunnableConfig | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        """Generate the next attempt (async)."""
        input = revive_state(input)
        try:
            index, meter, count = self._begin(input)
        except BudgetStop as stop:
            return _budget_stop(stop, _next_index(input))
        try:
            if isinstance(self.generator, BaseChatModel):
                prompt, run_config = self.prompt(input), self._config(config, index, input)
                if count == 1:
                    outputs = [await self.generator.ainvoke(prompt, run_config)]
                else:
                    outputs = await self.generator.abatch([prompt] * count, run_config)
            elif count == 1:  # awaited directly: gather() would cost a task per round
                outputs = [await self._call_async(input)]
            else:
                outputs = list(
                    await asyncio.gather(*(self._call_async(input) for _ in range(count)))
                )
        except Exception as exc:
            _annotate(exc, "generator", index, "generate")
            await ahonour_retry_after(exc)
            raise
        return self._finish(input, outputs, index, meter)

    def _call_sync(self, state: Mapping[str, Any]) -> Any:
        if is_async_callable(self.generator):
            raise TypeError("the generator is async; run the loop with ainvoke() or arefine()")
        output = self.generator(state)  # type: ignore[operator]
        if inspect.isawaitable(output):
            if inspect.iscoroutine(output):
                output.close()
            raise TypeError(
                "the generator returned an awaitable; run the loop with ainvoke() or arefine()"
            )
        return output

    async def _call_async(self, state: Mapping[str, Any]) -> Any:
        if is_async_callable(self.generator):
            return await self.generator(state)  # type: ignore[operator]
        output = await run_in_executor(None, self.generator, state)  # type: ignore[arg-type]
        if inspect.isawaitable(output):
            output = await output
        return output


class EvaluatorNode(Runnable[Mapping[str, Any], dict[str, Any]]):
    """Evaluates the pending attempt, records it, and decides whether the loop stops.

    Writes the evaluated attempt to `attempts`, the spent usage to `usage`, and the
    `stop_reason` chosen by the stop rules (None to refine again). Emits a custom
    stream event `{"type": "round", ...}` per evaluated attempt.

    Args:
        evaluator: A callable, chat model (LLM judge), evaluator object or list of them.
        target_score: Score in [0, 1] that stops the loop.
        max_iterations: Refinement rounds allowed after the first generation.
        patience: Non-improving refinement rounds tolerated; None disables the rule.
        min_delta: Improvement of the best score that counts as progress.
        budget: Limits checked before each LLM-judge call.
        name: The loop's name, used in events, run names and tags.
    """

    def __init__(
        self,
        evaluator: EvaluatorLike,
        *,
        target_score: float = 0.9,
        max_iterations: int = 4,
        patience: int | None = 2,
        min_delta: float = 0.0,
        budget: Budget | None = None,
        name: str = "refine",
    ) -> None:
        self.evaluator = as_evaluator(evaluator)
        self.stop_rules = StopRules(target_score, max_iterations, patience, min_delta)
        self.budget = budget
        self.loop_name = name

    def _begin(self, state: Mapping[str, Any]) -> tuple[Attempt, UsageMeter]:
        pending = state.get("pending")
        if pending is None:
            raise RefineError(
                "EvaluatorNode found no pending attempt in state['pending']; "
                "run a GeneratorNode before it"
            )
        return pending, UsageMeter(self.budget, state.get("usage") or Usage())

    def _traced(
        self, config: RunnableConfig | None, pending: Attempt, state: Mapping[str, Any]
    ) -> tuple[Runnable[str, Evaluation], RunnableConfig]:
        """The evaluation as a child run named `<loop>:evaluate`, tagged with the iteration.

        Callback handlers (LangSmith, ...) see one run per evaluation, with the iteration
        and best score so far in its metadata and the `Evaluation` (score, verdict,
        feedback) as its output; an LLM judge's model call nests under it and inherits
        the tags and metadata.
        """
        evaluator = self.evaluator
        if not _has_listeners(config):
            # No handler would see the run: skip building it (a large share of a round).
            return _Untraced(evaluator, state), config or {}

        async def aevaluate(response: str) -> Evaluation:
            return await evaluator.aevaluate(response, state)

        best = best_attempt(state.get("attempts") or [])
        run_config = merge_configs(
            config,
            {
                "run_name": f"{self.loop_name}:evaluate",
                "tags": [
                    "langgraph-refine",
                    f"{self.loop_name}:evaluate",
                    f"iteration:{pending.index}",
                ],
                "metadata": {
                    "refine_loop": self.loop_name,
                    "iteration": pending.index,
                    "best_score": best.score if best else None,
                },
            },
        )
        runnable = RunnableLambda(lambda response: evaluator.evaluate(response, state), aevaluate)
        return runnable, run_config

    def invoke(
        self, input: Mapping[str, Any], config: RunnableConfig | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        """Evaluate the pending attempt (sync)."""
        input = revive_state(input)
        pending, meter = self._begin(input)
        traced, run_config = self._traced(config, pending, input)
        evaluations: list[Evaluation] = []
        try:
            with metering(meter):
                for response in _responses(pending):
                    evaluations.append(traced.invoke(response, run_config))
        except BudgetStop as stop:
            if not evaluations:
                return self._unevaluated(pending, meter, stop)
        except Exception as exc:
            _annotate(exc, "evaluator", pending.index, "evaluate")
            honour_retry_after(exc)
            raise
        return self._finish(input, pending, evaluations, meter)

    async def ainvoke(
        self, input: Mapping[str, Any], config: RunnableConfig | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        """Evaluate the pending attempt (async)."""
        input = revive_state(input)
        pending, meter = self._begin(input)
        traced, run_config = self._traced(config, pending, input)
        responses = _responses(pending)
        evaluations: list[Evaluation] = []
        try:
            with metering(meter):
                # Candidates are judged concurrently unless an exact call budget must be
                # enforced between judge calls.
                if len(responses) > 1 and not (self.budget and self.evaluator.calls_model):
                    evaluations = list(
                        await asyncio.gather(*(traced.ainvoke(r, run_config) for r in responses))
                    )
                else:
                    for response in responses:
                        evaluations.append(await traced.ainvoke(response, run_config))
        except BudgetStop as stop:
            if not evaluations:
                return self._unevaluated(pending, meter, stop)
        except Exception as exc:
            _annotate(exc, "evaluator", pending.index, "evaluate")
            await ahonour_retry_after(exc)
            raise
        return self._finish(input, pending, evaluations, meter)

    def _unevaluated(self, pending: Attempt, meter: UsageMeter, stop: BudgetStop) -> dict[str, Any]:
        logger.info("budget exhausted before evaluating attempt %d: %s", pending.index, stop)
        usage = meter.delta()
        attempt = pending.model_copy(update={"usage": pending.usage + usage})
        return {
            "attempts": [attempt],
            "pending": None,
            "usage": usage,
            "stop_reason": "budget_exhausted",
        }

    def _finish(
        self,
        state: Mapping[str, Any],
        pending: Attempt,
        evaluations: list[Evaluation],
        meter: UsageMeter,
    ) -> dict[str, Any]:
        for evaluation in evaluations:
            if not isinstance(evaluation, Evaluation):  # a custom BaseEvaluator's mistake
                raise TypeError(
                    f"evaluator returned {type(evaluation).__name__}; return an Evaluation"
                )
        usage = meter.delta()
        attempt = _choose_candidate(pending, evaluations).model_copy(
            update={"usage": pending.usage + usage}
        )
        assert attempt.evaluation is not None
        evaluation = attempt.evaluation
        attempts = [*(state.get("attempts") or []), attempt]
        stop_reason = self.stop_rules.decide(attempts)
        if stop_reason is None and len(evaluations) < len(_responses(pending)):
            stop_reason = "budget_exhausted"  # it ran out while judging the candidates
        best = best_attempt(attempts)
        logger.info(
            "%s round %d: score=%.3f verdict=%s best=%.3f%s",
            self.loop_name,
            attempt.index,
            evaluation.score,
            evaluation.verdict,
            best.score if best and best.score is not None else float("nan"),
            f" -> stop ({stop_reason})" if stop_reason else "",
        )
        _emit(
            {
                "type": "round",
                "name": self.loop_name,
                "iteration": attempt.index,
                "score": evaluation.score,
                "verdict": evaluation.verdict,
                "feedback": evaluation.feedback,
                "best_score": best.score if best else None,
                "response": attempt.response,
            }
        )
        return {"attempts": [attempt], "pending": None, "usage": usage, "stop_reason": stop_reason}


def _responses(pending: Attempt) -> list[str]:
    return [c.response for c in pending.candidates] or [pending.response]


def _choose_candidate(pending: Attempt, evaluations: list[Evaluation]) -> Attempt:
    """The pending attempt carrying its best candidate (by the best-result rule)."""
    if not pending.candidates:
        return pending.model_copy(update={"evaluation": evaluations[0]})
    candidates = [
        Candidate(response=c.response, evaluation=evaluations[i] if i < len(evaluations) else None)
        for i, c in enumerate(pending.candidates)
    ]
    ranked = [
        Attempt(index=i, response=c.response, evaluation=c.evaluation)
        for i, c in enumerate(candidates)
    ]
    best = best_attempt(ranked)
    assert best is not None
    return pending.model_copy(
        update={"response": best.response, "evaluation": best.evaluation, "candidates": candidates}
    )


def prepare(state: RefineState) -> dict[str, Any]:
    """Start a loop: take the task (or the last human message) and reset loop state.

    Raises:
        ValueError: If there is no task, or it is empty or whitespace.
    """
    task = state.get("task")
    messages: list[AnyMessage] = list(state.get("messages") or [])
    from_messages = False
    # A finished loop on the same thread that took its task from messages takes the
    # next one from messages too; otherwise an explicit task wins.
    if (not isinstance(task, str) or not task.strip() or state.get("from_messages")) and messages:
        human = [m for m in messages if isinstance(m, HumanMessage)]
        if human:
            task, from_messages = human[-1].text, True
    if not isinstance(task, str) or not task.strip():
        raise ValueError(
            f"task must be a non-empty string, got {task!r}; pass {{'task': '...'}} "
            "or messages ending with a human message"
        )
    return {
        "task": task,
        "attempts": Overwrite([]),
        "usage": Overwrite(Usage()),
        "pending": None,
        "stop_reason": None,
        "reviewer_feedback": None,
        "from_messages": from_messages,
    }


class ReviewNode:
    """Pauses the loop with `interrupt()` for a human decision, then applies it.

    Resume with `Command(resume={"action": ...})`: `approve`, `edit` (with `response`),
    `reject`, `revise` (with `feedback`), or `continue` (every_round only). A malformed
    value leaves the review pending: the loop pauses again with the same payload plus an
    `error` key that says what was wrong.

    Args:
        mode: `"final"` (review when the loop would stop) or `"every_round"`.
        on_budget_exhausted: With `"raise"`, a budget stop skips the review.
        name: The loop's name, included in the payload.
    """

    def __init__(
        self, mode: HumanReview, *, on_budget_exhausted: str = "stop", name: str = "refine"
    ) -> None:
        if mode not in REVIEW_MODES:
            raise ValueError(
                f"human_review must be one of None, 'final', 'every_round'; got {mode!r}"
            )
        self.mode = mode
        self.on_budget_exhausted = on_budget_exhausted
        self.loop_name = name
        self.actions = ["approve", "edit", "reject", "revise"] + (
            ["continue"] if mode == "every_round" else []
        )

    def payload(self, state: Mapping[str, Any]) -> dict[str, Any]:
        """What the reviewer is shown: the best attempt (final) or the latest (every_round)."""
        attempts = list(state.get("attempts") or [])
        best = best_attempt(attempts)
        reviewed = attempts[-1] if self.mode == "every_round" and attempts else best
        evaluation = reviewed.evaluation if reviewed else None
        return {
            "type": "review",
            "name": self.loop_name,
            "mode": self.mode,
            "task": state.get("task", ""),
            "response": reviewed.response if reviewed else "",
            "score": evaluation.score if evaluation else None,
            "verdict": evaluation.verdict if evaluation else None,
            "feedback": evaluation.feedback if evaluation else "",
            "iteration": attempts[-1].index if attempts else 0,
            "attempt": reviewed.index if reviewed else None,
            "best_score": best.score if best else None,
            "stop_reason": state.get("stop_reason"),
            "actions": list(self.actions),
        }

    def __call__(self, state: RefineState) -> dict[str, Any]:
        stop_reason = state.get("stop_reason")
        if stop_reason == "budget_exhausted" and self.on_budget_exhausted == "raise":
            return {}
        payload = self.payload(revive_state(state))
        shown = payload
        while True:
            # A malformed answer is not an error of the run: ask again, saying what was
            # wrong. Each interrupt() in this node has its own resume slot, so the bad
            # value is never replayed into the next answer.
            try:
                return self.apply(payload, interrupt(shown))
            except ReviewInputError as exc:
                logger.info("%s: review answer rejected: %s", self.loop_name, exc)
                shown = {**payload, "error": str(exc)}

    def apply(self, payload: Mapping[str, Any], value: Any) -> dict[str, Any]:
        """Turn a resume value into a state update.

        Raises:
            ReviewInputError: If the value is not a dict with a known action and the
                fields that action needs.
        """
        action = value.get("action") if isinstance(value, Mapping) else None
        if action not in self.actions:
            raise ReviewInputError(
                f"review resume value must be a dict with 'action' in {self.actions}, "
                f"got {value!r}; resume again with Command(resume={{'action': ...}})"
            )
        assert isinstance(value, Mapping)
        if action == "approve":
            return {"stop_reason": "approved", "response": payload["response"]}
        if action == "edit":
            return {"stop_reason": "edited", "response": _required_text(value, "response", action)}
        if action == "reject":
            return {"stop_reason": "rejected"}
        if action == "revise":
            return {
                "stop_reason": None,
                "reviewer_feedback": _required_text(value, "feedback", action),
            }
        return {}  # continue: the stop rules' decision stands


def _required_text(value: Mapping[str, Any], key: str, action: str) -> str:
    text = value.get(key)
    if not isinstance(text, str) or not text.strip():
        raise ReviewInputError(
            f"review action {action!r} needs a non-empty string {key!r}, got {text!r}; "
            "resume again with the field filled in"
        )
    return text


class FinalizeNode:
    """Ends the loop: sets `response`, answers in `messages` when asked there, emits the stop event.

    Args:
        on_budget_exhausted: `"raise"` raises `BudgetExhaustedError` on a budget stop.
        name: The loop's name.

    Raises:
        BudgetExhaustedError: On a budget stop with `on_budget_exhausted="raise"`.
    """

    def __init__(self, *, on_budget_exhausted: str = "stop", name: str = "refine") -> None:
        self.on_budget_exhausted = on_budget_exhausted
        self.loop_name = name

    def __call__(self, state: RefineState) -> dict[str, Any]:
        result = RefineResult.from_state(state)
        if result.stop_reason == "budget_exhausted" and self.on_budget_exhausted == "raise":
            raise BudgetExhaustedError(
                f"budget exhausted after {len(result.attempts)} attempt(s); best score "
                f"{result.score}; the best result so far is in this error's .result",
                result,
            )
        update: dict[str, Any] = {"response": result.value, "stop_reason": result.stop_reason}
        if state.get("from_messages"):
            update["messages"] = [AIMessage(result.value)]
        logger.info(
            "%s stopped: %s after %d attempt(s), best score %s",
            self.loop_name,
            result.stop_reason,
            len(result.attempts),
            result.score,
        )
        _emit(
            {
                "type": "stop",
                "name": self.loop_name,
                "stop_reason": result.stop_reason,
                "score": result.score,
                "iterations": result.iterations,
                "response": result.value,
            }
        )
        return update

"""What the model-calling nodes share: metering, deadlines, events, error context, retry waits.

A model-calling node runs its calls through a `Step`: the step attaches a `BudgetMeter`
to the node's config (so every model call under it is counted and checked), cuts off a
call still running when `Budget.max_seconds` runs out, and adds the attempt, node and
HTTP status to errors (as notes: the error keeps its type and message), and retries a
call that failed with an error its retry policy retries. The retries happen inside the
step, under its meter, so what a failed call spent is counted with the rest of the step
and reaches the state in the step's own update. A loop run inside another loop's step
finds that step's meter in its config and spends from its budget too (see `_budget`).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from langchain_core.callbacks import BaseCallbackManager
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import merge_configs, var_child_runnable_config
from langgraph.config import get_stream_writer
from langgraph.constants import TAG_NOSTREAM
from langgraph.errors import GraphBubbleUp
from langgraph.runtime import get_runtime
from langgraph.types import RetryPolicy

from langgraph_refine._calls._budget import (
    Budget,
    BudgetMeter,
    BudgetStop,
    enclosing_meter,
    only_meter,
    seconds_left,
    tries_left,
)
from langgraph_refine._calls._clients import deadline, interrupt, interruptible
from langgraph_refine._calls._retry import describe_status, retry_follows, retry_wait
from langgraph_refine._decisions._options import LoopOptions, with_input_options
from langgraph_refine._errors import attach_result
from langgraph_refine._result import RefineResult, best_attempt
from langgraph_refine._state import StopReason, Usage

logger = logging.getLogger("langgraph_refine")

T = TypeVar("T")


def emit(event: Mapping[str, Any]) -> None:
    """Send a custom stream event; a no-op outside a running graph."""
    try:
        writer = get_stream_writer()
    except RuntimeError:
        return
    writer(event)


@contextlib.contextmanager
def child_config(
    tags: Sequence[str] = (), metadata: Mapping[str, Any] | None = None
) -> Iterator[None]:
    """Runs started inside this block carry these tags and metadata too.

    For a call made by code we do not control (an agent's model node): it reads its
    config from the running context. LangGraph's `nostream` tag keeps a model call out
    of `messages` streams; metadata reaches every streamed chunk's metadata.
    """
    parent = var_child_runnable_config.get() or {}
    config = merge_configs(parent, {"tags": list(tags), "metadata": dict(metadata or {})})
    token = var_child_runnable_config.set(config)
    try:
        yield
    finally:
        var_child_runnable_config.reset(token)


def run_options(options: LoopOptions, state: Mapping[str, Any] | None = None) -> LoopOptions:
    """The options for this run: the node's, with the run's `context` applied (if any).

    Args:
        options: The node's options.
        state: The node's state: the options its input gave (`input_options`, set by
            `prepare`) apply as the context's do.

    Raises:
        ValueError: For an invalid option, or one the context and the input set
            differently.
    """
    try:
        context = get_runtime().context
    except RuntimeError:  # outside a graph run (a node called directly)
        context = None
    given = (state or {}).get("input_options")
    if context is None and not given:
        return options
    return options.for_run(with_input_options(context, given))


def has_listeners(config: RunnableConfig | None) -> bool:
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


def add_context(exc: BaseException, what: str, index: int, node: str) -> None:
    """Note on the exception which attempt, node (and HTTP status) it came from.

    The exception keeps its type and its own message, so callers' `except` clauses, the
    retry policy and the provider's text are untouched; the note shows in tracebacks.
    """
    if isinstance(exc, GraphBubbleUp) or getattr(exc, "_langgraph_refine_noted", False):
        return
    status = describe_status(exc)
    exc.add_note(
        f"{what} failed on attempt {index} in node {node!r}" + (f" ({status})" if status else "")
    )
    with contextlib.suppress(AttributeError):  # __slots__ exceptions: a second note is harmless
        exc._langgraph_refine_noted = True  # type: ignore[attr-defined]


class Step:
    """One run of a model-calling node: its meter, config and deadline.

    Args:
        options: The run's options (budget, name).
        state: The node's input state (for usage so far and the best score).
        config: The node's config; the meter is added to its callbacks.
        node: The node's name (`"generate"` or `"evaluate"`), for run names and errors.
        index: The attempt this step works on.
        retry_policy: The policy a failed call is retried under (see `call`); None: no retry.
        pending_usage: Usage of the pending attempt's generation, which the state's total
            does not hold yet (the evaluate step adds it).
        reserved_calls: Calls the budget must still be able to pay after this step's
            (a generation's: its judgment), so a call is refused that much sooner.
    """

    def __init__(
        self,
        options: LoopOptions,
        state: Mapping[str, Any],
        config: RunnableConfig | None,
        *,
        node: str,
        index: int,
        retry_policy: RetryPolicy | Sequence[RetryPolicy] | None,
        pending_usage: Usage | None = None,
        reserved_calls: int = 0,
    ) -> None:
        self.options = options
        self.state = state
        self.budget: Budget | None = options.budget
        what = "generator" if node == "generate" else "evaluator"
        # In a loop run inside another loop's step, that step's meter (inherited with the
        # config) is the parent: the outer budget counts and can stop this loop's calls.
        parent = enclosing_meter(config)
        self.meter = BudgetMeter(
            options.budget,
            lambda: _spent(state, pending_usage),  # summed only if a limit reads it
            what=what,
            parent=parent,
            reserved_calls=reserved_calls,
        )
        self.node = node
        self.index = index
        self.retry_policy = retry_policy
        self.listened = has_listeners(config)
        if not self.listened:
            # Nobody records runs: the meter is the only handler model calls below need,
            # and a plain copy of the config is far cheaper than merging callback managers.
            self.config: RunnableConfig = {**(config or {}), "callbacks": [self.meter]}
            return
        best = best_attempt(state.get("attempts") or [])
        tags = ["langgraph-refine", f"{options.name}:{node}", f"iteration:{index}"]
        drafts: dict[str, Any] = {}
        if node == "generate":  # an attempt's tokens: tagged with it, or kept out of chats
            drafts = {"refine_attempt": index}
            if not options.stream_drafts:
                tags.append(TAG_NOSTREAM)
        merged = merge_configs(
            config,
            {
                "callbacks": [self.meter],
                "run_name": f"{options.name}:{node}",
                "tags": tags,
                "metadata": {
                    **drafts,
                    "refine_loop": options.name,
                    "iteration": index,
                    "best_score": best.score if best else None,
                },
            },
        )
        # One meter per call: the enclosing ones count through `parent`, not as handlers.
        self.config = only_meter(merged, self.meter)  # type: ignore[assignment, arg-type]

    def call(self, fn: Callable[..., T], *args: Any, model_call: bool = True) -> T:
        """Call `fn(*args)` (sync) under the meter, cut off when the time budget runs out.

        Model calls inside `fn` that pass no config of their own inherit this step's
        config (and so its meter) from the context. A call that fails with an error the
        retry policy retries is made again after the policy's backoff (and the server's
        `Retry-After`), under the same meter: the budget counts every call sent and can
        refuse the retry.

        Args:
            fn: The function to call.
            *args: Its arguments.
            model_call: Whether the invocation is a model call (a generator, a judge):
                the budget is checked before it starts, and it counts as one call if
                no model call was seen inside it (`BudgetMeter.invocation`). A
                deterministic evaluator is not; model calls it makes are still checked
                and counted as they start.

        Raises:
            BudgetStop: If a limit is reached before or during the call (or a retry).
        """
        tries = 1
        while True:
            try:
                return self._call_once(fn, args, model_call)
            except Exception as exc:
                wait = self._retry_wait(exc, tries)
                if wait is None:
                    raise
            time.sleep(wait)
            tries += 1

    def run(self, fn: Callable[..., T], *args: Any, what: str, model_call: bool = True) -> T:
        """`call`; an error leaving it is noted and carries the best result (`on_error`).

        `what` names who failed (`"generator"`, `"evaluator"`); a budget stop and
        LangGraph's signals leave as they are.
        """
        with _Reported(self, what):
            return self.call(fn, *args, model_call=model_call)

    async def arun(
        self, fn: Callable[..., Awaitable[T]], *args: Any, what: str, model_call: bool = True
    ) -> T:
        """Async twin of `run`."""
        with _Reported(self, what):
            return await self.acall(fn, *args, model_call=model_call)

    async def acall(
        self, fn: Callable[..., Awaitable[T]], *args: Any, model_call: bool = True
    ) -> T:
        """Await `fn(*args)` under the meter, cancelled when the time budget runs out.

        Runs in the caller's task (no task per round) unless there is a time limit; a
        failed call is retried as in `call`.

        Raises:
            BudgetStop: If a limit is reached before or during the call (or a retry).
        """
        tries = 1
        while True:
            try:
                return await self._acall_once(fn, args, model_call)
            except Exception as exc:
                wait = self._retry_wait(exc, tries)
                if wait is None:
                    raise
            await asyncio.sleep(wait)
            tries += 1

    def _call_once(self, fn: Callable[..., T], args: tuple[Any, ...], model_call: bool) -> T:
        left = self._seconds_left()
        token = var_child_runnable_config.set(self.config)
        try:
            with self.meter.invocation(model_call) as done, deadline(left):
                if left is None:
                    return done(fn(*args))
                context = contextvars.copy_context()
                return done(call_with_deadline(context, fn, args, left, f"refine-{self.node}"))
        except _DeadlinePassed:
            raise self._timed_out() from None
        finally:
            var_child_runnable_config.reset(token)

    async def _acall_once(
        self, fn: Callable[..., Awaitable[T]], args: tuple[Any, ...], model_call: bool
    ) -> T:
        left = self._seconds_left()
        token = var_child_runnable_config.set(self.config)
        try:
            with self.meter.invocation(model_call) as done, deadline(left):
                if left is None:
                    return done(await fn(*args))
                try:
                    return done(await asyncio.wait_for(fn(*args), left))
                except TimeoutError:
                    raise _DeadlinePassed from None
        except _DeadlinePassed:
            raise self._timed_out() from None
        finally:
            var_child_runnable_config.reset(token)

    def _retry_wait(self, exc: Exception, tries: int) -> float | None:
        """Seconds to wait before trying the call again after `exc`; None: no retry follows.

        As LangGraph retries a node: the first policy whose `retry_on` takes the error
        applies while `tries` is below its `max_attempts` (`retry_follows`), after its
        backoff and the server's `Retry-After` (`retry_wait`). A budget stop and
        LangGraph's own signals (interrupts, commands) are never retried.
        """
        if isinstance(exc, BudgetStop | GraphBubbleUp) or tries_left() == 0:
            return None  # a judgment's tries spent: its retries and re-asks never multiply
        policy = retry_follows(exc, self.retry_policy, tries)
        if policy is None:
            return None
        wait = retry_wait(exc, policy, tries)
        left = seconds_left(self.meter)
        if left is not None and wait >= left:  # the wait would outlast the time budget
            raise self._timed_out(f"its retry would wait {wait:.1f} s") from exc
        _log_retry(self, exc, wait, tries + 1)
        return wait

    def _seconds_left(self) -> float | None:
        """The seconds left before the time limit; None for no deadline."""
        left = seconds_left(self.meter)
        # With no time left, a call that is not itself a model call still runs: its
        # model calls (if any) are refused as they start.
        return left if left is not None and left > 0 else None

    def _timed_out(self, why: str = "was cut off") -> BudgetStop:
        seconds = self.budget.max_seconds if self.budget is not None else None
        return BudgetStop(
            f"max_seconds={seconds} reached: the {self.node} call {why} on attempt {self.index}"
        )

    def on_error(self, exc: BaseException, what: str) -> None:
        """A failed call's error, as it leaves the step (retries already happened in `call`).

        Notes which attempt, node (and HTTP status) it came from, and carries the best
        result so far (`.result`), what this step spent included, so no paid work is lost.
        A generator's failure ends the loop on a model call that failed: its result's
        `stop_reason` is `model_error`.
        """
        add_context(exc, what, self.index, self.node)
        stop: StopReason | None = "model_error" if what == "generator" else None
        attach_result(exc, self.result_so_far(stop))

    def result_so_far(self, stop_reason: StopReason | None = None) -> RefineResult | None:
        """The best result before this step failed, its calls counted (None if it cannot be read).

        Args:
            stop_reason: Why the loop ends with it, when the failure ends it.
        """
        try:
            result = RefineResult.from_state(
                dict(self.state), output_schema=self.options.output_schema
            )
        except Exception:  # never hide the step's own error behind this one
            return None
        update: dict[str, Any] = {"usage": result.usage + self.meter.delta()}
        if stop_reason is not None:
            update["stop_reason"] = stop_reason
        return result.model_copy(update=update)


def _log_retry(step: Step, exc: BaseException, wait: float, try_number: int) -> None:
    logger.info(
        "%s: retrying the %s call of attempt %d in %.2f s (try %d) after %s: %s",
        step.options.name,
        step.node,
        step.index,
        wait,
        try_number,
        type(exc).__name__,
        exc,
    )


def call_with_deadline(
    context: contextvars.Context, fn: Callable[..., T], args: Any, left: float, name: str
) -> T:
    """`fn(*args)` in `context`, given up after `left` seconds (`_DeadlinePassed`).

    A sync call cannot be cancelled: it runs in a daemon thread. Its requests are sent
    with timeouts that end at the same deadline (`_clients.deadline`, set in `context`),
    so the thread is waited for a moment longer (`_GRACE`): its socket closes and it ends
    before the run goes on. One that still runs then (a client the loop does not hold)
    is abandoned; its reply, if it ever comes, is dropped. When the caller's thread is
    interrupted (Ctrl-C) while it waits, the requests the thread has open are shut down
    (`_clients.interrupt`) before the interrupt goes on.
    """
    outcome: list[Any] = []
    streams: list[Any] = []

    def target() -> None:
        try:
            with interruptible() as opened:
                streams.append(opened)
                outcome.append((True, fn(*args)))
        except BaseException as exc:  # handed to the caller's thread below
            outcome.append((False, exc))

    worker = threading.Thread(target=context.run, args=(target,), name=name, daemon=True)
    worker.start()
    try:
        worker.join(left)
    except BaseException:  # Ctrl-C: close what the worker has open, then go on
        for opened in streams:
            interrupt(opened)
        raise
    if not outcome:
        worker.join(_GRACE)
        raise _DeadlinePassed
    ok, value = outcome[0]
    if ok:
        return value  # type: ignore[no-any-return]
    raise value


def _spent(state: Mapping[str, Any], pending_usage: Usage | None) -> Usage:
    """The loop's usage before a step: the state's total, and a pending generation's."""
    spent = state.get("usage") or Usage()
    if pending_usage is not None:  # the generation not yet added to the total
        spent = spent + pending_usage
    return spent


_GRACE = 0.3
"""Seconds a sync call cut off at its deadline is given to close its request (its socket
times out at the same deadline) before the run goes on without it."""


class _DeadlinePassed(Exception):
    """`max_seconds` ran out during a call (counted as sent, then a `BudgetStop`)."""


class _Reported:
    """Around a step's call: an error leaving it is reported (`Step.on_error`) as `what`'s.

    A budget stop and LangGraph's signals leave as they are.
    """

    __slots__ = ("step", "what")

    def __init__(self, step: Step, what: str) -> None:
        self.step, self.what = step, what

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: Any, exc: BaseException | None, trace: Any) -> None:
        if isinstance(exc, Exception) and not isinstance(exc, BudgetStop | GraphBubbleUp):
            self.step.on_error(exc, self.what)

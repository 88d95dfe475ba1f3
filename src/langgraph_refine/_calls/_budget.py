"""Budgets: limits on model calls, tokens, seconds and cost, and the meter that enforces them.

The meter is a LangChain callback handler. A node of the loop attaches it to the config
it runs with, so it sees every chat model (or LLM) that starts under the node, whoever
makes the call: the generator, the judge, a model inside a user's evaluator or inside a
graph generator, and every retry. It refuses a call by raising from the start event
(callbacks with `raise_error=True` abort the call before any request is sent); the
node turns that into the loop's budget stop.

A refusal raised from a callback travels as `Refusal`, a `BaseException`, and becomes
the `BudgetStop` (or `UnknownPriceError`) it carries again where the loop called the
model (`BudgetMeter.invocation`, `metered`). LangChain's callback manager logs every
`Exception` a handler raises ("Error in BudgetMeter.on_chat_model_start callback")
before re-raising it, even with `raise_error=True`; a refusal is the budget working,
not a handler failing, so it must not show as an error, and a `BaseException` passes
the manager's `except Exception` unlogged. (It also passes `with_retry`, fallbacks,
LangGraph retry policies and a tool node's error handling, none of which should turn a
budget stop into a retry or a tool message.)

**Nested loops.** A loop run inside another loop's step (a generator or evaluator that
runs `refine`, an agent's tool that does) spends from the outer budget too: its meter
has the enclosing step's meter as `parent` (found in the config it inherits), counts
every call in each meter of the chain, and refuses a call when any of them is spent. So
an inner budget can only be tighter, and the outer `usage` holds the inner calls.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import math
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler, BaseCallbackManager
from langchain_core.outputs import LLMResult
from langchain_core.runnables.config import ensure_config, merge_configs, var_child_runnable_config

from langgraph_refine._calls._prices import (
    ModelRef,
    Price,
    Pricing,
    check_prices,
    ref_from_metadata,
    ref_from_reply,
    ref_of_model,
    unknown_price_message,
)
from langgraph_refine._errors import Unjudged, UnknownPriceError
from langgraph_refine._state import Usage
from langgraph_refine._typed import structured_parts

T = TypeVar("T")


@dataclass(frozen=True)
class Budget:
    """Limits on what one loop may spend. `None` means no limit.

    Args:
        max_calls: Model calls: every chat model or LLM call made while a loop node
            runs (generator, judge, models inside evaluators and graph generators,
            retries included). A generator or judge invocation in which no model call is
            seen (a plain callable, a client outside LangChain) counts as one call,
            failed invocations too.
        max_tokens: Total tokens, from the models' usage metadata.
        max_seconds: Seconds spent generating and evaluating; a hard ceiling: a model
            call still running when the time runs out is cut off. Time paused in a
            human review or between a crash and its resume does not count.
        max_cost: US dollars, each call priced from its tokens and its model's price.
            A call to a model without a known price fails with `UnknownPriceError`
            before it is sent.
        prices: Prices that add to or override the `genai-prices` data, by model name
            as LangChain reports it: `{"my-model": {"input": 0.15, "output": 0.6}}` in
            USD per million tokens (optional `"cache_read"` for cached input tokens).

    Raises:
        ValueError: If a limit is a boolean, NaN, negative, or not a number, or a price
            is malformed.

    Example:
        >>> Budget(max_calls=6, max_tokens=20_000)
        Budget(max_calls=6, max_tokens=20000, max_seconds=None, max_cost=None)
        >>> Budget(max_cost=0.05, prices={"my-model": {"input": 0.1, "output": 0.4}}).max_cost
        0.05
    """

    max_calls: int | None = None
    max_tokens: int | None = None
    max_seconds: float | None = None
    max_cost: float | None = None
    prices: Mapping[str, Price] | None = field(default=None, repr=False, hash=False)

    def __post_init__(self) -> None:
        for name in LIMITS:
            value = getattr(self, name)
            if value is None:
                continue
            integral = name in ("max_calls", "max_tokens")
            kind = int if integral else int | float
            if (
                isinstance(value, bool)
                or not isinstance(value, kind)
                or math.isnan(value)
                or value < 0
            ):
                expected = "an integer >= 0" if integral else "a number >= 0"
                raise ValueError(f"Budget.{name} must be {expected} or None, got {value!r}")
        object.__setattr__(self, "prices", check_prices(self.prices))

    @classmethod
    def coerce(
        cls, value: Budget | dict[str, Any] | None, *, option: str = "budget"
    ) -> Budget | None:
        """A `Budget` from a `Budget`, a dict of its fields (per-run context, JSON), or None.

        Raises:
            ValueError: If the value is of another type or names an unknown field.
        """
        if value is None or isinstance(value, Budget):
            return value
        if isinstance(value, dict):
            unknown = sorted(set(value) - {*LIMITS, "prices"})
            if unknown:
                raise ValueError(
                    f"{option} has unknown field(s) {unknown}; use {', '.join(LIMITS)}, prices"
                )
            return cls(**value)
        raise ValueError(f"{option} must be a Budget, a dict or None, got {type(value).__name__}")

    @functools.cached_property
    def pricing(self) -> Pricing:
        """How this budget prices calls: its `prices`, then the `genai-prices` data."""
        return Pricing(self.prices)

    def exceeded(self, usage: Usage, reserved_calls: int = 0) -> str | None:
        """Name the first limit already reached by `usage`, or None if none is.

        Args:
            usage: What the loop spent.
            reserved_calls: Calls that must stay payable after the next one (the judgment
                of a generation about to start): `max_calls` is reached that much sooner.
        """
        if self.max_calls is not None and usage.calls + reserved_calls >= self.max_calls:
            made = f"{usage.calls} calls made"
            if reserved_calls:
                made += f"; judging another answer needs {reserved_calls} more"
            return f"max_calls={self.max_calls} reached ({made})"
        if self.max_tokens is not None and usage.total_tokens >= self.max_tokens:
            return f"max_tokens={self.max_tokens} reached ({usage.total_tokens} tokens used)"
        if self.max_seconds is not None and usage.seconds >= self.max_seconds:
            return f"max_seconds={self.max_seconds} reached ({usage.seconds:.2f}s spent)"
        if self.max_cost is not None and usage.cost is not None and usage.cost >= self.max_cost:
            return f"max_cost={self.max_cost} reached (${usage.cost:.6f} spent)"
        return None

    def seconds_left(self, usage: Usage) -> float | None:
        """Seconds left before `max_seconds` is reached, or None without a time limit."""
        if self.max_seconds is None:
            return None
        return max(0.0, self.max_seconds - usage.seconds)


LIMITS = ("max_calls", "max_tokens", "max_seconds", "max_cost")
"""The limits a `Budget` sets (its fields besides `prices`)."""

_NO_PRICES = Pricing()


def check_rungs_priced(
    budget: Budget | None, generators: Sequence[Any], option: str = "generator"
) -> None:
    """Refuse, before the loop's first call, a generator `max_cost` cannot price.

    Every rung of a ladder is known when the loop starts: an unpriced one would
    otherwise be found only when the loop climbs to it, after the rounds below were paid.
    `option` names the ladder in the message (`"models"` for an agent's).

    Raises:
        UnknownPriceError: With `max_cost` set, for the first chat model that neither
            `Budget(prices=...)` nor the `genai-prices` data prices (the message names
            the rung and shows how to price it).
    """
    if budget is None or budget.max_cost is None:
        return
    for position, generator in enumerate(generators):
        ref = ref_of_model(generator)
        if ref is None or budget.pricing.knows(ref):
            continue  # a model named only by its calls is checked as it calls
        message = unknown_price_message(ref, "generator")
        if len(generators) > 1:
            message = f"{option}[{position}] of the ladder (rung {position}): {message}"
        raise UnknownPriceError(message)


class BudgetStop(Exception):
    """Raised inside a step when the budget forbids the next model call."""


class TriesSpent(Unjudged):
    """A judgment used up its tries: its requests (retries and re-asks) are not sent again."""


class Refusal(BaseException):
    """A meter's refusal raised from a LangChain callback, on its way to the loop's code.

    Args:
        error: The `BudgetStop` or `UnknownPriceError` it carries.
    """

    def __init__(self, error: BudgetStop | UnknownPriceError | TriesSpent) -> None:
        super().__init__(error)
        self.error = error


class BudgetMeter(BaseCallbackHandler):
    """Counts the model calls, tokens and cost of one node run and refuses calls past the budget.

    Attach it to the node's config (`callbacks=[meter]`): LangChain hands it every chat
    model and LLM start and end under that config. The meter starts from the usage
    already recorded in state, so limits apply to the whole loop, not to one step.

    Calls no callback sees (a plain callable's, a client outside LangChain) are counted
    by the one rule of `invocation`: a generator or judge invocation in which the meter
    saw no model start counts as one call.

    Args:
        budget: The limits, or None to count only.
        spent_before: Usage recorded in state before this step, or a function giving it
            when first read (only limits read it: a step without a budget never sums it).
        what: Who calls the models (`"generator"`, `"evaluator"`), for error messages.
        parent: The meter of the loop step this one runs inside (a nested loop), which
            counts its calls too and whose budget it also obeys; None for an outermost
            loop.
        reserved_calls: Calls kept payable after any call checked (a generation's judgment).
    """

    raise_error = True  # a refusal must abort the call, not be logged and ignored
    run_inline = True  # count in the caller's thread, in order, even under asyncio

    def __init__(
        self,
        budget: Budget | None,
        spent_before: Usage | Callable[[], Usage],
        *,
        what: str = "loop",
        parent: BudgetMeter | None = None,
        reserved_calls: int = 0,
    ) -> None:
        self.budget = budget
        self.parent = parent
        self.reserved_calls = reserved_calls
        self._spent_before = spent_before
        self.what = what
        self.calls = 0
        self.input_tokens = 0
        self.output_tokens = 0
        self.total_tokens = 0
        self.cost: float | None = 0.0
        self.cache_hits = 0
        self.started = time.perf_counter()
        self._runs: dict[UUID, ModelRef | None] = {}  # calls started, not yet ended
        # The error of the latest call that failed, until a call succeeds after it: a
        # middleware that turns a failure into a reply cannot hide it (see `_agent_calls`).
        self.failure: BaseException | None = None
        self._pricing = budget.pricing if budget is not None else _NO_PRICES

    @property
    def spent_before(self) -> Usage:
        """Usage recorded in state before this step."""
        if not isinstance(self._spent_before, Usage):
            self._spent_before = self._spent_before()
        return self._spent_before

    def delta(self) -> Usage:
        """What this step spent so far."""
        return Usage(
            calls=self.calls,
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            total_tokens=self.total_tokens,
            seconds=time.perf_counter() - self.started,
            cost=self.cost,
            cache_hits=self.cache_hits,
        )

    def total(self) -> Usage:
        """The loop's usage including this step."""
        return self.spent_before + self.delta()

    def chain(self) -> list[BudgetMeter]:
        """This meter and the meters of the loops it runs inside, innermost first."""
        if self.parent is None:  # the common case: an outermost loop
            return [self]
        meters = [self]
        while meters[-1].parent is not None and len(meters) < 64:  # never loop on a cycle
            meters.append(meters[-1].parent)
        return meters

    def check(self) -> None:
        """Raise `BudgetStop` if any limit (this loop's or an enclosing loop's) is reached."""
        if self.budget is None and self.parent is None:
            return
        for depth, meter in enumerate(self.chain()):
            if meter.budget is None:
                continue
            reason = meter.budget.exceeded(meter.total(), meter.reserved_calls)
            if reason is not None:
                raise BudgetStop(reason if depth == 0 else f"{reason} in an enclosing loop")

    @contextlib.contextmanager
    def invocation(self, model_call: bool = True) -> Iterator[Callable[[T], T]]:
        """One generator or judge invocation, under the rule for calls no callback saw.

        The budget is checked before it starts. If no model start was seen inside it,
        the invocation counts as one call, with the tokens and cost of its reply (hand
        the reply to the function this yields). One that failed counts too (its request
        may have been sent; a failure reports no tokens, so it adds no cost); one refused
        by the budget does not. Starts are told apart per invocation (a context
        variable), so concurrent invocations do not see each other's calls.

        Args:
            model_call: False for an invocation that is not itself a model call (a
                deterministic evaluator): nothing is checked or counted for it.

        Raises:
            BudgetStop: If a limit is already reached.
            UnknownPriceError: With `max_cost`, when an uncounted invocation's reply
                names no priced model.

        Example:
            >>> meter = BudgetMeter(Budget(max_calls=1), Usage())
            >>> with meter.invocation() as done:
            ...     reply = done("a reply from a client LangChain does not see")
            >>> meter.calls
            1
        """
        if not model_call:
            with unwrapped():  # refused in a callback: the error it carries
                yield _same
            return
        self.check()
        check_tries()
        seen = [0]  # model starts inside this invocation (see `_start`)
        replies: list[Any] = []

        def done(reply: T) -> T:
            replies.append(reply)
            return reply

        token = _SEEN.set(seen)
        outcome = "returned"
        try:
            yield done
        except Refusal as refusal:  # refused in a callback: the error it carries
            outcome = "refused"
            raise refusal.error from None
        except (BudgetStop, UnknownPriceError, TriesSpent):
            outcome = "refused"
            raise
        except Exception:
            outcome = "failed"
            raise
        finally:
            _SEEN.reset(token)
            if outcome != "refused" or seen[0]:
                _settle(self, bool(seen[0]), outcome == "failed", replies[-1:])

    def _cost_capped(self) -> bool:
        return self.budget is not None and self.budget.max_cost is not None

    def _start(self, run_id: UUID, metadata: Mapping[str, Any] | None, kwargs: Any) -> None:
        # A handler attached twice, or a parent that is also a handler of the call, sees a
        # start twice: each meter counts a call once, by its run id.
        meters = [meter for meter in self.chain() if run_id not in meter._runs]
        if not meters:
            return
        ref = ref_from_metadata(metadata, **kwargs)
        try:
            self.check()
            for meter in meters:
                if meter._cost_capped() and not meter._pricing.knows(ref):
                    message = unknown_price_message(ref, meter.what, started=True)
                    raise UnknownPriceError(message)
            take_try()
        except (BudgetStop, UnknownPriceError, TriesSpent) as exc:
            raise Refusal(exc) from None  # see the module's docstring
        for meter in meters:
            meter._runs[run_id] = ref
            meter.calls += 1
        seen = _SEEN.get()
        if seen is not None:
            seen[0] += 1

    def _add_tokens(self, metadata: Any) -> None:
        self.input_tokens += int(metadata.get("input_tokens", 0) or 0)
        self.output_tokens += int(metadata.get("output_tokens", 0) or 0)
        self.total_tokens += int(metadata.get("total_tokens", 0) or 0)

    def _add_cost(self, ref: ModelRef | None, usage: Mapping[str, Any]) -> None:
        cost = self._pricing.cost(ref, usage)
        self.cost = None if cost is None or self.cost is None else self.cost + cost

    def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: Any,
        *,
        run_id: UUID,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """Refuse the call if a limit is reached or its price is needed but unknown."""
        self._start(run_id, metadata, kwargs)

    def on_llm_start(
        self,
        serialized: dict[str, Any],
        prompts: list[str],
        *,
        run_id: UUID,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """Refuse the call if a limit is reached or its price is needed but unknown."""
        self._start(run_id, metadata, kwargs)

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        """Add the tokens a failed call reports (OpenAI-style `completion.usage`)."""
        tokens = _error_tokens(error)
        for meter in self.chain():
            if run_id in meter._runs:
                meter.failure = error
                ref = meter._runs.pop(run_id)
                meter._add_tokens(tokens)
                meter._add_cost(ref, tokens)

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        """Add the tokens and cost the reply reports (chat usage metadata, else `llm_output`)."""
        for meter in self.chain():
            if run_id in meter._runs:
                meter.failure = None
                meter._end(response, meter._runs.pop(run_id))

    def _end(self, response: LLMResult, ref: ModelRef | None) -> None:
        if is_cache_hit(response):  # counted as a call at its start: it was none
            self.calls -= 1
            self.cache_hits += 1
            return
        usages = _reply_usages(response)
        if ref is None or not self._pricing.knows(ref):  # the reply may name the model
            messages = [getattr(g, "message", None) for gs in response.generations for g in gs]
            ref = next((r for m in messages if (r := ref_from_reply(m)) is not None), ref)
        for usage in usages:
            self._add_tokens(usage)
            self._add_cost(ref, usage)


def seconds_left(meter: BudgetMeter) -> float | None:
    """Seconds before the first time limit of `meter`'s chain, or None without one."""
    if meter.budget is None and meter.parent is None:  # no limit anywhere (as in `check`)
        return None
    lefts = [
        left
        for each in meter.chain()
        if each.budget is not None and (left := each.budget.seconds_left(each.total())) is not None
    ]
    return min(lefts, default=None)


def _settle(meter: BudgetMeter, seen: bool, failed: bool, reply: list[Any]) -> None:
    """Count an invocation that made no call a callback saw; tell the one around it."""
    outer = _SEEN.get()
    if outer is not None:  # a judge's model call inside the evaluator's invocation
        outer[0] += 1
    if seen:
        return
    with contextlib.suppress(TriesSpent):  # made already: it only uses up a try
        take_try()
    if failed:
        for each in meter.chain():
            each.calls += 1
        return
    _count_call(meter, reply[0] if reply else None)


def _count_call(meter: BudgetMeter, reply: Any = None) -> None:
    """Count one model call made outside LangChain's callbacks.

    Args:
        meter: The meter of the invocation (its enclosing loops' meters count it too).
        reply: What the call returned; the tokens and model of the AI message in it
            (a message, a structured-output dict with `"raw"`, an agent's model
            response) are counted and priced when present.

    Raises:
        UnknownPriceError: With `max_cost` set, when the reply names no priced model
            (the call was made; it is counted before the error).
    """
    message = _reply_message(reply)
    usage = getattr(message, "usage_metadata", None) or {}
    ref = ref_from_reply(message)
    for each in meter.chain():
        each.calls += 1
        each._add_tokens(usage)
        each._add_cost(ref, usage)
    for each in meter.chain():
        if each._cost_capped() and not each._pricing.knows(ref):
            raise UnknownPriceError(unknown_price_message(ref, each.what))


def is_cache_hit(response: LLMResult) -> bool:
    """True if a model cache answered the call (no request reached the provider).

    LangChain starts a cached call's callbacks like any other and, on a hit, marks each
    cached reply's usage metadata with `total_cost` 0 (`_convert_cached_generations`),
    a key no provider's reply carries; the tokens it keeps are those of the original
    call, which this run did not pay for.
    """
    messages = [getattr(g, "message", None) for gs in response.generations for g in gs]
    return bool(messages) and all(
        isinstance(usage := getattr(m, "usage_metadata", None), Mapping)
        and usage.get("total_cost") == 0
        for m in messages
    )


def _reply_usages(response: LLMResult) -> list[Mapping[str, Any]]:
    """The token usage a reply reports: its messages' usage metadata, else `llm_output`."""
    usages = [
        metadata
        for generations in response.generations
        for generation in generations
        if (metadata := getattr(getattr(generation, "message", None), "usage_metadata", None))
    ]
    if usages:
        return usages
    usage = (response.llm_output or {}).get("token_usage") or {}
    return [
        {
            "input_tokens": usage.get("prompt_tokens", 0),
            "output_tokens": usage.get("completion_tokens", 0),
            "total_tokens": usage.get("total_tokens", 0),
        }
    ]


def _error_tokens(error: BaseException) -> dict[str, int]:
    """The tokens a failed call reports, else zeros.

    OpenAI-style errors carry them as `completion.usage`; a reply the client received
    and then could not parse into the requested structure (a judge's unreadable reply)
    carries the HTTP response itself as `response` (LangChain attaches it), whose body
    holds `usage`: those tokens were paid for too.
    """
    usage: Any = getattr(getattr(error, "completion", None), "usage", None)
    if usage is None:
        usage = _body_usage(getattr(error, "response", None))
    prompt = int(_field(usage, "prompt_tokens") or 0)
    completion = int(_field(usage, "completion_tokens") or 0)
    return {
        "input_tokens": prompt,
        "output_tokens": completion,
        "total_tokens": prompt + completion,
    }


def _body_usage(response: Any) -> Any:
    """The `usage` object of an HTTP response's JSON body, if it has one."""
    read = getattr(response, "json", None)
    if not callable(read):
        return None
    try:
        body = read()
    except Exception:  # not JSON, or not read: no usage to count
        return None
    return body.get("usage") if isinstance(body, Mapping) else None


def _field(usage: Any, name: str) -> Any:
    return usage.get(name) if isinstance(usage, Mapping) else getattr(usage, name, None)


_SEEN: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar(
    "langgraph_refine_seen", default=None
)
"""The model starts seen inside the innermost running `BudgetMeter.invocation`."""

_TRIES: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar(
    "langgraph_refine_tries", default=None
)
"""The requests the judgment running in this context may still send (see `judgment_tries`)."""


@contextlib.contextmanager
def judgment_tries(tries: int) -> Iterator[list[int]]:
    """One judgment's requests, all causes together: at most `tries` in the block.

    A judge's transport retries (`Step.call`), its own re-asks of an unreadable reply and
    the loop's re-judgments each send requests; counted here together, they never
    multiply. Past the last try a request is refused (`TriesSpent`) before it is sent.

    Yields:
        A one-item list: the tries left, updated as requests start.
    """
    left = [tries]
    token = _TRIES.set(left)
    try:
        yield left
    finally:
        _TRIES.reset(token)


def tries_left() -> int | None:
    """The requests the running judgment may still send; None outside a judgment."""
    left = _TRIES.get()
    return None if left is None else left[0]


def check_tries() -> None:
    """Raise `TriesSpent` when the running judgment has no request left."""
    left = _TRIES.get()
    if left is not None and left[0] <= 0:
        raise TriesSpent("the judge's tries are spent: no judgment was made")


def take_try() -> None:
    """Use one of the running judgment's tries for a request about to be sent."""
    check_tries()
    left = _TRIES.get()
    if left is not None:
        left[0] -= 1


def _same(value: T) -> T:
    return value


def _reply_message(reply: Any) -> Any:
    """The AI message in what a model invocation returned, if there is one."""
    parts = structured_parts(reply)  # structured output with include_raw
    if parts is not None:
        return parts[0]
    result = getattr(reply, "result", None)  # an agent middleware's ModelResponse
    if isinstance(result, list):
        return next((m for m in reversed(result) if getattr(m, "usage_metadata", None)), None)
    return reply


def active_meter() -> BudgetMeter | None:
    """The meter attached to the current run's config (a loop node's), if any."""
    return enclosing_meter(var_child_runnable_config.get())


@contextlib.contextmanager
def model_invocation() -> Iterator[Callable[[T], T]]:
    """`BudgetMeter.invocation` on the current run's meter; a no-op outside a loop node.

    For code that calls a model inside an evaluator (the LLM judge): each such call
    counts even when it bypasses LangChain's callbacks (a custom structured-output client).
    """
    meter = active_meter()
    if meter is None:
        yield _same
        return
    with meter.invocation() as done:
        yield done


def counted_inside() -> None:
    """Tell the invocation around this code that its model calls were counted inside it.

    An evaluator that calls a model on some paths only (a cascade whose judge stage was
    not reached) runs as one model-calling invocation, which counts as one call when no
    call was seen in it. Such an evaluator runs each of its model-calling parts in its own
    `model_invocation` and calls this, so what was not run is not counted. A no-op
    outside an invocation.

    Example:
        >>> meter = BudgetMeter(Budget(max_calls=2), Usage())
        >>> with meter.invocation():
        ...     counted_inside()  # e.g. a cheap check failed, so no judge was asked
        >>> meter.calls
        0
    """
    seen = _SEEN.get()
    if seen is not None:
        seen[0] += 1


def enclosing_meter(config: Mapping[str, Any] | None) -> BudgetMeter | None:
    """The meter among a config's callbacks: the enclosing loop step's, in a nested loop."""
    callbacks = (config or {}).get("callbacks")
    lists: tuple[Sequence[Any], ...]
    if isinstance(callbacks, BaseCallbackManager):
        lists = (callbacks.handlers, callbacks.inheritable_handlers)
    else:
        lists = (callbacks or [],)
    for handlers in lists:
        for handler in handlers:
            if isinstance(handler, BudgetMeter):
                return handler
    return None


def only_meter(config: dict[str, Any], meter: BudgetMeter) -> dict[str, Any]:
    """`config` with `meter` as its only meter (enclosing meters count through `parent`).

    Returns:
        The config, its callback manager copied if a meter had to be removed from it.
    """
    callbacks = config.get("callbacks")
    if not isinstance(callbacks, BaseCallbackManager):
        return config
    others = [
        h
        for h in {*callbacks.handlers, *callbacks.inheritable_handlers}
        if isinstance(h, BudgetMeter) and h is not meter
    ]
    if not others:
        return config
    callbacks = callbacks.copy()
    for handler in others:
        callbacks.remove_handler(handler)
    return {**config, "callbacks": callbacks}


@contextlib.contextmanager
def unwrapped() -> Iterator[None]:
    """Turn a `Refusal` raised in the block back into the error it carries."""
    try:
        yield
    except Refusal as refusal:
        raise refusal.error from None


@contextlib.contextmanager
def metered(meter: BudgetMeter) -> Iterator[BudgetMeter]:
    """Attach `meter` to the current run's config for the block.

    Model calls made in the block without a config of their own inherit the current
    one (LangChain's context), so the meter sees and checks them. For code that runs
    outside a loop node's `Step`, such as `RefineMiddleware`'s hooks. A refusal from
    the meter's callbacks leaves the block as the `BudgetStop` or `UnknownPriceError`.
    """
    config = merge_configs(ensure_config(), {"callbacks": [meter]})
    token = var_child_runnable_config.set(only_meter(config, meter))  # type: ignore[arg-type]
    try:
        with unwrapped():
            yield meter
    finally:
        var_child_runnable_config.reset(token)

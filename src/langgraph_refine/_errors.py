"""The exceptions this package raises, rooted in one `RefineError`."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from langgraph_refine._result import RefineResult


class RefineError(RuntimeError):
    """Base class for errors raised by langgraph-refine.

    A `RuntimeError`, so that LangGraph Server passes its message on to the client (the
    server replaces the message of errors that are not built-in types with "An internal
    error occurred"): a run that failed on a server says why in the user's terms.
    """


class ProviderError(RefineError):
    """The model provider failed a call for good (after the retries), on a served graph.

    The served graphs raise it in place of the client library's own error (whose message
    a server would hide); the message starts with "the model provider failed:" and holds
    the provider's error type and text. The original error is its `__cause__`.
    """


class BudgetExhaustedError(RefineError):
    """A budget limit was reached and `on_budget_exhausted="raise"` was set.

    Attributes:
        result: The best `RefineResult` reached before the budget ran out.
    """

    def __init__(self, message: str, result: RefineResult) -> None:
        super().__init__(message)
        self.result = result


class ReviewInputError(RefineError, ValueError):
    """A human-review answer was malformed.

    Inside the graph the review pauses again (its payload gains an `error` key), so the
    interrupt stays pending; `refine(reviewer=...)` raises this when its reviewer keeps
    answering with malformed values.
    """


class ThreadSettingsError(RefineError, ValueError):
    """A thread's unfinished run was started with another task or other settings.

    Raised before any model call when `refine` / `arefine` (or the command line) is
    asked to continue a thread whose unfinished run had another task, check, or option
    that changes scores or stops: continuing would score some rounds one way and the
    rest another, and starting over would drop the unfinished run. Rerun with the same
    settings to continue it, use another thread, or pass `restart=True` to start over.

    Attributes:
        differences: `(name, started with, now)` for each setting that differs.
    """

    def __init__(self, differences: list[tuple[str, str, str]]) -> None:
        self.differences = tuple(differences)
        super().__init__(
            f"this thread holds an unfinished run started differently "
            f"({describe_differences(self.differences)}); rerun with the same task and "
            "settings to continue it, pass another thread_id to start a new run, or "
            "restart=True to discard it and start over on this thread"
        )


class ThreadBusyError(RefineError):
    """Another run is writing this checkpoint thread right now.

    Raised before any model call by `refine` / `arefine` (and the command line) when the
    same checkpointer's thread is claimed by a run still in progress, in this process or
    another one: two writers would both pay for every round and interleave their
    checkpoints. A writer that crashed holds no claim (see `_loop._claim`), so its thread
    can be resumed. Wait for the other run to end, or use another thread.

    Attributes:
        thread_id: The thread.
    """

    def __init__(self, thread_id: str, holder: str) -> None:
        self.thread_id = thread_id
        super().__init__(
            f"thread {thread_id!r} is in use: {holder}; wait for that run to end, or use "
            "another thread"
        )


def describe_differences(differences: tuple[tuple[str, str, str], ...]) -> str:
    """`name: started with X, now Y` for each difference, separated by semicolons."""
    return "; ".join(f"{name}: started with {was}, now {now}" for name, was, now in differences)


class ContextLengthError(RefineError):
    """The generator's prompt exceeded the model's context, even in its smallest form.

    Raised after the round was retried once with the smallest refinement prompt (the task,
    the refined attempt cut short, its feedback). The checkpointed state is intact.

    Attributes:
        result: The best `RefineResult` so far, or None if no attempt was evaluated.
    """

    def __init__(self, message: str, result: RefineResult | None) -> None:
        super().__init__(message)
        self.result = result


class UnknownPriceError(RefineError, ValueError):
    """`Budget.max_cost` is set and a model call cannot be priced.

    Raised when a call starts to a model that neither the `genai-prices` data nor
    `Budget(prices=...)` prices (the call is not sent), or when a call the budget could
    not see beforehand (a plain callable's, a client outside LangChain) returns without
    naming a priced model. The message names the model and shows how to give its price.
    """


def attach_result(exc: BaseException, result: RefineResult | None) -> None:
    """Give `exc` the best result so far as `.result`, unless it already carries one.

    Every error a loop raises after its first model call carries what that call and the
    ones after it bought (the attempts and the usage), whatever the error's type: a
    caller (the command line, a batch row) keeps the paid work and shows it before the
    error. Nothing is attached when no call was made and no attempt generated.
    """
    if result is None or getattr(exc, "result", None) is not None:
        return
    if not result.attempts and not result.usage.calls:
        return
    with contextlib.suppress(AttributeError):  # an exception type with __slots__
        exc.result = result  # type: ignore[attr-defined]


class Unjudged(RefineError):
    """An evaluator could not judge the response: no verdict on the response at all.

    Raised by the ready evaluators when no judgment could be made (an LLM judge whose
    replies stayed unreadable after its own re-ask, a panel with no member able to
    judge); raise it from your own evaluator for the same meaning. The loop keeps such an
    attempt unjudged (`score` None, `Attempt.error` holding this message) instead of
    counting it as failed, and `on_evaluator_error=` says what it does next. Any other
    exception your evaluator raises is a bug and stops the run.

    Example:
        >>> str(Unjudged("the grading service is down"))
        'the grading service is down'
    """


class CalibrationMismatchError(RefineError, ValueError):
    """A calibration used with a judge other than the one it was made for.

    A calibration records what its judge is (its checks, model, criteria and prompt);
    with another judge its threshold means nothing, so it is refused before any call.
    """

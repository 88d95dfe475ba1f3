"""The exceptions this package raises, rooted in one `RefineError`."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from langgraph_refine._result import RefineResult


class RefineError(Exception):
    """Base class for errors raised by langgraph-refine."""


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

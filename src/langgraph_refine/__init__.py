"""langgraph-refine: the evaluator-optimizer (self-refine) loop as reusable LangGraph subgraphs.

Build the loop with `create_refine_graph` (an uncompiled `StateGraph`: compile it with
your own checkpointer), or run it in one call with `refine` / `arefine`. The loop's
options are declared once, in `LoopOptions`: build them once and pass them as `options=`
to either, or to `RefineMiddleware`. For custom
topologies, `GeneratorNode`, `EvaluatorNode`, `ReviewNode` and `route_after_evaluation`
are the building blocks. Inside a LangChain agent (`create_agent`), use
`RefineMiddleware` (needs the `agents` extra).
"""

from typing import TYPE_CHECKING, Any

from langgraph_refine import evaluators
from langgraph_refine._calls._budget import Budget
from langgraph_refine._decisions._options import LoopOptions, RefineContext, RefineOptions
from langgraph_refine._errors import (
    BudgetExhaustedError,
    ContextLengthError,
    ProviderError,
    RefineError,
    ReviewInputError,
    ThreadBusyError,
    ThreadSettingsError,
    UnknownPriceError,
)
from langgraph_refine._events import ProgressCard, ReviewPayload, RoundEvent, StopEvent
from langgraph_refine._loop._evaluate import EvaluatorNode
from langgraph_refine._loop._generate import GeneratorNode
from langgraph_refine._loop._graph import create_refine_graph
from langgraph_refine._loop._review import ReviewNode
from langgraph_refine._loop._router import route_after_evaluation
from langgraph_refine._loop._run import arefine, refine
from langgraph_refine._records._record import astrategy_records, strategy_records
from langgraph_refine._result import RefineResult, best_attempt
from langgraph_refine._state import Attempt, Evaluation, RefineState, Usage
from langgraph_refine._stop_rules import StopRules
from langgraph_refine._version import __version__ as __version__

if TYPE_CHECKING:
    from langgraph_refine._agents._middleware import RefineMiddleware as RefineMiddleware

__all__ = [
    "Attempt",
    "Budget",
    "BudgetExhaustedError",
    "ContextLengthError",
    "Evaluation",
    "EvaluatorNode",
    "GeneratorNode",
    "LoopOptions",
    "ProgressCard",
    "ProviderError",
    "RefineContext",
    "RefineError",
    "RefineOptions",
    "RefineResult",
    "RefineState",
    "ReviewInputError",
    "ReviewNode",
    "ReviewPayload",
    "RoundEvent",
    "StopEvent",
    "StopRules",
    "ThreadBusyError",
    "ThreadSettingsError",
    "UnknownPriceError",
    "Usage",
    "arefine",
    "astrategy_records",
    "best_attempt",
    "create_refine_graph",
    "evaluators",
    "refine",
    "route_after_evaluation",
    "strategy_records",
]


def __getattr__(name: str) -> Any:
    # RefineMiddleware is built on LangChain's agents, an optional dependency: import it
    # on first use, so `import langgraph_refine` works without `langchain` installed.
    # (Not in __all__, so `from langgraph_refine import *` needs no `langchain` either.)
    if name == "RefineMiddleware":
        from langgraph_refine._agents._middleware import RefineMiddleware

        return RefineMiddleware
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

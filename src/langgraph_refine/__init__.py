"""langgraph-refine: the evaluator-optimizer (self-refine) loop as reusable LangGraph subgraphs.

Build the loop with `create_refine_graph` (an uncompiled `StateGraph`: compile it with
your own checkpointer), or run it in one call with `refine` / `arefine`.
"""

from langgraph_refine import evaluators
from langgraph_refine._budget import Budget
from langgraph_refine._errors import (
    BudgetExhaustedError,
    RefineError,
    ReviewInputError,
)
from langgraph_refine._graph import create_refine_graph
from langgraph_refine._memory import MemoryPolicy
from langgraph_refine._nodes import EvaluatorNode, GeneratorNode, ReviewNode
from langgraph_refine._result import RefineResult, best_attempt
from langgraph_refine._retry import DEFAULT_RETRY_POLICY
from langgraph_refine._router import route_after_evaluation, route_after_generation
from langgraph_refine._run import arefine, refine
from langgraph_refine._state import (
    Attempt,
    Candidate,
    Evaluation,
    RefineInput,
    RefineOutput,
    RefineState,
    StopReason,
    Usage,
    Verdict,
)
from langgraph_refine._stop_rules import StopRules

__all__ = [
    "DEFAULT_RETRY_POLICY",
    "Attempt",
    "Budget",
    "BudgetExhaustedError",
    "Candidate",
    "Evaluation",
    "EvaluatorNode",
    "GeneratorNode",
    "MemoryPolicy",
    "RefineError",
    "RefineInput",
    "RefineOutput",
    "RefineResult",
    "RefineState",
    "ReviewInputError",
    "ReviewNode",
    "StopReason",
    "StopRules",
    "Usage",
    "Verdict",
    "arefine",
    "best_attempt",
    "create_refine_graph",
    "evaluators",
    "refine",
    "route_after_evaluation",
    "route_after_generation",
]

__version__ = "0.1.0"

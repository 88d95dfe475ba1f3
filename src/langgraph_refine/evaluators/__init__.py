"""Ready evaluators. Each returns an `Evaluation` whose feedback says what to change.

Example:
    >>> from langgraph_refine import evaluators
    >>> ev = evaluators.combine(lambda r, s: 1.0, lambda r, s: 0.5)
    >>> ev.evaluate("some text", {"task": "t"}).score
    0.75
"""

from langgraph_refine._evaluation import BaseEvaluator, CallableEvaluator
from langgraph_refine.evaluators._combine import CombinedEvaluator, combine
from langgraph_refine.evaluators._judge import LLMJudge, llm_judge

__all__ = [
    "BaseEvaluator",
    "CallableEvaluator",
    "CombinedEvaluator",
    "LLMJudge",
    "combine",
    "llm_judge",
]

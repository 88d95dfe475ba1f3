"""Ready evaluators. Each returns an `Evaluation` whose feedback says what to change.

Deterministic checks (`word_count`, `contains_all`, `matches_regex`, `no_repetition`,
`json_schema`, `python_tests`) call no model and cost nothing against the budget;
`llm_judge` asks a chat model; `checklist` has one check the response criterion by
criterion, naming each gap; `reward_model` wraps any reward function; `combine` takes
a weighted mean; `cascade` runs checks in stages, cheapest first, each gating the next;
`panel` a jury of judges decided by a rule; `calibrate` fits a judge's PASS to
people's labels (`store_labels` reads the loop's own human reviews as labels). A
graph (a `create_agent` judge with tools) is an evaluator too (`RunnableEvaluator`).
Any of them can be passed as `evaluator=` to `create_refine_graph`, `refine` and
`arefine`, or called directly with `.evaluate(response, state)` / `.aevaluate(...)`.

Example:
    >>> from langgraph_refine import evaluators
    >>> ev = evaluators.combine(
    ...     evaluators.word_count(3, 10),
    ...     evaluators.contains_all(["owl", "lamp"]),
    ... )
    >>> result = ev.evaluate("An owl sat by the river.", {"task": "t"})
    >>> result.score
    0.75
    >>> result.details["scores"]
    {'word_count': 1.0, 'contains_all': 0.5}
    >>> print(result.feedback.splitlines()[1])  # doctest: +ELLIPSIS
    [contains_all] score 0.50: Missing 1 of 2 required words: "lamp". Use each of them, ...
"""

from langgraph_refine._errors import Unjudged
from langgraph_refine._state import PanelRule
from langgraph_refine.evaluators._base import BaseEvaluator, CallableEvaluator
from langgraph_refine.evaluators._calibrate import (
    CalibratedEvaluator,
    CalibrationReport,
    CalibrationWarning,
    acalibrate,
    calibrate,
)
from langgraph_refine.evaluators._cascade import CascadeEvaluator, cascade
from langgraph_refine.evaluators._checklist import ChecklistEvaluator, ChecklistReply, checklist
from langgraph_refine.evaluators._combine import CombinedEvaluator, combine
from langgraph_refine.evaluators._judge import JudgeReply, LLMJudge, llm_judge
from langgraph_refine.evaluators._labels import Label, langsmith_labels, read_labels, store_labels
from langgraph_refine.evaluators._openevals import OpenEvalsEvaluator
from langgraph_refine.evaluators._panel import PanelEvaluator, panel
from langgraph_refine.evaluators._python_tests import (
    LocalRunner,
    PythonTests,
    Runner,
    RunOutcome,
    RunRequest,
    python_tests,
)
from langgraph_refine.evaluators._repetition import NoRepetition, no_repetition
from langgraph_refine.evaluators._reward import RewardModel, reward_model
from langgraph_refine.evaluators._runnable import RunnableEvaluator
from langgraph_refine.evaluators._schema import JsonSchema, json_schema
from langgraph_refine.evaluators._tags import strip_tags
from langgraph_refine.evaluators._text import (
    ContainsAll,
    MatchesRegex,
    WordCount,
    contains_all,
    count_words,
    matches_regex,
    word_count,
)

__all__ = [
    "BaseEvaluator",
    "CalibratedEvaluator",
    "CalibrationReport",
    "CalibrationWarning",
    "CallableEvaluator",
    "CascadeEvaluator",
    "ChecklistEvaluator",
    "ChecklistReply",
    "CombinedEvaluator",
    "ContainsAll",
    "JsonSchema",
    "JudgeReply",
    "LLMJudge",
    "Label",
    "LocalRunner",
    "MatchesRegex",
    "NoRepetition",
    "OpenEvalsEvaluator",
    "PanelEvaluator",
    "PanelRule",
    "PythonTests",
    "RewardModel",
    "RunOutcome",
    "RunRequest",
    "RunnableEvaluator",
    "Runner",
    "Unjudged",
    "WordCount",
    "acalibrate",
    "calibrate",
    "cascade",
    "checklist",
    "combine",
    "contains_all",
    "count_words",
    "json_schema",
    "langsmith_labels",
    "llm_judge",
    "matches_regex",
    "no_repetition",
    "panel",
    "python_tests",
    "read_labels",
    "reward_model",
    "store_labels",
    "strip_tags",
    "word_count",
]

"""Evaluators built from specs: what the spec language (`_specs`) names, made real.

Parsing a spec (`langgraph_refine._calls._specs`) needs no evaluator; building one does, so the
building lives here, beside the evaluators, and the loop's options stay below this package.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from langgraph_refine._calls._specs import EvaluatorSpec, SpecError, spec_forms
from langgraph_refine.evaluators._cascade import cascade
from langgraph_refine.evaluators._checklist import checklist
from langgraph_refine.evaluators._judge import llm_judge
from langgraph_refine.evaluators._panel import panel
from langgraph_refine.evaluators._python_tests import python_tests
from langgraph_refine.evaluators._repetition import no_repetition
from langgraph_refine.evaluators._schema import json_schema
from langgraph_refine.evaluators._text import contains_all, matches_regex, word_count


def build_evaluator(spec: EvaluatorSpec, judge_model: Callable[[], Any]) -> Any:
    """Build the evaluator a parsed spec names.

    Args:
        spec: The parsed spec.
        judge_model: Returns the chat model a `judge` or `checklist` spec uses (called
            only for those).

    Raises:
        SpecError: If the factory rejects the argument.
    """
    builders: dict[str, Callable[[Any], Any]] = {
        "judge": lambda _: llm_judge(judge_model()),
        "checklist": lambda _: checklist(judge_model()),
        "words": lambda bounds: word_count(*bounds),
        "contains": contains_all,
        "regex": matches_regex,
        "no-repetition": lambda _: no_repetition(),
        "schema": json_schema,
        "json-schema": json_schema,
        "python-tests": python_tests,
        "panel": lambda argument: panel(
            *(build_evaluator(member, judge_model) for member in argument[1]), rule=argument[0]
        ),
        "cascade": lambda stages: cascade(*(build_evaluator(s, judge_model) for s in stages)),
    }
    if spec.kind not in builders:  # pragma: no cover - parse_spec makes only these kinds
        raise SpecError(f"unknown evaluator spec {spec.text!r}; use one of {spec_forms()}")
    try:
        return builders[spec.kind](spec.argument)
    except (ValueError, TypeError) as exc:
        raise SpecError(f"evaluator spec {spec.text!r}: {exc}") from None


def build_evaluators(specs: Sequence[EvaluatorSpec], judge_model: Callable[[], Any]) -> Any:
    """The `evaluator=` argument for a list of specs.

    No spec means None (the loop's default LLM judge); one spec, its evaluator; several,
    a list (the loop combines them with equal weights).
    """
    built = [build_evaluator(spec, judge_model) for spec in specs]
    if not built:
        return None
    return built[0] if len(built) == 1 else built

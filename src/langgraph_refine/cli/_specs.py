"""Evaluator specs on the command line: the library's spec language, with one-line errors.

The language itself (forms, parsing, building) lives in `langgraph_refine._calls._specs`, which
the served graphs use for a run's context too; here its errors become `CliError`s.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from langgraph_refine._calls._specs import SPEC_FORMS, EvaluatorSpec, SpecError
from langgraph_refine._calls._specs import parse_specs as _parse_specs
from langgraph_refine.cli._errors import CliError
from langgraph_refine.evaluators._from_specs import build_evaluators as _build_evaluators

__all__ = ["SPEC_FORMS", "EvaluatorSpec", "build_evaluators", "parse_specs"]


def parse_specs(specs: object) -> list[EvaluatorSpec]:
    """Parse a spec string or a list of them, reading any file they name.

    Raises:
        CliError: For an unknown form, a malformed argument, or an unreadable file.
    """
    try:
        return _parse_specs(specs)
    except SpecError as exc:
        raise CliError(str(exc)) from None


def build_evaluators(specs: Sequence[EvaluatorSpec], judge_model: Callable[[], Any]) -> Any:
    """The `evaluator=` argument for parsed specs (None, one evaluator, or a list).

    Raises:
        CliError: If a factory rejects its argument.
    """
    try:
        return _build_evaluators(specs, judge_model)
    except SpecError as exc:
        raise CliError(str(exc)) from None

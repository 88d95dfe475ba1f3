"""Evaluator specs on the command line: the library's spec language, with one-line errors.

The language itself (forms, parsing, building) lives in `langgraph_refine._calls._specs`, which
the served graphs use for a run's context too; here its errors become `CliError`s.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from langgraph_refine._calls._specs import SPEC_FORMS, EvaluatorSpec, SpecError
from langgraph_refine._calls._specs import parse_specs as _parse_specs
from langgraph_refine.cli._errors import USAGE, CliError
from langgraph_refine.evaluators._from_specs import build_evaluators as _build_evaluators

__all__ = ["SPEC_FORMS", "EvaluatorSpec", "build_evaluators", "parse_specs"]


def parse_specs(specs: object, *, on_server: bool = False) -> list[EvaluatorSpec]:
    """Parse a spec string or a list of them, reading any file they name.

    Args:
        specs: A spec string or a list of them.
        on_server: The checks run on a LangGraph Server (`batch --server`): a spec that
            names a file (`json-schema:FILE`, `python-tests:FILE`, in a panel too) is kept
            as written and not opened here, since its path is the server's; the others
            are checked here as the server will.

    Raises:
        CliError: For an unknown form, a malformed argument, or an unreadable file.
    """
    try:
        if on_server and isinstance(specs, str | list | tuple):
            texts = [specs] if isinstance(specs, str) else list(specs)
            return [spec for text in texts for spec in _server_specs(text)]
        return _parse_specs(specs)
    except SpecError as exc:
        raise CliError(str(exc), exit_code=2) from None


_NAMES_FILE = re.compile(r"(?:^|[:;])\s*(?:json[-_]schema|python[-_]tests)\s*:", re.IGNORECASE)


def _server_specs(text: object) -> list[EvaluatorSpec]:
    if isinstance(text, str) and _NAMES_FILE.search(text):
        return [EvaluatorSpec(text.strip(), "server file", None)]  # the server reads the file
    return _parse_specs(text, allow_files=False)


def build_evaluators(specs: Sequence[EvaluatorSpec], judge_model: Callable[[], Any]) -> Any:
    """The `evaluator=` argument for parsed specs (None, one evaluator, or a list).

    Raises:
        CliError: If a factory rejects its argument.
    """
    try:
        return _build_evaluators(specs, judge_model)
    except SpecError as exc:
        raise CliError(str(exc), exit_code=USAGE) from None

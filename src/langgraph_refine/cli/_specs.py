"""Evaluator specs: the short strings `--evaluator` and batch lines use to name an evaluator.

Each spec maps onto one factory of `langgraph_refine.evaluators`:

| spec | evaluator |
| --- | --- |
| `judge` | `llm_judge(judge model)` |
| `words:MIN-MAX` | `word_count(MIN, MAX)` |
| `contains:w1,w2,...` | `contains_all([w1, w2, ...])` |
| `regex:PATTERN` | `matches_regex(PATTERN)` |
| `json-schema:FILE` | `json_schema(<the JSON in FILE>)` |
| `python-tests:FILE` | `python_tests(<the source in FILE>)` |

Specs are parsed (and their files read) before any model is built, so a typo fails at
once; the judge's model is asked for only when a `judge` spec is actually built.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langgraph_refine.cli._errors import CliError

SPEC_FORMS = (
    "judge",
    "words:MIN-MAX",
    "contains:w1,w2,...",
    "regex:PATTERN",
    "json-schema:FILE",
    "python-tests:FILE",
)
"""The accepted spec forms, as shown in help and error messages."""

_WORDS = re.compile(r"^\s*(\d+)\s*-\s*(\d+)\s*$")


@dataclass(frozen=True)
class EvaluatorSpec:
    """A parsed evaluator spec: its kind and the argument the factory gets.

    Attributes:
        text: The spec as written.
        kind: `judge`, `words`, `contains`, `regex`, `json-schema` or `python-tests`.
        argument: `(min, max)` for words, a word list for contains, the pattern for regex,
            the schema dict for json-schema, the test source for python-tests, None for judge.
    """

    text: str
    kind: str
    argument: Any = None


def _read_text(path_text: str, spec: str) -> str:
    if not path_text:
        raise CliError(f"evaluator spec {spec!r} needs a file name after the colon")
    path = Path(path_text).expanduser()
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CliError(f"evaluator spec {spec!r}: file not found: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(f"evaluator spec {spec!r}: cannot read {path}: {exc}") from None


def parse_spec(spec: str) -> EvaluatorSpec:
    """Parse one spec string, reading any file it names.

    Args:
        spec: One of `SPEC_FORMS`.

    Returns:
        The parsed spec.

    Raises:
        CliError: For an unknown form, a malformed argument, or an unreadable file.
    """
    if not isinstance(spec, str) or not spec.strip():
        raise CliError(
            f"evaluator spec must be a non-empty string, got {spec!r}; use one of {_forms()}"
        )
    text = spec.strip()
    kind, sep, arg = text.partition(":")
    kind = kind.strip().lower()
    if kind == "judge" and not sep:
        return EvaluatorSpec(text, "judge")
    if kind == "words" and sep:
        match = _WORDS.match(arg)
        if match is None:
            raise CliError(
                f"evaluator spec {spec!r}: expected words:MIN-MAX with whole numbers, "
                "e.g. words:50-120"
            )
        low, high = int(match.group(1)), int(match.group(2))
        if low > high:
            raise CliError(f"evaluator spec {spec!r}: MIN ({low}) is greater than MAX ({high})")
        return EvaluatorSpec(text, "words", (low, high))
    if kind == "contains" and sep:
        words = [w.strip() for w in arg.split(",") if w.strip()]
        if not words:
            raise CliError(
                f"evaluator spec {spec!r}: list the words after the colon, e.g. contains:apple,pear"
            )
        return EvaluatorSpec(text, "contains", words)
    if kind == "regex" and sep:
        if not arg:
            raise CliError(
                f"evaluator spec {spec!r}: give a pattern after the colon, e.g. regex:\\?$"
            )
        try:
            re.compile(arg)
        except re.error as exc:
            raise CliError(f"evaluator spec {spec!r}: invalid regular expression: {exc}") from None
        return EvaluatorSpec(text, "regex", arg)
    if kind == "json-schema" and sep:
        source = _read_text(arg.strip(), spec)
        try:
            schema = json.loads(source)
        except json.JSONDecodeError as exc:
            raise CliError(
                f"evaluator spec {spec!r}: {arg.strip()} is not valid JSON: {exc}"
            ) from None
        if not isinstance(schema, dict):
            raise CliError(
                f"evaluator spec {spec!r}: {arg.strip()} must hold a JSON object (a JSON Schema)"
            )
        return EvaluatorSpec(text, "json-schema", schema)
    if kind == "python-tests" and sep:
        return EvaluatorSpec(text, "python-tests", _read_text(arg.strip(), spec))
    raise CliError(f"unknown evaluator spec {spec!r}; use one of {_forms()}")


def _forms() -> str:
    return ", ".join(SPEC_FORMS)


def parse_specs(specs: Sequence[str]) -> list[EvaluatorSpec]:
    """Parse several specs (see `parse_spec`)."""
    return [parse_spec(spec) for spec in specs]


def build_evaluator(spec: EvaluatorSpec, judge_model: Callable[[], Any]) -> Any:
    """Build the evaluator a parsed spec names.

    Args:
        spec: The parsed spec.
        judge_model: Returns the chat model a `judge` spec uses (called only for `judge`).

    Raises:
        CliError: If the factory rejects the argument.
    """
    from langgraph_refine import evaluators

    try:
        if spec.kind == "judge":
            return evaluators.llm_judge(judge_model())
        if spec.kind == "words":
            low, high = spec.argument
            return evaluators.word_count(low, high)
        if spec.kind == "contains":
            return evaluators.contains_all(spec.argument)
        if spec.kind == "regex":
            return evaluators.matches_regex(spec.argument)
        if spec.kind == "json-schema":
            return evaluators.json_schema(spec.argument)
        if spec.kind == "python-tests":
            return evaluators.python_tests(spec.argument)
    except (ValueError, TypeError) as exc:
        raise CliError(f"evaluator spec {spec.text!r}: {exc}") from None
    raise CliError(
        f"unknown evaluator spec {spec.text!r}; use one of {_forms()}"
    )  # pragma: no cover


def build_evaluators(specs: Sequence[EvaluatorSpec], judge_model: Callable[[], Any]) -> Any:
    """The `evaluator=` argument for a list of specs.

    No spec means None (the loop's default LLM judge); one spec, its evaluator; several,
    a list (the loop combines them with equal weights).
    """
    built = [build_evaluator(spec, judge_model) for spec in specs]
    if not built:
        return None
    return built[0] if len(built) == 1 else built

"""Check specs: the short strings that name an evaluator, for the CLI and a run's context.

One spec language for every entry point: `--evaluator`, a batch line's `"evaluator"`,
and the `evaluator` key of a run's context (the graphs `langgraph.json` serves take their
check per run). Each spec maps onto one factory of `langgraph_refine.evaluators`:

| spec | evaluator |
| --- | --- |
| `judge` | `llm_judge(judge model)` |
| `words:MIN-MAX` | `word_count(MIN, MAX)` |
| `contains:w1,w2,...` | `contains_all([w1, w2, ...])` |
| `regex:PATTERN` | `matches_regex(PATTERN)` |
| `no_repetition` | `no_repetition()` |
| `schema:{...}` | `json_schema(<the inline JSON schema>)` |
| `json-schema:FILE` | `json_schema(<the JSON in FILE>)` |
| `python-tests:FILE` | `python_tests(<the source in FILE>)` |
| `panel[-RULE]:SPEC;SPEC;...` | `panel(<each spec's evaluator>, rule=RULE)` |
| `cascade:SPEC;SPEC;...` | `cascade(<each spec's evaluator>)`, cheapest first |
| `checklist` | `checklist(judge model)`, on the run's `criteria` |

`-` and `_` are the same in a spec's kind (`python_tests:FILE`, `no-repetition`). Several
specs are combined with equal weights. Specs are parsed (and their files read) before any
model is built, so a typo fails at once.

A run's context comes from whoever can create runs, so there specs that read files or
execute code (`FILE_KINDS`) are refused unless the deployment sets
`LANGGRAPH_REFINE_ALLOW_CODE_CHECKS=1` (`code_checks_allowed`).
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args

from langgraph_refine._state import PanelRule

SPEC_FORMS = (
    "judge",
    "words:MIN-MAX",
    "contains:w1,w2,...",
    "regex:PATTERN",
    "no_repetition",
    "schema:{JSON schema}",
    "json-schema:FILE",
    "python-tests:FILE",
    "panel[-RULE]:SPEC;SPEC;...",
    "cascade:SPEC;SPEC;...",
    "checklist",
)
"""The accepted spec forms, as shown in help and error messages."""

FILE_KINDS = frozenset({"json-schema", "python-tests"})
"""Spec kinds that read a file (and, for python-tests, run its code)."""

ALLOW_CODE_CHECKS_ENV = "LANGGRAPH_REFINE_ALLOW_CODE_CHECKS"
"""Set to `1` on a deployment to let runs ask for `FILE_KINDS` checks in their context."""

JUDGE_MODELS_ENV = "REFINE_JUDGE_MODELS"
"""Comma-separated model strings a run may name as its `judge_model` (unset: any)."""

_WORDS = re.compile(r"^\s*(\d+)\s*-\s*(\d+)\s*$")


class SpecError(ValueError):
    """A check spec that cannot be used: unknown form, bad argument, unreadable file, refused."""


@dataclass(frozen=True)
class EvaluatorSpec:
    """A parsed check spec: its kind and the argument the factory gets.

    Attributes:
        text: The spec as written.
        kind: `judge`, `checklist`, `words`, `contains`, `regex`, `no-repetition`,
            `schema`, `json-schema`, `python-tests`, `panel` or `cascade`.
        argument: `(min, max)` for words, a word list for contains, the pattern for
            regex, the schema dict for schema and json-schema, the test source for
            python-tests, `(rule, member specs)` for panel, the stage specs for cascade,
            None for judge, checklist and no-repetition.
    """

    text: str
    kind: str
    argument: Any = None


def code_checks_allowed(environ: Mapping[str, str] | None = None) -> bool:
    """Whether this deployment lets a run's context ask for checks that read files or run code.

    Args:
        environ: Where to read `LANGGRAPH_REFINE_ALLOW_CODE_CHECKS`; `os.environ` when omitted.
    """
    env = os.environ if environ is None else environ
    return env.get(ALLOW_CODE_CHECKS_ENV, "").strip().lower() in {"1", "true", "yes"}


def parse_spec(spec: object, *, allow_files: bool = True) -> EvaluatorSpec:
    """Parse one spec string, reading any file it names.

    Args:
        spec: One of `SPEC_FORMS`.
        allow_files: False refuses `FILE_KINDS` before touching any file (a run's context
            on a deployment that does not allow them).

    Returns:
        The parsed spec.

    Raises:
        SpecError: For an unknown form, a malformed argument, an unreadable file, or a
            refused kind.

    Example:
        >>> parse_spec("contains:apple, pear")
        EvaluatorSpec(text='contains:apple, pear', kind='contains', argument=['apple', 'pear'])
    """
    if not isinstance(spec, str) or not spec.strip():
        raise SpecError(
            f"evaluator spec must be a non-empty string, got {spec!r}; use one of {spec_forms()}"
        )
    text = spec.strip()
    head, sep, arg = text.partition(":")
    kind = head.strip().lower().replace("_", "-")
    if kind in FILE_KINDS and sep and not allow_files:
        raise SpecError(
            f"evaluator spec {spec!r} is refused: a run may not ask for checks that read "
            f"files or run code ({', '.join(sorted(FILE_KINDS))}) unless the deployment sets "
            f"{ALLOW_CODE_CHECKS_ENV}=1; a run may use {spec_forms(allow_files=False)}"
        )
    if kind == "panel" or kind.startswith("panel-"):
        return EvaluatorSpec(text, "panel", _panel(kind, arg, text, allow_files))
    if kind == "cascade":
        stages = _members(arg, text, allow_files, "a cascade", "cascade:words:50-120;judge")
        return EvaluatorSpec(text, "cascade", stages)
    parse = _PARSERS.get((kind, bool(sep)))
    if parse is None:
        hint = _criteria_hint(kind, arg)
        raise SpecError(
            f"unknown evaluator spec {spec!r}{hint}; use one of {spec_forms(allow_files)}"
        )
    return EvaluatorSpec(text, kind, parse(arg, spec))


_CRITERIA_WORDS = frozenset({"checklist", "criteria", "criterion", "rubric"})


def _criteria_hint(kind: str, arg: str) -> str:
    """Where criteria go, for a spec that tried to carry them (`checklist:Mentions rain`)."""
    if kind not in _CRITERIA_WORDS:
        return ""
    example = arg.strip() or "Mentions rain"
    return (
        " (criteria are not part of a spec: give them as the run's criteria, with --criterion "
        f"on the command line or a 'criteria' key in a batch line or a run's context, e.g. "
        f"-e checklist --criterion {example!r})"
    )


def _panel(
    kind: str, arg: str, spec: str, allow_files: bool
) -> tuple[str, tuple[EvaluatorSpec, ...]]:
    """`(rule, member specs)` of `panel[-RULE]:SPEC;SPEC;...`."""
    rule = kind.partition("-")[2] or "mean"
    rules = get_args(PanelRule)
    if rule not in rules:
        raise SpecError(
            f"evaluator spec {spec!r}: unknown panel rule {rule!r}; use "
            + ", ".join(f"panel-{r}:" for r in rules)
            + " (panel: is panel-mean:)"
        )
    return rule, _members(arg, spec, allow_files, "a panel", "panel-majority:judge;words:10-50")


def _members(
    arg: str, spec: str, allow_files: bool, what: str, example: str
) -> tuple[EvaluatorSpec, ...]:
    """The member specs of a panel or a cascade: at least two, separated by ';'."""
    texts = [member.strip() for member in arg.split(";")]
    if "" in texts[:-1] or (len(texts) > 1 and texts[0] == ""):
        raise SpecError(
            f"evaluator spec {spec!r}: {what} has an empty spec between its ';'; give each "
            f"one once, e.g. {example}"
        )
    texts = [text for text in texts if text]  # a trailing ';' is allowed
    if len(texts) < 2:
        raise SpecError(
            f"evaluator spec {spec!r}: {what} needs at least two specs separated by ';', "
            f"e.g. {example}"
        )
    # A member cannot be a panel or a cascade: ';' always separates this one's members.
    return tuple(parse_spec(member, allow_files=allow_files) for member in texts)


def _words(arg: str, spec: str) -> tuple[int, int]:
    match = _WORDS.match(arg)
    if match is None:
        raise SpecError(
            f"evaluator spec {spec!r}: expected words:MIN-MAX with whole numbers, e.g. words:50-120"
        )
    low, high = int(match.group(1)), int(match.group(2))
    if low > high:
        raise SpecError(f"evaluator spec {spec!r}: MIN ({low}) is greater than MAX ({high})")
    return low, high


def _contains(arg: str, spec: str) -> list[str]:
    words = [w.strip() for w in arg.split(",") if w.strip()]
    if not words:
        raise SpecError(
            f"evaluator spec {spec!r}: list the words after the colon, e.g. contains:apple,pear"
        )
    return words


def _regex(arg: str, spec: str) -> str:
    if not arg:
        raise SpecError(f"evaluator spec {spec!r}: give a pattern after the colon, e.g. regex:\\?$")
    try:
        re.compile(arg)
    except re.error as exc:
        raise SpecError(f"evaluator spec {spec!r}: invalid regular expression: {exc}") from None
    return arg


def _schema(arg: str, spec: str, *, source: str = "the text after 'schema:'") -> dict[str, Any]:
    try:
        schema = json.loads(arg)
    except json.JSONDecodeError as exc:
        raise SpecError(f"evaluator spec {spec!r}: {source} is not valid JSON: {exc}") from None
    if not isinstance(schema, dict):
        raise SpecError(
            f"evaluator spec {spec!r}: {source} must be a JSON object (a JSON Schema), "
            'e.g. schema:{"type": "object", "required": ["name"]}'
        )
    return schema


def _read_text(path_text: str, spec: str) -> str:
    if not path_text:
        raise SpecError(f"evaluator spec {spec!r} needs a file name after the colon")
    path = Path(path_text).expanduser()
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError(f"evaluator spec {spec!r}: file not found: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(f"evaluator spec {spec!r}: cannot read {path}: {exc}") from None


def _json_schema_file(arg: str, spec: str) -> dict[str, Any]:
    return _schema(_read_text(arg.strip(), spec), spec, source=arg.strip())


_PARSERS: dict[tuple[str, bool], Callable[[str, str], Any]] = {
    ("judge", False): lambda arg, spec: None,
    ("checklist", False): lambda arg, spec: None,
    ("no-repetition", False): lambda arg, spec: None,
    ("words", True): _words,
    ("contains", True): _contains,
    ("regex", True): _regex,
    ("schema", True): _schema,
    ("json-schema", True): _json_schema_file,
    ("python-tests", True): lambda arg, spec: _read_text(arg.strip(), spec),
}
"""How each (kind, has an argument) is parsed into the factory's argument."""


def spec_forms(allow_files: bool = True) -> str:
    return ", ".join(
        form for form in SPEC_FORMS if allow_files or form.partition(":")[0] not in FILE_KINDS
    )


def parse_specs(specs: object, *, allow_files: bool = True) -> list[EvaluatorSpec]:
    """Parse a spec string or a list of them (see `parse_spec`).

    Raises:
        SpecError: If `specs` is neither a string nor a list of strings, or a spec is bad.
    """
    if isinstance(specs, str):
        specs = [specs]
    if not isinstance(specs, list | tuple) or not all(isinstance(s, str) for s in specs):
        raise SpecError(
            f"'evaluator' must be a spec string or a list of them, got {specs!r}; "
            f"use one of {spec_forms(allow_files)}"
        )
    return [parse_spec(spec, allow_files=allow_files) for spec in specs]


def parse_run_specs(specs: tuple[str, ...], allow_files: bool) -> tuple[EvaluatorSpec, ...]:
    """`parse_specs` for a run's context, which every node of a run applies.

    Specs without a file are parsed once per process; a file a spec names is read each
    time, so an edited file counts from the next run on.
    """
    # A panel's members may read files too: the kind's name anywhere in the spec counts.
    reads_files = any(
        kind in spec.lower().replace("_", "-") for spec in specs for kind in FILE_KINDS
    )
    if reads_files:
        return tuple(parse_specs(list(specs), allow_files=allow_files))
    return _parse_cached(specs, allow_files)


@functools.lru_cache(maxsize=64)
def _parse_cached(specs: tuple[str, ...], allow_files: bool) -> tuple[EvaluatorSpec, ...]:
    return tuple(parse_specs(list(specs), allow_files=allow_files))


def check_judge_model(name: str, environ: Mapping[str, str] | None = None) -> None:
    """Refuse a run's `judge_model` the deployment does not list, when it lists any.

    A deployment bounds what runs may spend on judging with `REFINE_JUDGE_MODELS`: a
    comma-separated list of the model strings a run may name (the served model,
    `REFINE_MODEL`, is always allowed). Unset, any model the server can reach is allowed.

    Raises:
        SpecError: If the list is set and does not hold `name`.
    """
    check_allowed_model(name, option="judge_model", listed_in=JUDGE_MODELS_ENV, environ=environ)


def check_allowed_model(
    name: str, *, option: str, listed_in: str, environ: Mapping[str, str] | None = None
) -> None:
    """Refuse a model string a run names that the deployment's list `listed_in` leaves out.

    The served model (`REFINE_MODEL`) is always allowed; with the list unset, any is.

    Raises:
        SpecError: If the list is set and does not hold `name` (naming what it allows).
    """
    env = os.environ if environ is None else environ
    listed = [m.strip() for m in env.get(listed_in, "").split(",") if m.strip()]
    served = env.get("REFINE_MODEL", "").strip()
    if listed and name not in {*listed, served}:
        allowed = ", ".join(
            repr(m) for m in dict.fromkeys([*listed, *([served] if served else [])])
        )
        raise SpecError(
            f"{option} {name!r} is not one this deployment allows ({listed_in}); "
            f"use one of {allowed}"
        )


@functools.lru_cache(maxsize=16)
def run_judge_model(name: str, max_tokens: int | None) -> Any:
    """The chat model a run's context names for its judge (built once per name and limit).

    Args:
        name: A model string, resolved like every other (`resolve_chat_model`).
        max_tokens: Output tokens per judge call; `REFINE_MAX_TOKENS` (or its default)
            when None, as for the served models.

    Raises:
        SpecError: If the model string cannot be resolved (unknown provider package, ...).
    """
    from langgraph_refine._calls._models import (
        ModelStringError,
        max_tokens_setting,
        resolve_chat_model,
    )

    try:
        return resolve_chat_model(
            name, option="judge_model", max_tokens=max_tokens or max_tokens_setting()
        )
    except ModelStringError as exc:
        raise exc.unusable(SpecError) from None

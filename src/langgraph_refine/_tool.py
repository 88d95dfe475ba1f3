"""The loop as a tool a host calls: what it is told, what it may send, what it gets back.

One definition for the two tools a host sees: `langgraph-refine mcp`'s `refine` and the
served graphs (`langgraph.json`), which LangGraph Server lists at `/mcp` and on its A2A
agent cards. The words are a host's (a model choosing a tool and filling its arguments),
never the library's Python names; the options come from their declaration
(`LoopOptions`, each with its `tool` text), so a new option a run may set reaches both
tools with its type and meaning.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping
from typing import Any, get_type_hints

from pydantic import TypeAdapter

from langgraph_refine._calls._budget import LIMITS
from langgraph_refine._decisions._options import (
    CONTEXT,
    DEFAULTS,
    LoopOptions,
    RefineContext,
    context_key,
    declaration,
    declared,
)
from langgraph_refine._state import StopReason, Verdict

DESCRIPTION = (
    "Write an answer to `task` and improve it: a judge scores each draft (0 to 1) against "
    "the task and `criteria`, and its feedback drives the next draft until the answer "
    "passes or a limit is reached. Returns `response` (the best answer), `score`, "
    "`verdict`, `stop_reason` and `usage` (what it spent). Takes a while: each round is "
    "one or two model calls."
)
"""What a host is told the `refine` tool does."""

TASK = {
    "type": "string",
    "description": "The request to answer, with any context it needs.",
}
MESSAGES = {
    "type": "array",
    "items": {"type": "object"},
    "description": "Instead of `task`: a chat ending with the user's request; the answer "
    "is appended.",
}

BUDGET_UNITS: Mapping[str, str] = {
    "max_calls": "Model requests, retries included.",
    "max_tokens": "Tokens in and out.",
    "max_seconds": "Seconds.",
    "max_cost": "US dollars.",
}
"""Each budget limit's unit, as a host is told it (every limit is for the whole call)."""

_SCHEMAS: Mapping[str, dict[str, Any]] = {
    # An object with its limits named, so a host can fill it (not a free-form dict).
    "budget": {
        "type": "object",
        "properties": {
            name: {
                "type": "integer" if name in ("max_calls", "max_tokens") else "number",
                "minimum": 0,
                "description": BUDGET_UNITS[name],
            }
            for name in LIMITS
        },
        "additionalProperties": False,
    },
    "output_schema": {"type": "object"},
}
"""JSON types a host reads better than the run context's Python type gives."""


def _json_type(key: str) -> dict[str, Any]:
    """The JSON schema of the run-context key `key` (its type in `RefineContext`)."""
    if key in _SCHEMAS:
        return dict(_SCHEMAS[key])
    schema = TypeAdapter(get_type_hints(RefineContext)[key]).json_schema()
    schema.pop("title", None)
    # "X or nothing" is X to a host: leaving the argument out is the "nothing".
    variants = schema.get("anyOf")
    if isinstance(variants, list):
        kept = [v for v in variants if v != {"type": "null"}]
        schema = kept[0] if len(kept) == 1 else {"anyOf": kept}
    return schema


def option_schema(name: str, defaults: LoopOptions = DEFAULTS) -> dict[str, Any]:
    """The argument of the option `name`: its JSON type, a host's words, its default.

    Args:
        name: The option (a field name).
        defaults: Where its default is read: a server's own options, or the library's.
    """
    schema = {**_json_type(context_key(name)), "description": declaration(name).tool}
    default = getattr(defaults, name)
    if isinstance(default, bool | int | float | str):  # the default a plain value shows
        schema["default"] = default
    return schema


def option_names(exclude: Collection[str] = ()) -> tuple[str, ...]:
    """The options a tool call may set (field names): a run context's, less `exclude`."""
    return tuple(name for name in declared(CONTEXT) if name not in exclude)


def input_schema(
    options: Iterable[str], *, messages: bool = False, defaults: LoopOptions = DEFAULTS
) -> dict[str, Any]:
    """A tool's input schema: `task`, the options' arguments, and `messages` if taken.

    Args:
        options: The options offered (field names, see `option_names`).
        messages: Also take a conversation in place of `task` (a chat client's form).
        defaults: The options a call leaves out take (the server's, by default the library's).
    """
    properties: dict[str, Any] = {"task": dict(TASK)}
    if messages:
        properties["messages"] = dict(MESSAGES)
    for name in options:
        properties[context_key(name)] = option_schema(name, defaults)
    return {
        "type": "object",
        "properties": properties,
        "required": ["task"],
        "additionalProperties": False,
    }


def unknown_arguments(arguments: Mapping[str, Any], allowed: Collection[str]) -> str | None:
    """Why `arguments` are refused when one is not in `allowed` (None when all are).

    The message names each unknown argument and every allowed one, so a host (or the
    person reading its log) can fix a typo such as `max_iteration`.
    """
    unknown = sorted(key for key in arguments if key not in allowed)
    if not unknown:
        return None
    listed = ", ".join(sorted(allowed))
    return f"unknown argument(s) {', '.join(map(repr, unknown))}: the arguments are {listed}"


_JSON_TYPES: Mapping[type, str] = {
    bool: "boolean",
    int: "integer",
    float: "number",
    dict: "object",
    list: "array",
}


def _types(schema: Mapping[str, Any]) -> set[str]:
    """The JSON types a property's schema allows (its `type`, or its variants')."""
    kinds = schema.get("type")
    found = set(kinds) if isinstance(kinds, list) else {kinds} if kinds else set()
    for variant in schema.get("anyOf", ()):
        found |= _types(variant)
    return found


def from_text(arguments: Mapping[str, Any], schema: Mapping[str, Any]) -> dict[str, Any]:
    """`arguments` with a value sent as text read as the JSON value its argument takes.

    Some hosts send every argument as a string (the MCP Inspector's command line sends
    `--tool-arg max_iterations=2` as `"2"`, an object as its JSON text). A string that
    parses as JSON of a type the argument takes, other than text, is that value
    (`"2"` for an integer, `'{"max_calls": 4}'` for `budget`, `"true"` for `edits`);
    any other string is left as it is, for the loop's checks to judge.
    """
    properties = schema.get("properties", {})
    read = dict(arguments)
    for key, value in arguments.items():
        if not isinstance(value, str) or key not in properties:
            continue
        try:
            parsed = json.loads(value)
        except ValueError:
            continue
        kind = _JSON_TYPES.get(type(parsed))
        allowed = _types(properties[key])
        if kind in allowed or (kind == "integer" and "number" in allowed):
            read[key] = parsed
    return read


def json_text(value: Any, limit: int = 80) -> str:
    """`value` as JSON text (`null`, `true`, `"text"`), cut to `limit` characters."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = json.dumps(str(value), ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 3] + "..."


_PYTHON_TYPES: Mapping[str, type] = {
    "string": str,
    "integer": int,
    "object": dict,
    "array": list,
    "boolean": bool,
}

_TYPE_WORDS: Mapping[str, str] = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "object": "an object",
    "array": "an array",
}


def _is(kind: str, value: Any) -> bool:
    """Whether `value` (decoded JSON) is of the JSON type `kind` (a boolean is no number)."""
    if isinstance(value, bool):
        return kind == "boolean"
    if kind == "number":
        return isinstance(value, int | float)
    return kind != "boolean" and isinstance(value, _PYTHON_TYPES.get(kind, object))


def _expected(schema: Mapping[str, Any]) -> str:
    """What `schema` takes, in a host's words: `an integer`, `a string or an array of strings`."""
    if "enum" in schema:
        return "one of " + ", ".join(json_text(v) for v in schema["enum"])
    if "const" in schema:
        return json_text(schema["const"])
    if "anyOf" in schema:
        *first, last = [_expected(variant) for variant in schema["anyOf"]]
        return f"{', '.join(first)} or {last}" if first else last
    kind = str(schema.get("type", ""))
    if kind == "array" and "items" in schema:
        return f"an array of {_expected(schema['items']).removeprefix('a ').removeprefix('an ')}s"
    return _TYPE_WORDS.get(kind, kind)


def schema_error(name: str, value: Any, schema: Mapping[str, Any]) -> str | None:
    """Why `value` does not fit the argument `name`'s `schema`, in a host's words (None: it fits).

    Checks what the tools' schemas use: `type`, `enum`, `const`, `anyOf`, `items`, an
    object's `properties` and `additionalProperties`, `minimum` and `maximum`. A `null`
    is refused naming the argument: leaving it out is how a host asks for the default.

    Example:
        >>> schema_error("max_iterations", None, {"type": "integer"})
        'max_iterations is null: leave it out for the default, or give an integer'
        >>> schema_error("strategy", "greedy", {"type": "string", "enum": ["chain", "sample"]})
        'strategy must be one of "chain", "sample"; got "greedy"'
    """
    if value is None:
        return f"{name} is null: leave it out for the default, or give {_expected(schema)}"
    if "anyOf" in schema:
        if any(schema_error(name, value, variant) is None for variant in schema["anyOf"]):
            return None
        return f"{name} must be {_expected(schema)}; got {json_text(value)}"
    kind = schema.get("type")
    fits = (kind is None or _is(kind, value)) and value in schema.get("enum", [value])
    if not fits or ("const" in schema and value != schema["const"]):
        return f"{name} must be {_expected(schema)}; got {json_text(value)}"
    low, high = schema.get("minimum"), schema.get("maximum")
    if isinstance(value, int | float) and not (low is None or value >= low):
        return f"{name} must be at least {low}; got {json_text(value)}"
    if isinstance(value, int | float) and not (high is None or value <= high):
        return f"{name} must be at most {high}; got {json_text(value)}"
    if isinstance(value, list) and "items" in schema:
        items = (schema_error(f"{name}[{i}]", v, schema["items"]) for i, v in enumerate(value))
        return next((error for error in items if error is not None), None)
    if isinstance(value, dict) and "properties" in schema:
        return _object_error(name, value, schema)
    return None


def _object_error(name: str, value: Mapping[str, Any], schema: Mapping[str, Any]) -> str | None:
    """Why an object argument does not fit: an unknown field, or a field's value."""
    properties = schema["properties"]
    unknown = sorted(key for key in value if key not in properties)
    if unknown and schema.get("additionalProperties") is False:
        return (
            f"{name} has no field(s) {', '.join(map(json_text, unknown))}: its fields are "
            + ", ".join(properties)
        )
    fields = (
        schema_error(f"{name}.{k}", v, properties[k]) for k, v in value.items() if k in properties
    )
    return next((error for error in fields if error is not None), None)


OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "response": {"type": "string", "description": "The best answer."},
        "score": {"type": ["number", "null"], "description": "Its score, 0 to 1."},
        "verdict": {"enum": [*TypeAdapter(Verdict).json_schema()["enum"], None]},
        "stop_reason": {"enum": [*TypeAdapter(StopReason).json_schema()["enum"], None]},
        "usage": {"type": "object", "description": "Model calls, tokens, seconds, cost."},
        "scores": {
            "type": "array",
            "items": {"type": ["number", "null"]},
            "description": "Each answer's score, in order.",
        },
    },
    "required": ["response", "score", "verdict", "stop_reason", "usage", "scores"],
}
"""What a `refine` call returns as structured content (and as JSON text)."""

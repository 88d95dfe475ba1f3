"""`json_schema`: the response (or its first fenced JSON block) must satisfy a JSON Schema."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from langgraph_refine._fences import first_block
from langgraph_refine._state import Evaluation
from langgraph_refine.evaluators._base import BaseEvaluator

_MAX_ERRORS = 20
_MAX_MESSAGE = 300
_JSON_LANGS = frozenset({"json", "jsonc", "json5"})


def _import_jsonschema() -> Any:
    try:
        import jsonschema
    except ImportError as exc:
        raise ImportError(
            "json_schema() needs the jsonschema package: pip install 'langgraph-refine[schema]'"
        ) from exc
    return jsonschema


def _schema_dict(schema: object) -> dict[str, Any]:
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        return schema.model_json_schema()
    if isinstance(schema, Mapping):
        return dict(schema)
    raise ValueError(
        "json_schema: schema must be a JSON Schema dict or a pydantic model class, "
        f"got {schema!r:.100}"
    )


def _clip(text: str, limit: int = _MAX_MESSAGE) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def extract_json(response: str) -> tuple[Any, str | None, str]:
    """Parse the JSON in a response: the whole text, else its first fenced JSON block.

    Returns:
        `(value, error, source)`: the parsed value (None on failure), a message saying
        why nothing could be parsed (None on success), and where the JSON came from
        (`"response"` or `"fenced block"`).
    """
    try:
        return json.loads(response), None, "response"
    except json.JSONDecodeError as whole_error:
        block = first_block(response, _JSON_LANGS)
        if block is None:
            return (
                None,
                (
                    f"The response is not valid JSON ({whole_error}) and has no fenced ```json "
                    "block. Reply with the JSON only, or put it in one ```json block."
                ),
                "response",
            )
        try:
            return json.loads(block.body), None, "fenced block"
        except json.JSONDecodeError as block_error:
            return (
                None,
                (f"The JSON in the first fenced block is not valid JSON: {block_error}."),
                "fenced block",
            )


class JsonSchema(BaseEvaluator):
    r"""Scores 1.0 if the response's JSON is valid against a schema. See `json_schema`.

    Example:
        >>> JsonSchema({"type": "array"}).evaluate("```json\n[1, 2]\n```", {}).details
        {'errors': [], 'source': 'fenced block'}
    """

    name = "json_schema"
    inline = True  # a quick pure-Python check (see BaseEvaluator)

    def __init__(self, schema: dict[str, Any] | type[BaseModel]) -> None:
        jsonschema = _import_jsonschema()
        self.schema = _schema_dict(schema)
        validator_class = jsonschema.validators.validator_for(self.schema)
        try:
            validator_class.check_schema(self.schema)
        except jsonschema.SchemaError as exc:
            where = exc.json_path if hasattr(exc, "json_path") else "$"
            raise ValueError(
                f"json_schema: the schema itself is invalid at {where}: {_clip(exc.message)}"
            ) from exc
        self._validator = validator_class(
            self.schema, format_checker=validator_class.FORMAT_CHECKER
        )

    def evaluate(self, response: str, state: Mapping[str, Any]) -> Evaluation:
        value, parse_error, source = extract_json(response)
        if parse_error is not None:
            return Evaluation(
                score=0.0, feedback=parse_error, details={"errors": [], "source": source}
            )
        errors = sorted(
            self._validator.iter_errors(value),
            key=lambda e: (list(map(str, e.absolute_path)), e.message),
        )
        if not errors:
            return Evaluation(
                score=1.0,
                feedback="The JSON is valid against the schema.",
                details={"errors": [], "source": source},
            )
        listed = [{"path": e.json_path, "message": _clip(e.message)} for e in errors]
        lines = [f"- at {item['path']}: {item['message']}" for item in listed[:_MAX_ERRORS]]
        if len(listed) > _MAX_ERRORS:
            lines.append(f"- ... and {len(listed) - _MAX_ERRORS} more")
        feedback = (
            f"The JSON does not match the schema ({len(listed)} "
            f"error{'s' if len(listed) != 1 else ''}; `$` is the top level):\n" + "\n".join(lines)
        )
        return Evaluation(
            score=0.0, feedback=feedback, details={"errors": listed, "source": source}
        )


def json_schema(schema: dict[str, Any] | type[BaseModel]) -> JsonSchema:
    """Score 1.0 if the response's JSON is valid against `schema`, else 0.0.

    The JSON is the whole response, or, if that does not parse, the first fenced block
    labelled `json` (or unlabelled). Validation uses the `jsonschema` package with the
    draft the schema declares (latest by default) and checks `format`s it knows. On
    failure the feedback lists each validation error with its JSON path (`$.items[0].qty`),
    and `details["errors"]` holds them as `{"path", "message"}` dicts.

    Needs the optional `schema` extra: `pip install 'langgraph-refine[schema]'`.

    Args:
        schema: A JSON Schema as a dict, or a pydantic model class (its
            `model_json_schema()` is used).

    Returns:
        The evaluator.

    Raises:
        ValueError: If the schema is not a dict or model class, or is not a valid schema.
        ImportError: If `jsonschema` is not installed.

    Example:
        >>> ev = json_schema({"type": "object", "required": ["name"],
        ...                   "properties": {"age": {"type": "integer"}}})
        >>> ev.evaluate('{"name": "Ada", "age": 36}', {}).score
        1.0
        >>> print(ev.evaluate('{"age": "old"}', {}).feedback)
        The JSON does not match the schema (2 errors; `$` is the top level):
        - at $: 'name' is a required property
        - at $.age: 'old' is not of type 'integer'
    """
    return JsonSchema(schema)

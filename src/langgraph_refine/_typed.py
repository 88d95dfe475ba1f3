"""Typed responses: the loop refines an object (`output_schema=`), not only a string.

`OutputSchema` is the one place that knows the object: a pydantic model class or a JSON
schema dict. It asks a chat model for it through the provider's structured output,
reads whatever a generator returned (an instance, a dict, JSON text, a structured-output
reply), validates it, and renders it: `Attempt.response` is the object as JSON text,
`Attempt.output` the same object as a plain JSON value (safe in any checkpoint), and
`RefineResult.output` the typed object again (a model instance, or the dict).

A reply that is not a valid object is still an attempt: its `response` is the raw reply,
and it is evaluated here, FAIL with score 0 and the validation errors as feedback, so
the evaluator is not called and the next round sees what to fix.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.runnables import Runnable
from pydantic import BaseModel, ValidationError

from langgraph_refine._fences import first_block
from langgraph_refine._reasoning import split_reasoning
from langgraph_refine._state import Evaluation, whole_text

logger = logging.getLogger("langgraph_refine")

_MAX_ERRORS = 20
_MAX_MESSAGE = 300
_CACHE_SIZE = 32


@dataclass(frozen=True)
class Reply:
    """One generator reply, read: what the attempt stores.

    Attributes:
        response: The answer text (the object as JSON text when it is one).
        output: The validated object as plain JSON; None if invalid or untyped.
        reasoning: Reasoning kept apart from the answer, if any.
        evaluation: FAIL with the validation errors when the reply is not a valid
            object (the evaluator is not called); None otherwise.
        edits: The edit blocks applied to make it (see `_edits`); None when written whole.
    """

    response: str
    output: Any = None
    reasoning: str | None = None
    evaluation: Evaluation | None = None
    edits: int | None = None

    def __post_init__(self) -> None:
        # The one door provider text comes in by: kept as it came, but whole text.
        object.__setattr__(self, "response", whole_text(self.response))
        if self.reasoning is not None:
            object.__setattr__(self, "reasoning", whole_text(self.reasoning))


def json_text(value: Any) -> str:
    """A JSON value as the compact JSON text `Attempt.response` holds."""
    return json.dumps(value, ensure_ascii=False)


def pretty_json(text: str) -> str:
    """`text` pretty-printed (indent 2) if it is a JSON object or array, else unchanged."""
    stripped = text.strip()
    if not stripped.startswith(("{", "[")):
        return text
    try:
        value = json.loads(stripped)
    except ValueError:
        return text
    return json.dumps(value, ensure_ascii=False, indent=2)


def plain(value: Any) -> Any:
    """A typed object (model instance, dict, ...) as a plain JSON value."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    return value


def _path(location: Any) -> str:
    """`$.items[0].qty` from a pydantic error location or a jsonschema path."""
    path = "$"
    for part in location:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


def _clip(text: str) -> str:
    return text if len(text) <= _MAX_MESSAGE else text[: _MAX_MESSAGE - 3] + "..."


class OutputSchema:
    """The object a typed loop asks for, reads and validates.

    Args:
        schema: A pydantic model class, or a JSON schema dict (validated with the
            `jsonschema` package: `pip install 'langgraph-refine[schema]'`).

    Raises:
        ValueError: If `schema` is neither, or the JSON schema itself is invalid.
        ImportError: For a JSON schema dict without `jsonschema` installed.

    Example:
        >>> from pydantic import BaseModel
        >>> class City(BaseModel):
        ...     name: str
        >>> reply = OutputSchema(City).read('{"name": "Oslo"}')
        >>> reply.response, reply.output, reply.evaluation
        ('{"name": "Oslo"}', {'name': 'Oslo'}, None)
        >>> print(OutputSchema(City).read('{"town": "Oslo"}').evaluation.feedback)
        The reply is not a valid City object (1 error; `$` is the top level):
        - at $.name: Field required
        Reply with one JSON object that matches the schema.
    """

    def __init__(self, schema: type[BaseModel] | Mapping[str, Any]) -> None:
        self.model: type[BaseModel] | None = None
        self._validator: Any = None
        if isinstance(schema, type) and issubclass(schema, BaseModel):
            self.model = schema
            self.json_schema: dict[str, Any] = schema.model_json_schema()
            self.name = schema.__name__
        elif isinstance(schema, Mapping):
            self.json_schema = dict(schema)
            self._validator = _validator(self.json_schema)
            self.name = str(self.json_schema.get("title") or "output")
        else:
            raise ValueError(
                "output_schema must be a pydantic model class or a JSON schema dict, got "
                f"{schema!r:.100}"
            )
        self._structured: dict[int, tuple[BaseChatModel, Runnable[Any, Any] | None]] = {}

    @classmethod
    def coerce(cls, schema: object) -> OutputSchema | None:
        """`schema` as an `OutputSchema` (None stays None), built once per schema.

        A model class is kept by identity, a dict by content, so the CLI's check, the
        loop's options and a run's context share one object (and its validator).

        Raises:
            ValueError: If it is not a model class, a JSON schema dict or None.
        """
        if schema is None or isinstance(schema, OutputSchema):
            return schema
        key: Any = schema
        if isinstance(schema, Mapping):
            key = json.dumps(schema, sort_keys=True, default=str)
        elif not isinstance(schema, type):
            return cls(schema)  # type: ignore[arg-type]  # raises, naming what it got
        found = _BUILT.get(key)
        if found is None:
            found = cls(schema)
            if len(_BUILT) >= _CACHE_SIZE:
                _BUILT.pop(next(iter(_BUILT)))
            _BUILT[key] = found
        return found

    # -- asking for it ---------------------------------------------------------------

    def instruction(self) -> str:
        """What a prompt adds so the model knows the object's shape."""
        schema = json.dumps(self.json_schema, ensure_ascii=False, separators=(",", ":"))
        return f"Reply with one JSON object that matches this JSON Schema:\n{schema}"

    def structured(self, model: BaseChatModel, *, cache: bool = True) -> Runnable[Any, Any] | None:
        """`model` asking for the object through the provider's structured output.

        `with_structured_output(..., method="json_schema", include_raw=True)`: the
        provider enforces the schema where it can (llama.cpp with a grammar), and a reply
        that fails to parse still comes back raw, to record and to show the next round.
        The schema goes as a JSON schema even for a pydantic model: given the class, some
        clients validate the reply themselves and raise on a constraint the provider did
        not enforce, losing the reply; here it is validated (and refined) by the loop.
        None when the model has no such mode (the prompt's instruction then asks for it).

        Args:
            model: The chat model.
            cache: Keep the result for this model (False for a one-run copy of it).
        """
        cached = self._structured.get(id(model))
        if cached is not None and cached[0] is model:
            return cached[1]
        runnable: Runnable[Any, Any] | None
        try:
            runnable = model.with_structured_output(
                self._named_schema(), method="json_schema", include_raw=True
            )
        except (NotImplementedError, ValueError, TypeError) as exc:
            logger.info("no json_schema structured output on %s: %s", type(model), exc)
            runnable = None
        if cache:  # the model is kept with it, so its id cannot be reused meanwhile
            self._structured[id(model)] = (model, runnable)
        return runnable

    def _named_schema(self) -> dict[str, Any]:
        # Providers name the response format after the schema's title.
        return {"title": self.name, **self.json_schema}

    # -- reading it ------------------------------------------------------------------

    def read(self, reply: Any, reasoning: str | None = None) -> Reply:
        """Read one generator reply into an attempt's fields.

        Args:
            reply: A model instance, a dict, JSON text, or a chat message (its
                reasoning is kept apart).
            reasoning: Reasoning already taken out of the reply, if any.

        Returns:
            The reply read: the object as JSON text and plain JSON, or the reply kept
            as it came with a FAIL evaluation naming what is wrong.
        """
        value = reply
        if isinstance(reply, BaseMessage | str):
            value, found = split_reasoning(reply)
            reasoning = reasoning or found
        if isinstance(value, str):
            decoded, error = _decode(value)
            if error is not None:
                return Reply(value, None, reasoning, self._failed([error], parsed=False))
            value = decoded
        output, errors = self.validate(value)
        if errors:
            return Reply(json_text(plain(value)), None, reasoning, self._failed(errors))
        return Reply(json_text(output), output, reasoning)

    def validate(self, value: Any) -> tuple[Any, list[str]]:
        """`(plain JSON value, [])` for a valid object, else `(None, errors)`."""
        if self.model is not None:
            try:
                if isinstance(value, self.model):
                    value = value.model_dump(mode="json")
                return self.model.model_validate(value).model_dump(mode="json"), []
            except ValidationError as exc:
                return None, [f"at {_path(e['loc'])}: {_clip(e['msg'])}" for e in exc.errors()]
        value = plain(value)
        found = sorted(
            self._validator.iter_errors(value),
            key=lambda e: (list(map(str, e.absolute_path)), e.message),
        )
        errors = [f"at {_path(e.absolute_path)}: {_clip(e.message)}" for e in found]
        return (None, errors) if errors else (value, [])

    def typed(self, output: Any) -> Any:
        """A stored plain object as the caller's type: a model instance, or the dict."""
        if output is None or self.model is None:
            return output
        return self.model.model_validate(output)

    def _failed(self, errors: list[str], *, parsed: bool = True) -> Evaluation:
        shown = [f"- {e}" for e in errors[:_MAX_ERRORS]]
        if len(errors) > _MAX_ERRORS:
            shown.append(f"- ... and {len(errors) - _MAX_ERRORS} more")
        if parsed:
            count = f"{len(errors)} error{'s' if len(errors) != 1 else ''}"
            head = f"The reply is not a valid {self.name} object ({count}; `$` is the top level):"
            lines = [head, *shown]
        else:
            lines = [f"The reply is not a {self.name} object: {errors[0]}."]
        feedback = "\n".join([*lines, "Reply with one JSON object that matches the schema."])
        return Evaluation(
            score=0.0,
            verdict="FAIL",
            feedback=feedback,
            details={"output_errors": list(errors), "evaluator": "output_schema"},
        )


_BUILT: dict[Any, OutputSchema] = {}
"""Schemas already built: model classes by identity, JSON schema dicts by content."""


def _decode(text: str) -> tuple[Any, str | None]:
    """The JSON value in a reply: the whole text, else its first fenced JSON block."""
    if not text.strip():
        return None, "the reply is empty"
    try:
        return json.loads(text), None
    except ValueError as exc:
        block = first_block(text, frozenset({"json", "jsonc", "json5"}))
        if block is not None:
            try:
                return json.loads(block.body), None
            except ValueError:
                pass
        return None, f"it is not valid JSON ({exc})"


def _validator(schema: dict[str, Any]) -> Any:
    try:
        import jsonschema
    except ImportError as exc:
        raise ImportError(
            "output_schema as a JSON schema dict needs the jsonschema package: "
            "pip install 'langgraph-refine[schema]' (or pass a pydantic model class)"
        ) from exc
    validator_class = jsonschema.validators.validator_for(schema)
    try:
        validator_class.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise ValueError(
            f"output_schema: the JSON schema itself is invalid at {exc.json_path}: "
            f"{_clip(exc.message)}"
        ) from exc
    return validator_class(schema, format_checker=validator_class.FORMAT_CHECKER)


def structured_parts(reply: Any) -> tuple[Any, Any] | None:
    """`(raw message, parsed object)` of a structured-output reply, else None.

    `with_structured_output(..., include_raw=True)` answers `{"raw", "parsed",
    "parsing_error"}`; this is the one place that knows that shape.
    """
    if isinstance(reply, Mapping) and "raw" in reply:
        return reply.get("raw"), reply.get("parsed")
    return None


def untyped_reply(reply: BaseMessage | str) -> Reply:
    """A reply of an untyped loop: its text, with any reasoning kept apart."""
    text, reasoning = split_reasoning(reply)
    return Reply(text, None, reasoning)

"""JSON extraction against a schema.

The model extracts a contact from free text as JSON. `evaluators.json_schema` validates
the reply (the whole reply, or its first fenced JSON block) against a pydantic model's
JSON Schema: wrong types, missing or extra keys come back as feedback with their JSON
paths. A small callable evaluator checks the extracted values against the text, and the
two are combined: valid JSON with the wrong facts does not score full marks.

Run: `python examples/json_extraction.py` (see examples/_common.py for the model).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from langchain_core.language_models import BaseChatModel
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from langgraph_refine import Evaluation, RefineResult, refine
from langgraph_refine.evaluators import combine, json_schema

try:
    from examples._common import default_model, show
except ModuleNotFoundError:  # run as a script: examples/ itself is on sys.path
    from _common import default_model, show  # type: ignore[no-redef,import-not-found]


class Contact(BaseModel):
    """The record to extract."""

    model_config = ConfigDict(extra="forbid")

    name: str
    email: str = Field(pattern=r"^[^@\s]+@[^@\s]+\.[a-z]+$")
    age: int = Field(ge=0, le=150)
    skills: list[str]


TEXT = (
    "Maria Lopez is a 34-year-old data engineer. Reach her at maria.lopez@example.com. "
    "She works with Python, SQL and Spark."
)
EXPECTED: dict[str, Any] = {
    "name": "Maria Lopez",
    "email": "maria.lopez@example.com",
    "age": 34,
    "skills": ["Python", "SQL", "Spark"],
}

TASK = (
    "Extract the person described in this text as one JSON object with exactly these keys: "
    '"name" (string), "email" (string), "age" (integer) and "skills" (list of strings). '
    f"Reply with the JSON object only, starting with {{ and ending with }}.\n\nText: {TEXT}"
)


def json_in(response: str) -> Any:
    """The JSON value of the reply, or of its first fenced block; None if there is none."""
    fenced = re.search(r"```(?:json)?\s*\n(.*?)```", response, flags=re.DOTALL)
    for text in (response, fenced.group(1) if fenced else ""):
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            continue
    return None


def facts(response: str, state: Mapping[str, Any]) -> Evaluation:
    """Score the fraction of fields whose value matches the text."""
    value = json_in(response)
    if not isinstance(value, dict):
        return Evaluation(score=0.0, feedback="No JSON object to check the values of.")
    wrong = [key for key, expected in EXPECTED.items() if value.get(key) != expected]
    if not wrong:
        return Evaluation(score=1.0, feedback="Every value matches the text.")
    return Evaluation(
        score=1 - len(wrong) / len(EXPECTED),
        feedback=f"These values do not match the text: {', '.join(wrong)}. "
        + "Copy them exactly as the text gives them.",
        details={"wrong": wrong},
    )


def main(model: BaseChatModel | None = None) -> RefineResult:
    """Refine the extraction until it is valid and correct; print and return the result."""
    evaluator = combine(json_schema(Contact), facts)
    result = refine(
        model or default_model(),
        TASK,
        evaluator,
        target_score=1.0,
        max_iterations=2,
        patience=None,
    )
    show(result)
    try:
        print(f"\nas a Contact: {Contact.model_validate(json_in(result.value))!r}")
    except ValidationError as exc:
        print(f"\nnot a valid Contact ({exc.error_count()} error(s))")
    return result


if __name__ == "__main__":
    main()

"""`json_schema`: extraction, validation errors with paths, pydantic models, bad schemas."""

from __future__ import annotations

import sys
from typing import Any

import pytest
from pydantic import BaseModel, Field

from langgraph_refine.evaluators import json_schema

ORDER = {
    "type": "object",
    "required": ["customer", "items"],
    "properties": {
        "customer": {"type": "string"},
        "items": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["sku", "qty"],
                "properties": {"sku": {"type": "string"}, "qty": {"type": "integer", "minimum": 1}},
            },
        },
    },
}
VALID = '{"customer": "Ada", "items": [{"sku": "A1", "qty": 2}]}'


def test_valid_json_scores_one() -> None:
    result = json_schema(ORDER).evaluate(VALID, {})
    assert result.score == 1.0
    assert result.feedback == "The JSON is valid against the schema."
    assert result.details == {"errors": [], "source": "response"}


def test_surrounding_whitespace_is_fine() -> None:
    assert json_schema(ORDER).evaluate(f"\n  {VALID}\n", {}).score == 1.0


def test_first_fenced_json_block_is_used() -> None:
    text = f"Here you go:\n```json\n{VALID}\n```\nand another:\n```json\n{{}}\n```"
    result = json_schema(ORDER).evaluate(text, {})
    assert result.score == 1.0
    assert result.details["source"] == "fenced block"


def test_json_block_wins_over_other_languages_and_unlabelled_blocks_count() -> None:
    text = f"```python\nprint(1)\n```\n```json\n{VALID}\n```"
    assert json_schema(ORDER).evaluate(text, {}).score == 1.0
    assert json_schema(ORDER).evaluate(f"Result:\n```\n{VALID}\n```", {}).score == 1.0


def test_unclosed_fence_runs_to_the_end() -> None:
    assert json_schema(ORDER).evaluate(f"```json\n{VALID}\n", {}).score == 1.0


def test_not_json_at_all() -> None:
    result = json_schema(ORDER).evaluate("The customer is Ada.", {})
    assert result.score == 0.0
    assert "not valid JSON" in result.feedback
    assert "```json" in result.feedback


def test_broken_json_in_the_block_is_reported() -> None:
    result = json_schema(ORDER).evaluate('```json\n{"customer": "Ada",}\n```', {})
    assert result.score == 0.0
    assert "first fenced block is not valid JSON" in result.feedback
    assert "line 1" in result.feedback


def test_validation_errors_name_their_paths() -> None:
    bad = '{"items": [{"sku": "A1", "qty": 0}, {"qty": "two"}]}'
    result = json_schema(ORDER).evaluate(bad, {})
    assert result.score == 0.0
    paths = [e["path"] for e in result.details["errors"]]
    assert paths == ["$", "$.items[0].qty", "$.items[1]", "$.items[1].qty"]
    assert "- at $: 'customer' is a required property" in result.feedback
    assert "- at $.items[0].qty: 0 is less than the minimum of 1" in result.feedback
    assert "- at $.items[1]: 'sku' is a required property" in result.feedback
    assert "- at $.items[1].qty: 'two' is not of type 'integer'" in result.feedback
    assert result.feedback.startswith("The JSON does not match the schema (4 errors;")


def test_wrong_top_level_type() -> None:
    result = json_schema(ORDER).evaluate("[1, 2]", {})
    assert result.score == 0.0
    assert "at $: [1, 2] is not of type 'object'" in result.feedback


def test_many_errors_are_capped_in_feedback_but_all_kept_in_details() -> None:
    schema = {"type": "array", "items": {"type": "string"}}
    result = json_schema(schema).evaluate(str(list(range(30))), {})
    assert len(result.details["errors"]) == 30
    assert "... and 10 more" in result.feedback
    assert result.feedback.count("\n- at ") == 20


def test_formats_are_checked() -> None:
    schema = {"type": "object", "properties": {"email": {"type": "string", "format": "email"}}}
    ev = json_schema(schema)
    assert ev.evaluate('{"email": "ada@example.org"}', {}).score == 1.0
    result = ev.evaluate('{"email": "not an address"}', {})
    assert result.score == 0.0
    assert "$.email" in result.feedback


def test_declared_draft_is_honoured() -> None:
    # In draft 4, exclusiveMaximum is a boolean modifier of maximum.
    schema = {
        "$schema": "http://json-schema.org/draft-04/schema#",
        "type": "number",
        "maximum": 5,
        "exclusiveMaximum": True,
    }
    ev = json_schema(schema)
    assert ev.evaluate("4", {}).score == 1.0
    assert ev.evaluate("5", {}).score == 0.0


class Item(BaseModel):
    sku: str
    qty: int = Field(ge=1)


class Order(BaseModel):
    customer: str
    items: list[Item]


def test_pydantic_model_class() -> None:
    ev = json_schema(Order)
    assert ev.evaluate(VALID, {}).score == 1.0
    result = ev.evaluate('{"customer": "Ada", "items": [{"sku": "A1", "qty": 0}]}', {})
    assert result.score == 0.0
    assert "$.items[0].qty" in result.feedback  # resolved through $defs/$ref


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ({"type": "strng"}, r"schema itself is invalid at \$\.type"),
        (
            {"type": "object", "minProperties": "two"},
            r"schema itself is invalid at \$\.minProperties",
        ),
        ({"required": "name"}, r"schema itself is invalid at \$\.required"),
        ("not a schema", "must be a JSON Schema dict or a pydantic model class"),
        (Item(sku="a", qty=1), "must be a JSON Schema dict or a pydantic model class"),
        (dict, "must be a JSON Schema dict or a pydantic model class"),
    ],
)
def test_invalid_schema_raises_at_construction(schema: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        json_schema(schema)


def test_missing_jsonschema_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "jsonschema", None)  # makes `import jsonschema` fail
    with pytest.raises(ImportError, match=r"pip install 'langgraph-refine\[schema\]'"):
        json_schema(ORDER)


def test_empty_schema_accepts_any_json() -> None:
    ev = json_schema({})
    assert ev.evaluate("null", {}).score == 1.0
    assert ev.evaluate("nope", {}).score == 0.0


async def test_async_path() -> None:
    assert (await json_schema(ORDER).aevaluate(VALID, {})).score == 1.0


def test_name() -> None:
    ev = json_schema(ORDER)
    assert ev.name == "json_schema"
    assert ev.calls_model is False

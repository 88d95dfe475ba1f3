"""Typed responses and reasoning on the command line: `--schema`, batch `"schema"`,
`--show-reasoning`, typed rows and the report (real `ChatOpenAI` clients against a
scripted OpenAI server)."""

# ruff: noqa: F811 - pytest fixtures are imported from the helper module

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from langgraph_refine.cli._report import read_records, render_report
from tests.test_cli_helpers import (  # noqa: F401 - fixtures
    assert_one_line_error,
    cli,
    judge_json,
    last_user_text,
    openai_server,
)

SCHEMA = {
    "title": "Person",
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
}
GOOD = {"name": "Ada", "age": 36}


def schema_file(tmp_path: Path, schema: Any = SCHEMA) -> Path:
    path = tmp_path / "person.json"
    path.write_text(json.dumps(schema))
    return path


def schema_name(body: dict[str, Any]) -> str | None:
    response_format = body.get("response_format") or {}
    return (response_format.get("json_schema") or {}).get("name")


def typed_script(replies: list[str], judge_score: float = 1.0) -> Any:
    """The generator answers `replies` in order (asked for Person); the judge scores."""
    count = {"n": 0}

    def script(body: dict[str, Any]) -> str:
        if schema_name(body) == "Person":
            reply = replies[min(count["n"], len(replies) - 1)]
            count["n"] += 1
            return reply
        return judge_json(judge_score, "PASS" if judge_score >= 1 else "FAIL", "judged")

    return script


def generator_bodies(server: Any) -> list[dict[str, Any]]:
    return [b for b in server.requests if schema_name(b) == "Person"]


def test_run_schema_refines_an_object_and_prints_it(
    cli: Any, openai_server: Any, tmp_path: Path
) -> None:
    server = openai_server(typed_script(['{"name": "Ada"}', json.dumps(GOOD)]))
    args = ["run", "Who is she?", "--model", "m", "--base-url", server.base_url]
    run = cli(*args, "--schema", schema_file(tmp_path), "--json")
    assert run.code == 0, run.err
    data = run.json()
    assert data["output"] == GOOD
    assert json.loads(data["value"]) == GOOD
    first, second = data["attempts"]
    assert first["output"] is None and first["evaluation"]["verdict"] == "FAIL"
    assert "'age' is a required property" in first["evaluation"]["feedback"]
    assert second["output"] == GOOD
    # Asked through the provider's structured output (json_schema), the errors fed back.
    bodies = generator_bodies(server)
    assert bodies[0]["response_format"]["type"] == "json_schema"
    assert bodies[0]["response_format"]["json_schema"]["schema"]["required"] == ["name", "age"]
    assert "'age' is a required property" in last_user_text(bodies[1])
    # The judge never sees an invalid object: one judge call, for the valid one.
    assert len(server.requests) - len(bodies) == 1

    shown = cli(*args, "--schema", schema_file(tmp_path))
    assert shown.code == 0, shown.err
    assert '"name": "Ada",' in shown.out  # the object, formatted


def test_schema_file_mistakes_are_one_line_errors(cli: Any, tmp_path: Path) -> None:
    base = ["run", "t", "--model", "m", "--base-url", "http://127.0.0.1:9/v1"]
    assert_one_line_error(cli(*base, "--schema", tmp_path / "nope.json"), "file not found")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert_one_line_error(cli(*base, "--schema", bad), "is not valid JSON")
    assert_one_line_error(
        cli(*base, "--schema", schema_file(tmp_path, {"type": 5})), "schema itself is invalid"
    )
    assert_one_line_error(cli(*base, "--schema", schema_file(tmp_path, [1])), "JSON schema object")


def test_show_reasoning_prints_it_and_the_judge_never_sees_it(cli: Any, openai_server: Any) -> None:
    def script(body: dict[str, Any]) -> str:
        if schema_name(body) == "JudgeReply" or "response_to_rate" in json.dumps(body):
            return judge_json(1.0, "PASS", "fine")
        return "<think>PRIVATE-PLAN</think>The answer."

    server = openai_server(script)
    args = ["run", "Answer.", "--model", "m", "--base-url", server.base_url]
    hidden = cli(*args)
    assert hidden.code == 0, hidden.err
    assert "PRIVATE-PLAN" not in hidden.out and "The answer." in hidden.out
    shown = cli(*args, "--show-reasoning")
    assert shown.code == 0, shown.err
    assert "reasoning:" in shown.out and "PRIVATE-PLAN" in shown.out
    judged = [b for b in server.requests if "response_to_rate" in json.dumps(b)]
    assert judged and not any("PRIVATE-PLAN" in json.dumps(b) for b in judged)


def test_batch_lines_set_their_schema_and_rows_carry_the_object(
    cli: Any, openai_server: Any, tmp_path: Path
) -> None:
    server = openai_server(typed_script([json.dumps(GOOD)]))
    src = tmp_path / "in.jsonl"
    rows = [
        {"id": "inline", "task": "Who?", "schema": SCHEMA},
        {"id": "file", "task": "Who?", "schema": str(schema_file(tmp_path))},
        {"id": "text", "task": "Who?"},
        {"id": "bad", "task": "Who?", "schema": {"type": 5}},
    ]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out.jsonl"
    run = cli("batch", src, "--out", out, "--model", "m", "--base-url", server.base_url)
    assert run.code == 1  # the bad line
    assert "in.jsonl:4" in run.err and "schema itself is invalid" in run.err
    written = {r["id"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert set(written) == {"inline", "file", "text"}
    assert written["inline"]["output"] == written["file"]["output"] == GOOD
    assert written["text"]["output"] is None  # an untyped line stays text
    assert written["inline"]["attempts"][0]["output"] == GOOD


def test_the_report_shows_the_object_formatted_and_the_reasoning_collapsed(
    tmp_path: Path,
) -> None:
    attempt = {
        "index": 0,
        "response": json.dumps(GOOD),
        "output": GOOD,
        "reasoning": "PRIVATE-PLAN <b>",
        "evaluation": {"score": 1.0, "feedback": "ok", "verdict": "PASS"},
    }
    row = {
        "id": "t",
        "task": "Who?",
        "value": json.dumps(GOOD),
        "output": GOOD,
        "score": 1.0,
        "stop_reason": "passed",
        "attempts": [attempt],
    }
    path = tmp_path / "out.jsonl"
    path.write_text(json.dumps(row) + "\n")
    page = render_report(read_records(path, lambda message: None), source=str(path))
    formatted = (
        '<pre class="object">{\n  &quot;name&quot;: &quot;Ada&quot;,\n  &quot;age&quot;: 36\n}'
    )
    assert page.count(formatted) == 2  # the best response and the attempt
    assert (
        '<details class="reasoning"><summary>reasoning</summary><pre>PRIVATE-PLAN &lt;b&gt;</pre>'
        in page
    )

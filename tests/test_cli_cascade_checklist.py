# ruff: noqa: F811 - pytest fixtures are imported from the helper module
"""`cascade:` and `checklist` evaluator specs: parsed, built, and run from the command line."""

from __future__ import annotations

import json
from typing import Any

import pytest

from langgraph_refine._calls._specs import SPEC_FORMS, SpecError, parse_spec, parse_specs
from langgraph_refine.evaluators import CascadeEvaluator, ChecklistEvaluator, LLMJudge, WordCount
from langgraph_refine.evaluators._from_specs import build_evaluator
from tests.fakes import ScriptedChatModel
from tests.test_cli_helpers import (  # noqa: F401 - fixtures
    ScriptedOpenAI,
    cli,
    is_judge,
    last_user_text,
    openai_server,
    rated_text,
)


def test_a_cascade_spec_names_its_stages_in_order() -> None:
    spec = parse_spec("cascade: words:3-6 ;contains:owl;judge")
    assert spec.kind == "cascade"
    assert [s.text for s in spec.argument] == ["words:3-6", "contains:owl", "judge"]
    judge = ScriptedChatModel()
    built = build_evaluator(spec, lambda: judge)
    assert isinstance(built, CascadeEvaluator)
    assert isinstance(built.stages[0], WordCount) and isinstance(built.stages[2], LLMJudge)
    assert built.stages[2].model is judge
    result = built.evaluate("one two three four five six seven", {"task": "t"})
    assert result.details["stopped_at"] == "word_count" and judge.calls == []


def test_a_checklist_spec_grades_with_the_judge_model() -> None:
    judge = ScriptedChatModel()
    built = build_evaluator(parse_spec("checklist"), lambda: judge)
    assert isinstance(built, ChecklistEvaluator) and built.model is judge
    assert built.criteria == []  # the run's criteria are added per request


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("cascade:judge", "a cascade needs at least two specs separated by ';', e.g. cascade:"),
        ("cascade:", "a cascade needs at least two specs"),
        (
            "checklist:Rhymes",
            "unknown evaluator spec 'checklist:Rhymes' .criteria are not part of a spec: "
            ".* -e checklist --criterion 'Rhymes'.; use one of",
        ),
        ("cascade:words:1-3;python-tests:t.py", "is refused: a run may not ask for checks"),
    ],
)
def test_bad_cascade_and_checklist_specs(spec: str, message: str) -> None:
    with pytest.raises(SpecError, match=message):
        parse_specs([spec], allow_files=False)


def test_the_new_forms_are_listed() -> None:
    assert {"cascade:SPEC;SPEC;...", "checklist"} <= set(SPEC_FORMS)


def grader_script(body: dict[str, Any]) -> str:
    """Drafts: too long, then right; the judge passes anything it reads; the checklist
    grader passes a criterion when the response holds its quoted word."""
    text = last_user_text(body)
    if "# Criteria\n1. " in text and is_judge(body):
        rated = rated_text(body)
        criteria = text.split("# Criteria\n", 1)[1].split("\n\n", 1)[0].splitlines()
        results = []
        for number, line in enumerate(criteria, start=1):
            word = line.split('"')[1] if '"' in line else ""
            results.append({"number": number, "gap": f"Say {word}.", "passed": word in rated})
        return json.dumps({"criteria": results})
    if is_judge(body):
        return json.dumps({"feedback": "Fine.", "verdict": "PASS", "score": 0.95})
    if "Feedback on this attempt" in text:
        return "It was finished in 1889, rain on the roofs."
    return "Rain " * 30


def run_args(server: ScriptedOpenAI, *extra: str) -> list[str]:
    return [
        "run",
        "Describe the rain.",
        "--model",
        "scripted",
        "--base-url",
        server.base_url,
        "--json",
        *extra,
    ]


def test_run_with_a_cascade_pays_the_judge_only_for_drafts_that_pass(
    cli: Any, openai_server: Any
) -> None:
    server = openai_server(grader_script)
    run = cli(*run_args(server, "-e", "cascade:words:3-20;judge"))
    assert run.code == 0, run.err
    data = run.json()
    assert data["stop_reason"] == "passed"
    assert len(server.generator_requests) == 2
    assert len(server.judge_requests) == 1  # the 30-word draft never reached the judge
    assert data["usage"]["calls"] == 3


def test_run_with_a_checklist_grades_each_criterion(cli: Any, openai_server: Any) -> None:
    server = openai_server(grader_script)
    run = cli(*run_args(server, "-e", "checklist", "--criterion", 'Mentions "1889"'))
    assert run.code == 0, run.err
    data = run.json()
    first = data["attempts"][0]["evaluation"]
    assert first["details"]["criteria"] == [
        {"criterion": 'Mentions "1889"', "passed": False, "gap": "Say 1889."}
    ]
    assert first["feedback"] == '1 of 1 criteria not met:\n- Mentions "1889": Say 1889.'
    assert (data["stop_reason"], data["score_history"]) == ("passed", [0.0, 1.0])


def test_a_bad_cascade_spec_is_one_line_of_error(cli: Any, openai_server: Any) -> None:
    server = openai_server(grader_script)
    run = cli(*run_args(server, "-e", "cascade:judge"))
    assert run.code == 2  # a bad option value, as for every bad spec: a usage error
    assert run.err.count("\n") == 1 and "a cascade needs at least two specs" in run.err
    assert "Traceback" not in run.err
    assert server.generator_requests == []

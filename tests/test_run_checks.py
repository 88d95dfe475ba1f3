"""A run's check in its context: `context={"evaluator": ..., "judge_model": ..., ...}`.

The spec language is the CLI's (`langgraph_refine._calls._specs`); checks that read files or run
code are refused from a run's context unless the deployment allows them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from langgraph_refine import RefineContext, create_refine_graph
from langgraph_refine._calls._specs import (
    ALLOW_CODE_CHECKS_ENV,
    EvaluatorSpec,
    SpecError,
    code_checks_allowed,
    parse_spec,
)
from langgraph_refine._result import RESULT_KEYS
from tests.fakes import ScriptedChatModel, judge_reply, scores

TASK = "Name two fruits."


def loop(replies: list[str], evaluator: Any = None, **options: Any) -> tuple[Any, Any]:
    model = ScriptedChatModel(replies=replies)
    options.setdefault("max_iterations", 2)
    options.setdefault("patience", None)
    graph = create_refine_graph(model, evaluator or scores(0.1), **options).compile()
    return graph, model


def run(graph: Any, context: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = graph.invoke({"task": TASK}, output_keys=RESULT_KEYS, context=context)
    return out


def history(out: dict[str, Any]) -> list[float]:
    return [a.evaluation.score for a in out["attempts"]]


def test_the_context_schema_lists_the_check_keys() -> None:
    assert {"evaluator", "judge_model", "max_tokens"} <= set(RefineContext.__annotations__)


def test_a_runs_check_replaces_the_graphs_evaluator_for_that_run_only() -> None:
    graph, _ = loop(["apple", "apple and pear", "pear"])
    out = run(graph, {"evaluator": "contains:apple,pear"})
    assert history(out) == [0.5, 1.0]  # the check's scores, not the graph's 0.1
    assert out["stop_reason"] == "target_reached" and out["response"] == "apple and pear"
    again = run(graph, {})
    assert history(again) == [0.1, 0.1, 0.1]  # the next run uses the graph's evaluator


def test_combined_checks_inline_schema_and_no_repetition() -> None:
    reply = json.dumps({"fruit": "apple"})
    graph, _ = loop([reply])
    schema = {"type": "object", "required": ["fruit"]}
    out = run(
        graph,
        {"evaluator": ["schema:" + json.dumps(schema), "no_repetition", "regex:apple"]},
    )
    assert history(out)[0] == pytest.approx(1.0)
    wrong, _ = loop(['{"veg": "leek"}'], max_iterations=0)
    out = run(wrong, {"evaluator": "schema:" + json.dumps(schema)})
    assert history(out) == [0.0]
    assert "fruit" in out["attempts"][0].evaluation.feedback


def test_a_judge_check_runs_on_the_generators_model() -> None:
    graph, model = loop(["apple", judge_reply(1.0, "PASS", "good")])
    out = run(graph, {"evaluator": "judge"})
    assert history(out) == [1.0]
    assert len(model.calls) == 2  # one generation, one judge call


@pytest.mark.parametrize(
    ("context", "fragments"),
    [
        ({"evaluator": "contains:"}, ["'contains:'", "list the words"]),
        ({"evaluator": "bogus"}, ["unknown evaluator spec 'bogus'", "contains:w1,w2,..."]),
        ({"evaluator": ["words:9-2"]}, ["MIN (9) is greater than MAX (2)"]),
        ({"evaluator": "schema:[1]"}, ["must be a JSON object"]),
        ({"evaluator": 3}, ["'evaluator' must be a spec string or a list of them, got 3"]),
        ({"judge_model": ""}, ["judge_model must be a model string"]),
        ({"max_tokens": 0}, ["max_tokens must be a whole number of tokens >= 1"]),
    ],
)
def test_an_invalid_check_fails_before_any_model_call(
    context: dict[str, Any], fragments: list[str]
) -> None:
    graph, model = loop(["apple"])
    with pytest.raises(ValueError) as info:
        run(graph, context)
    for fragment in fragments:
        assert fragment in str(info.value)
    assert model.calls == []


LEAVES_A_FILE = """
import pathlib
pathlib.Path({marker!r}).write_text("code ran")

def test_anything():
    assert True
"""


def code_check(tmp_path: Path) -> tuple[Path, Path]:
    """A python-tests file whose code, if it ever runs, leaves `marker` behind."""
    marker = tmp_path / "ran.txt"
    tests = tmp_path / "tests.py"
    tests.write_text(LEAVES_A_FILE.format(marker=str(marker)))
    return tests, marker


@pytest.mark.parametrize("kind", ["python-tests", "python_tests", "json-schema"])
def test_checks_that_read_files_or_run_code_are_refused_by_default(
    tmp_path: Path, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ALLOW_CODE_CHECKS_ENV, raising=False)
    tests, marker = code_check(tmp_path)
    graph, model = loop(["def f(): pass"])
    with pytest.raises(ValueError) as info:
        run(graph, {"evaluator": ["contains:f", f"{kind}:{tests}"]})
    message = str(info.value)
    assert f"'{kind}:{tests}' is refused" in message
    assert f"{ALLOW_CODE_CHECKS_ENV}=1" in message and "contains:w1,w2,..." in message
    assert "python-tests:FILE" not in message.split("a run may use")[1]
    assert model.calls == [] and not marker.exists()


def test_a_deployment_may_allow_code_checks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ALLOW_CODE_CHECKS_ENV, "1")
    tests, marker = code_check(tmp_path)
    graph, _ = loop(["def f():\n    return 1\n"], max_iterations=0)
    out = run(graph, {"evaluator": f"python-tests:{tests}"})
    assert history(out) == [1.0]
    assert marker.read_text() == "code ran"


def test_code_checks_allowed_reads_the_environment() -> None:
    assert code_checks_allowed({ALLOW_CODE_CHECKS_ENV: "1"})
    assert code_checks_allowed({ALLOW_CODE_CHECKS_ENV: "true"})
    assert not code_checks_allowed({ALLOW_CODE_CHECKS_ENV: "0"})
    assert not code_checks_allowed({})


def test_a_refused_spec_is_refused_before_its_file_is_read(tmp_path: Path) -> None:
    missing = tmp_path / "missing.json"
    with pytest.raises(SpecError, match="is refused"):
        parse_spec(f"json-schema:{missing}", allow_files=False)
    with pytest.raises(SpecError, match="file not found"):
        parse_spec(f"json-schema:{missing}")


def test_spec_kinds_take_dashes_or_underscores() -> None:
    assert parse_spec("no-repetition") == EvaluatorSpec("no-repetition", "no-repetition")
    assert parse_spec("no_repetition").kind == "no-repetition"
    assert parse_spec('schema:{"type": "object"}').argument == {"type": "object"}


class KwargsModel(ScriptedChatModel):
    """Records the keyword arguments of every call (where `max_tokens` arrives)."""

    max_tokens: int | None = None
    seen: list[dict[str, Any]] = []

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any) -> Any:
        self.seen.append(kw)
        return super()._generate(messages, stop, run_manager, **kw)


def test_max_tokens_per_run_reaches_the_model_call_within_its_cap() -> None:
    model = KwargsModel(replies=["apple"], max_tokens=100, seen=[])
    graph = create_refine_graph(model, scores(1.0)).compile()
    run(graph, {"max_tokens": 40})
    assert model.seen == [{"max_tokens": 40}]
    run(graph, {})
    assert model.seen[-1] == {}
    with pytest.raises(ValueError, match="above this deployment's cap of 100"):
        run(graph, {"max_tokens": 101})
    assert len(model.seen) == 2  # refused before the call


def test_max_tokens_needs_a_chat_model_generator() -> None:
    graph = create_refine_graph(lambda state: "apple", scores(1.0)).compile()
    with pytest.raises(ValueError, match="applies to a chat-model generator"):
        run(graph, {"max_tokens": 40})


def test_an_edited_check_file_counts_from_the_next_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ALLOW_CODE_CHECKS_ENV, "1")
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps({"type": "object", "required": ["fruit"]}))
    graph, _ = loop(['{"fruit": "apple"}'], max_iterations=0)
    context = {"evaluator": f"json-schema:{schema}"}
    assert history(run(graph, context)) == [1.0]
    schema.write_text(json.dumps({"type": "object", "required": ["veg"]}))
    assert history(run(graph, context)) == [0.0]


def test_a_deployment_may_bound_the_judge_models_a_run_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from langgraph_refine._calls._specs import JUDGE_MODELS_ENV, check_judge_model

    env = {JUDGE_MODELS_ENV: "small-judge, openai:gpt-4o-mini", "REFINE_MODEL": "served"}
    check_judge_model("small-judge", env)
    check_judge_model("served", env)
    check_judge_model("anything", {})  # unset: any model
    with pytest.raises(SpecError, match="'big-judge' is not one this deployment allows"):
        check_judge_model("big-judge", env)
    monkeypatch.setenv(JUDGE_MODELS_ENV, "small-judge")
    graph, model = loop(["apple"])
    with pytest.raises(ValueError, match="use one of 'small-judge'"):
        run(graph, {"judge_model": "big-judge"})
    assert model.calls == []

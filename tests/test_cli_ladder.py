"""A ladder of models on the command line: `--model` repeated, a batch line's `model` list,
and which model wrote each attempt in the view, the JSON, the rows, the summary and the report.

Real `ChatOpenAI` clients talk to a scripted OpenAI-compatible server on loopback that
answers by the requested model: `cheap` writes a weak draft, `strong` a good answer.
"""

# ruff: noqa: F811 - pytest fixtures are imported from the helper module

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.test_cli_helpers import (  # noqa: F401 - fixtures
    assert_one_line_error,
    cli,
    is_judge,
    judge_json,
    openai_server,
    rated_text,
)

CHEAP, STRONG = "openai:cheap", "openai:strong"
PRICES = ("--price", "cheap=1,1", "--price", "strong=100,100")


def by_model(body: dict[str, Any]) -> str:
    """Judge: PASS for a good answer, 0.2 else; generators answer by their model."""
    if is_judge(body):
        good = "good" in rated_text(body)
        return judge_json(1.0 if good else 0.2, "PASS" if good else "NEEDS_IMPROVEMENT")
    return "a good answer" if body["model"] == "strong" else "a weak draft"


def ladder_options(server: Any) -> list[str]:
    """The ladder cheap -> strong on the scripted server."""
    return ["--model", "cheap", "--model", "strong", "--base-url", server.base_url]


def ladder_args(server: Any, *extra: str, task: str = "Answer well.") -> list[str]:
    return ["run", task, *ladder_options(server), *extra]


def test_model_repeated_climbs_and_the_json_names_each_attempts_model(
    cli: Any, openai_server: Any
) -> None:
    server = openai_server(by_model)
    run = cli(*ladder_args(server, "--json", *PRICES))
    assert run.code == 0, run.err
    data = run.json()
    assert [(a["model"], a["rung"]) for a in data["attempts"]] == [
        (CHEAP, 0),
        (CHEAP, 0),
        (STRONG, 1),
    ]
    assert data["value"] == "a good answer" and data["verdict"] == "PASS"
    generated = [r["model"] for r in server.generator_requests]
    assert generated == ["cheap", "cheap", "strong"]
    # The judge runs on the first rung.
    assert {r["model"] for r in server.judge_requests} == {"cheap"}
    models = data["models"]
    assert list(models) == [CHEAP, STRONG]
    assert models[CHEAP]["attempts"] == 2 and models[CHEAP]["calls"] == 4
    assert models[STRONG]["attempts"] == 1 and models[STRONG]["calls"] == 2
    # Priced per model: the strong rung's tokens cost 100 times as much.
    strong_tokens = sum(a["usage"]["total_tokens"] for a in data["attempts"] if a["rung"] == 1)
    assert models[STRONG]["cost"] > 0
    assert sum(m["cost"] for m in models.values()) == pytest.approx(data["usage"]["cost"])
    assert strong_tokens > 0


def test_the_view_shows_who_wrote_each_round_and_calls_and_cost_per_model(
    cli: Any, openai_server: Any
) -> None:
    run = cli(*ladder_args(openai_server(by_model), *PRICES))
    assert run.code == 0, run.err
    rounds = [line for line in run.out.splitlines() if line.startswith("round")]
    assert [f"by {CHEAP}" in r for r in rounds] == [True, True, False]
    assert f"by {STRONG}" in rounds[2]
    summary = next(line for line in run.out.splitlines() if line.startswith("by model:"))
    assert f"{CHEAP} 2 attempts, 4 calls, $" in summary
    assert f"{STRONG} 1 attempt, 2 calls, $" in summary


def test_one_model_shows_no_ladder_but_the_json_still_names_it(
    cli: Any, openai_server: Any
) -> None:
    server = openai_server(by_model)
    run = cli("run", "t", "--model", "strong", "--base-url", server.base_url)
    assert run.code == 0, run.err
    assert "by model:" not in run.out and f"by {STRONG}" not in run.out
    data = cli("run", "t", "--model", "strong", "--base-url", server.base_url, "--json").json()
    assert [a["model"] for a in data["attempts"]] == [STRONG]
    assert data["attempts"][0]["rung"] is None
    assert data["models"] == {STRONG: {"attempts": 1, "calls": 2, "cost": None}}


@pytest.mark.parametrize(
    ("models", "fragments"),
    [
        (["", "strong"], ["--model ''", "is empty", "cheapest first"]),
        (["cheap", "  "], ["--model '", "is empty"]),
        (["cheap", "cheap"], ["--model 'cheap' is given twice"]),
    ],
)
@pytest.mark.parametrize("verb", ["run", "batch"])
def test_a_bad_model_list_is_a_one_line_error_before_any_call(
    cli: Any, openai_server: Any, tmp_path: Path, verb: str, models: list[str], fragments: list[str]
) -> None:
    server = openai_server(by_model)
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"id": 1, "task": "t"}) + "\n")
    args = ["run", "t"] if verb == "run" else ["batch", str(src), "--out", str(tmp_path / "o")]
    for name in models:
        args += ["--model", name]
    run = cli(*args, "--base-url", server.base_url)
    assert_one_line_error(run, *fragments)
    assert server.requests == []


def _rows(path: Path) -> dict[Any, dict[str, Any]]:
    return {row["id"]: row for row in map(json.loads, path.read_text().splitlines())}


def test_batch_ladders_per_line_models_summary_rows_and_report(
    cli: Any, openai_server: Any, tmp_path: Path
) -> None:
    server = openai_server(by_model)
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    lines = [
        {"id": "ladder", "task": "climb"},
        {"id": "strong-only", "task": "one model", "model": "strong"},
        {"id": "own-ladder", "task": "its own", "model": ["cheap", "strong"]},
        {"id": "bad", "task": "t", "model": []},
    ]
    src.write_text("".join(json.dumps(line) + "\n" for line in lines))
    run = cli(
        "batch",
        src,
        "--out",
        out,
        *ladder_options(server),
        "-c",
        "1",
        *PRICES,
    )
    assert run.code == 1, run.err  # the bad line
    assert "in.jsonl:4: 'model' must be a model name or a non-empty list" in run.err
    rows = _rows(out)
    assert sorted(rows) == ["ladder", "own-ladder", "strong-only"]
    for key in ("ladder", "own-ladder"):
        assert [a["model"] for a in rows[key]["attempts"]] == [CHEAP, CHEAP, STRONG]
        assert list(rows[key]["models"]) == [CHEAP, STRONG]
    assert [a["model"] for a in rows["strong-only"]["attempts"]] == [STRONG]
    assert rows["strong-only"]["attempts"][0]["rung"] is None
    summary = run.out.strip().splitlines()[0]
    # Calls and cost per model over the batch: 2 + 2 cheap attempts, 1 + 1 + 1 strong.
    assert f"by model: {CHEAP} 4 attempts, 8 calls, $" in summary
    assert f"{STRONG} 3 attempts, 6 calls, $" in summary

    html = tmp_path / "report.html"
    report = cli("report", out, "--html", html)
    assert report.code == 0, report.err
    page = html.read_text()
    assert f'<tr data-model="{CHEAP}"><td>{CHEAP}</td><td class="num">4</td>' in page
    assert f'<tr data-model="{STRONG}"><td>{STRONG}</td><td class="num">3</td>' in page
    assert f"<title>attempt 2 by {STRONG}: fresh attempt" in page  # the attempt tree
    assert page.count('<p class="legend models">') == 2  # the two ladder tasks' trees
    assert f'<span class="model">by {CHEAP}</span>' in page  # the attempts table


def test_on_a_server_the_models_go_in_each_runs_context(tmp_path: Path) -> None:
    from langgraph_refine.cli._batch import read_input
    from langgraph_refine.cli._options import CommandOptions
    from langgraph_refine.cli._remote import run_context

    src = tmp_path / "in.jsonl"
    src.write_text(
        json.dumps({"id": 1, "task": "t", "model": ["cheap", "strong"]})
        + "\n"
        + json.dumps({"id": 2, "task": "t"})
        + "\n"
    )
    items = read_input(src, CommandOptions()).items
    batch_wide = {"models": ["a", "b"]}  # --model a --model b
    assert run_context(items[0], batch_wide)["models"] == ["cheap", "strong"]
    assert run_context(items[1], batch_wide)["models"] == ["a", "b"]
    assert "models" not in run_context(items[1])

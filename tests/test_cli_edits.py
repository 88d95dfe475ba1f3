"""`--edits` and a batch line's `edits`: the command line refining by SEARCH/REPLACE edits.

A real `ChatOpenAI` client talks to the scripted server of tests/test_cli_helpers.py.
"""

# ruff: noqa: F811 - pytest fixtures are imported from the helper module

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from langgraph_refine._decisions._prompts import EDIT_INSTRUCTIONS
from langgraph_refine.cli._options import CommandOptions
from langgraph_refine.cli._shared import SharedFlags
from tests.test_cli_helpers import (  # noqa: F401 - fixtures
    assert_one_line_error,
    cli,
    is_judge,
    judge_json,
    last_user_text,
    openai_server,
    rated_text,
    task_of,
)


def editing_script(body: dict[str, Any]) -> str:
    """A generator that writes `<task> v0` whole, then edits `vK` into `vK+1` when asked.

    Asked for a rewrite, it rewrites; the judge scores version k as 0.5 + 0.25 k.
    """
    if is_judge(body):
        k = int(re.search(r" v(\d+)", rated_text(body)).group(1))  # type: ignore[union-attr]
        score = min(1.0, 0.5 + 0.25 * k)
        return judge_json(score, "PASS" if score >= 1.0 else "NEEDS_IMPROVEMENT", "more")
    prompt = last_user_text(body)
    versions = re.findall(r" v(\d+)\nthe end", prompt)
    if not versions:
        return f"{task_of(body)} v0\nthe end"
    k = int(versions[-1])
    if EDIT_INSTRUCTIONS not in prompt:
        return f"{task_of(body)} v{k + 1}\nthe end"
    return f"<<<<<<< SEARCH\n v{k}\n=======\n v{k + 1}\n>>>>>>> REPLACE"


def test_run_with_edits_on_applies_the_blocks_and_shows_them(cli: Any, openai_server: Any) -> None:
    server = openai_server(editing_script)
    base = ["run", "Sea", "--model", "m", "--base-url", server.base_url]
    run = cli(*base, "--edits", "on", "--json")
    assert run.code == 0, run.err
    result = json.loads(run.out)
    assert [a["edits"] for a in result["attempts"]] == [None, 1, 1]
    assert result["value"] == "Sea v2\nthe end" and result["verdict"] == "PASS"
    # The judge rated the edited text, not the blocks.
    assert [rated_text(b) for b in server.judge_requests][1] == "Sea v1\nthe end"
    shown = cli(*base, "--edits", "on")
    assert shown.code == 0 and "1 edit(s)" in shown.out


def test_edits_are_off_by_default_and_auto_rewrites_a_short_attempt(
    cli: Any, openai_server: Any
) -> None:
    server = openai_server(editing_script)
    base = ["run", "Sea", "--model", "m", "--base-url", server.base_url, "--json"]
    for extra in ([], ["--edits", "auto"]):
        run = cli(*base, *extra)
        assert run.code == 0, run.err
        assert [a["edits"] for a in json.loads(run.out)["attempts"]] == [None, None, None]


def test_bad_edits_mode_is_one_line(cli: Any) -> None:
    run = cli("run", "Say hi.", "--model", "m", "--edits", "always")
    assert_one_line_error(run, "--edits must be one of off, on, auto; got 'always'")


def test_a_batch_line_sets_its_own_edits(cli: Any, openai_server: Any, tmp_path: Path) -> None:
    server = openai_server(editing_script)
    lines = [
        {"id": "a", "task": "Sea", "edits": True},
        {"id": "b", "task": "Sky"},
        {"id": "c", "task": "Sun", "edits": "sometimes"},
    ]
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text("".join(json.dumps(line) + "\n" for line in lines))
    run = cli("batch", str(src), "--out", str(out), "--model", "m", "--base-url", server.base_url)
    assert run.code == 1  # line c is refused, the others run
    assert "'edits' must be one of off, on, auto; got 'sometimes'" in run.err
    rows = {r["id"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert set(rows) == {"a", "b"}
    assert [a["edits"] for a in rows["a"]["attempts"]] == [None, 1, 1]
    assert [a["edits"] for a in rows["b"]["attempts"]] == [None, None, None]
    # The report shows which attempts were edited.
    page = tmp_path / "report.html"
    assert cli("report", str(out), "--html", str(page)).code == 0
    assert page.read_text().count('<span class="edits" data-edits="1">1 edit(s)</span>') == 2


def test_cli_edits_values() -> None:
    plain = SharedFlags(evaluator=["words:1-5"], loop={}, memory="last").options()
    assert "edits" not in plain.graph_kwargs(lambda: None)  # type: ignore[arg-type,return-value]
    auto = SharedFlags(evaluator=["words:1-5"], memory="last", edits="Auto").options()
    assert auto.graph_kwargs(lambda: None)["edits"] == "auto"  # type: ignore[arg-type,return-value]
    assert plain.override({"edits": "on"}).settings["edits"] is True
    assert auto.override({"edits": False}).settings["edits"] is False


def test_a_served_run_gets_the_lines_edits_in_its_context() -> None:
    from langgraph_refine.cli._batch import BatchItem
    from langgraph_refine.cli._remote import run_context

    options = CommandOptions().override({"edits": "auto"})
    item = BatchItem(line=1, id="x", task="t", options=options, given=frozenset({"edits"}))
    assert run_context(item)["edits"] == "auto"
    plain = BatchItem(line=2, id="y", task="t", options=CommandOptions())
    assert "edits" not in run_context(plain)

"""What `run` shows explains every stop: phases, unjudged rounds, cascades, nothing judged.

The command runs in-process against a scripted OpenAI-compatible server; the live view's
spinner texts are recorded by a `RoundView` that keeps what it was asked to show.
"""

# ruff: noqa: F811 - pytest fixtures are imported from the helper module

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from langgraph_refine import Budget, BudgetExhaustedError, refine
from langgraph_refine.cli._models import ModelSettings
from langgraph_refine.cli._options import CommandOptions
from langgraph_refine.cli._single import RunRequest, execute
from langgraph_refine.cli._view import RoundView
from langgraph_refine.evaluators import Unjudged
from tests.test_cli_helpers import (  # noqa: F401 - fixtures
    Reply,
    ScriptedOpenAI,
    cli,
    drafts_and_judge,
    is_judge,
    openai_server,
)


class RecordingView(RoundView):
    """A `RoundView` that records each spinner text it is asked to show."""

    def __init__(self) -> None:
        super().__init__(Console(file=io.StringIO(), width=200))
        self.shown: list[str] = []

    def start(self, what: str) -> None:
        self.shown.append(what)
        super().start(what)


def run_view(server: ScriptedOpenAI, request: RunRequest) -> RecordingView:
    view = RecordingView()
    settings = ModelSettings.from_options("scripted", server.base_url, None)
    execute(request, settings, view=view, reviewer=None, notes=Console(file=io.StringIO()))
    return view


def test_the_spinner_names_each_phase_and_nothing_after_the_stop(
    openai_server: Any, tmp_path: Path
) -> None:
    server = openai_server(drafts_and_judge())
    options = CommandOptions(settings={"max_iterations": 1, "patience": 5})
    db = tmp_path / "runs.sqlite"
    view = run_view(server, RunRequest("Write.", options, checkpoint=db, thread="new-thread"))
    # A new --thread starts: it resumes nothing. The result is chosen in the last
    # judging step (no comparisons: no step of its own, so no phase of its own).
    assert view.shown == [
        "round 0: generating…",
        "round 0: judging…",
        "round 1: generating a refinement…",
        "round 1: judging…",
    ]


def test_a_resumed_thread_says_so(openai_server: Any, tmp_path: Path) -> None:
    calls = {"n": 0}
    inner = drafts_and_judge()

    def script(body: dict[str, Any]) -> Any:
        calls["n"] += 1
        if calls["n"] == 3:
            return Reply(status=400, error="server fell over")
        return inner(body)

    server = openai_server(script)
    options = CommandOptions(settings={"max_iterations": 1, "patience": 5})
    request = RunRequest("Write.", options, checkpoint=tmp_path / "r.sqlite", thread="t")
    with pytest.raises(Exception, match="server fell over"):
        run_view(server, request)
    view = run_view(server, request)
    assert view.shown[0] == "resuming after 1 round(s)…"
    assert "round 1: generating a refinement…" in view.shown


def test_a_cascades_round_names_the_stage_that_stopped_it(cli: Any, openai_server: Any) -> None:
    server = openai_server(drafts_and_judge())  # drafts of two words: too long for 1-1
    run = cli(
        "run", "Write.", "--model", "m", "--base-url", server.base_url,
        "-e", "cascade:words:1-1;judge", "--max-iterations", "0",
    )  # fmt: skip
    first = next(line for line in run.out.splitlines() if line.startswith("round  0"))
    assert "stopped at word_count" in first, first
    assert not server.judge_requests


def test_an_unjudged_rounds_error_is_shown_whole() -> None:
    console = Console(file=io.StringIO(), width=100)
    view = RoundView(console)
    hint = "if it hit the token limit, give the judge model a higher max_tokens"
    error = "the judge's reply could not be read (2 calls): the reply was cut off " + hint
    view.event({"type": "round", "iteration": 0, "score": None, "error": error})
    shown = " ".join(console.file.getvalue().split())  # type: ignore[attr-defined]
    assert hint in shown and "…" not in shown


def test_a_run_that_judged_nothing_fails_and_says_so(cli: Any, openai_server: Any) -> None:
    server = openai_server(lambda body: "no idea" if is_judge(body) else "a draft")
    run = cli(
        "run", "Write.", "--model", "m", "--base-url", server.base_url,
        "--max-iterations", "1", "--on-evaluator-error", "skip",
    )  # fmt: skip
    assert run.code == 1, run
    assert "best response — score -" in run.out  # the unscored result is still shown
    assert "langgraph-refine: nothing was judged: none of the 2 attempt(s) could be scored" in (
        run.err
    )
    judged = cli(
        "run", "Write.", "--model", "m", "--base-url", openai_server(drafts_and_judge()).base_url,
        "--max-iterations", "0", "--json",
    )  # fmt: skip
    assert judged.code == 0, judged.err


def test_no_best_score_none_in_a_budget_error() -> None:
    def unjudged(response: str, state: Any) -> float:
        raise Unjudged("the grading service is down")

    with pytest.raises(BudgetExhaustedError) as raised:
        refine(
            lambda state: "a",
            "T",
            unjudged,
            budget=Budget(max_calls=1),
            on_budget_exhausted="raise",
            on_evaluator_error="skip",
        )
    assert "None" not in str(raised.value)
    assert "1 attempt(s) (none scored)" in str(raised.value)


def test_an_unreadable_judge_replys_tokens_are_counted(cli: Any, openai_server: Any) -> None:
    server = openai_server(lambda body: "no idea" if is_judge(body) else "a draft")
    run = cli(
        "run", "Write.", "--model", "m", "--base-url", server.base_url, "--json",
        "--max-iterations", "0", "--on-evaluator-error", "skip",
    )  # fmt: skip
    usage = json.loads(run.out)["usage"]
    # What the server reported: the words of each request's messages, two per reply.
    sent = sum(
        len(str(m.get("content", "")).split()) for b in server.requests for m in b["messages"]
    )
    assert usage["calls"] == len(server.requests) == 3  # a draft, the judge asked twice
    assert usage["total_tokens"] == sent + 2 * len(server.requests)

"""A checkpointed thread keeps what its run was started with (the command line and `refine`).

Each command-line test runs the command's entry point in-process (the `cli` fixture) against
a scripted OpenAI-compatible server on loopback, on a SQLite checkpoint file: a failed call
(HTTP 400) interrupts the run, no process needs to die.
"""

# ruff: noqa: F811 - pytest fixtures are imported from the helper module

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from langgraph_refine import ThreadSettingsError, refine
from langgraph_refine.evaluators import word_count
from tests.test_cli_helpers import (  # noqa: F401 - fixtures
    CliRun,
    Reply,
    ScriptedOpenAI,
    cli,
    openai_server,
)


def failing_once_at(call: int) -> Any:
    """A generator script answering 4 words, failing (HTTP 400) once, on its `call`-th call."""
    state = {"n": 0, "failed": False}

    def script(body: dict[str, Any]) -> Reply | str:
        state["n"] += 1
        if state["n"] == call and not state["failed"]:
            state["failed"] = True
            return Reply(status=400, error="server fell over")
        return "one two three four"

    return script


def run_args(
    server: ScriptedOpenAI, db: Path, *extra: str, task: str = "Write notes."
) -> list[str]:
    return [
        "run",
        task,
        "--model",
        "scripted",
        "--base-url",
        server.base_url,
        "--checkpoint",
        str(db),
        "--json",
        "--patience",
        "5",
        "--max-iterations",
        "3",
        *extra,
    ]


def one_error_line(run: CliRun) -> str:
    lines = [line for line in run.err.splitlines() if line.strip()]
    assert len(lines) == 1, run.err
    assert lines[0].startswith("langgraph-refine: ") and "Traceback" not in run.err
    return lines[0]


def test_a_rerun_with_another_check_is_refused_and_the_same_one_resumes(
    cli: Any, openai_server: Any, tmp_path: Path
) -> None:
    server = openai_server(failing_once_at(2))
    db = tmp_path / "runs.sqlite"
    first = cli(*run_args(server, db, "--thread", "t", "-e", "words:30-50"))
    assert first.code == 1 and "server fell over" in first.err
    assert len(server.requests) == 2  # attempt 0, then the failed call

    other = cli(*run_args(server, db, "--thread", "t", "-e", "words:3-5"))
    assert other.code == 2
    line = one_error_line(other)
    assert "evaluator: started with words:30-50, now words:3-5" in line
    assert "--restart" in line and "new --thread" in line
    assert len(server.requests) == 2  # refused before any model call

    other_task = cli(*run_args(server, db, "--thread", "t", "-e", "words:30-50", task="Other."))
    assert other_task.code == 2
    assert "task: started with 'Write notes.', now 'Other.'" in one_error_line(other_task)

    other_stop = cli(
        *run_args(server, db, "--thread", "t", "-e", "words:30-50", "--target-score", "0.5")
    )
    assert other_stop.code == 2
    assert "target_score: started with 0.9, now 0.5" in one_error_line(other_stop)

    same = cli(*run_args(server, db, "--thread", "t", "-e", "words:30-50"))
    assert same.code == 0, same.err
    data = json.loads(same.out)
    # Every round scored by the one check: 4 words against 30-50 words.
    assert len(data["attempts"]) == 4
    assert len(set(data["score_history"])) == 1 and data["score_history"][0] < 0.5


def test_restart_discards_the_interrupted_run_and_starts_over(
    cli: Any, openai_server: Any, tmp_path: Path
) -> None:
    server = openai_server(failing_once_at(2))
    db = tmp_path / "runs.sqlite"
    first = cli(*run_args(server, db, "--thread", "t", "-e", "words:30-50"))
    assert first.code == 1
    restarted = cli(*run_args(server, db, "--thread", "t", "-e", "words:3-5", "--restart"))
    assert restarted.code == 0, restarted.err
    data = json.loads(restarted.out)
    assert data["score_history"] == [1.0]  # the new check, from attempt 0
    assert data["stop_reason"] in ("passed", "target_reached")


class DiesOnce:
    """A generator answering 4 words whose second call dies (as a killed process would)."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, state: Any) -> str:
        self.calls += 1
        if self.calls == 2:
            raise RuntimeError("the process died here")
        return "one two three four"


def test_refine_refuses_to_mix_a_threads_settings() -> None:
    saver = InMemorySaver()
    write = DiesOnce()

    def run(evaluator: Any, task: str = "Write.", **kwargs: Any) -> Any:
        return refine(
            write, task, evaluator, checkpointer=saver, thread_id="t", patience=5, **kwargs
        )

    with pytest.raises(RuntimeError):
        run(word_count(30, 50), max_iterations=3)
    with pytest.raises(ThreadSettingsError) as refused:
        run(word_count(3, 5), max_iterations=3)
    assert refused.value.differences == (
        (
            "evaluator",
            "word_count(max_words=50, min_words=30)",
            "word_count(max_words=5, min_words=3)",
        ),
    )
    assert "restart=True" in str(refused.value)
    with pytest.raises(ThreadSettingsError, match="max_iterations: started with 3, now 2"):
        run(word_count(30, 50), max_iterations=2)
    with pytest.raises(ThreadSettingsError, match=r"task: started with 'Write\.', now 'Other\.'"):
        run(word_count(30, 50), "Other.", max_iterations=3)
    assert write.calls == 2  # the refusals made no call

    resumed = run(word_count(30, 50), max_iterations=3)
    assert [a.index for a in resumed.attempts] == [0, 1, 2, 3]
    assert write.calls == 5  # attempt 0 was not made again

    # A finished thread starts a new run, whatever it was started with.
    again = run(word_count(3, 5), max_iterations=1)
    assert again.score_history == [1.0]


def test_restart_in_the_library() -> None:
    saver = InMemorySaver()
    write = DiesOnce()
    with pytest.raises(RuntimeError):
        refine(write, "Write.", word_count(30, 50), checkpointer=saver, thread_id="t")
    result = refine(
        write, "Other.", word_count(3, 5), checkpointer=saver, thread_id="t", restart=True
    )
    assert result.score_history == [1.0] and [a.index for a in result.attempts] == [0]

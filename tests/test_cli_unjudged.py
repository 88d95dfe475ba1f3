"""A run nothing could judge is a failure: `run` exits 1, a batch row is a failed row.

The judge is a real model server on loopback whose replies cannot be read as a judgment
(prose where the judge's JSON is asked for). The installed `langgraph-refine` command runs
in its own process.
"""

# ruff: noqa: F811 - pytest fixtures are imported from the helper module

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.cli_process import run_command
from tests.test_cli_batch import batch_args, read_jsonl, tasks, write_jsonl
from tests.test_cli_helpers import (  # noqa: F401 - fixture
    Script,
    is_judge,
    judge_json,
    last_user_text,
    openai_server,
    per_task,
)

UNREADABLE = "I would rather not rate this one."
"""A judge's reply with no judgment in it."""


def unreadable_judge_for(task: str) -> Script:
    """`per_task`'s replies, except that the judge cannot judge the answers to `task`."""
    inner = per_task()

    def script(body: dict[str, Any]) -> str:
        if is_judge(body) and task in last_user_text(body):
            return UNREADABLE
        return inner(body)

    return script


def judged_once() -> Script:
    """A generator of drafts; a judge that scores the first answer 0.3, then cannot judge."""
    judged = threading.Event()
    counter = {"n": 0}

    def script(body: dict[str, Any]) -> str:
        if not is_judge(body):
            counter["n"] += 1
            return f"draft {counter['n']}"
        if judged.is_set():
            return UNREADABLE
        judged.set()
        return judge_json(0.3)

    return script


@pytest.mark.slow
def test_a_row_nothing_could_judge_is_a_failed_row_that_a_rerun_runs_again(
    openai_server: Any, tmp_path: Path
) -> None:
    server = openai_server(unreadable_judge_for("task number 1"))
    src, out = write_jsonl(tmp_path / "in.jsonl", tasks(2)), tmp_path / "out.jsonl"
    args = batch_args(server, src, out, "--max-iterations", "2")
    first = run_command(*args)
    assert first.code == 1, first.err
    rows = {row["id"]: row for row in read_jsonl(out)}
    assert "error" not in rows["t0"] and rows["t0"]["score"] is not None
    failed = rows["t1"]
    assert "judge" in failed["error"] and failed["attempts"]  # why, and the paid work
    assert all(a["error"] and a["evaluation"] is None for a in failed["attempts"])
    assert "done 1/2, failed 1" in first.out and "id 't1'" in first.err

    paid = len(server.requests)
    again = run_command(*args)
    assert again.code == 1
    assert [row["id"] for row in read_jsonl(out)].count("t1") == 2  # run again, t0 skipped
    assert [row["id"] for row in read_jsonl(out)].count("t0") == 1
    assert len(server.requests) > paid
    assert "skipped 1 already in" in again.out


def test_run_exits_1_when_the_loop_stops_unjudged(openai_server: Any) -> None:
    server = openai_server(judged_once())
    done = run_command(
        "run",
        "Write notes.",
        "--model",
        "m",
        "--base-url",
        server.base_url,
        "--max-iterations",
        "6",
        "--patience",
        "9",
        "--json",
    )
    result = json.loads(done.out)
    assert result["stop_reason"] == "unjudged"
    assert done.code == 1
    assert result["score"] == pytest.approx(0.3)  # the best judged attempt
    (line,) = done.lines()
    assert line.startswith(
        "langgraph-refine: unjudged: the evaluator could not judge two attempts in a row"
    )


def test_a_row_the_loop_stopped_unjudged_is_a_failed_row(
    openai_server: Any, tmp_path: Path
) -> None:
    server = openai_server(judged_once())
    src, out = write_jsonl(tmp_path / "in.jsonl", tasks(1)), tmp_path / "out.jsonl"
    done = run_command(*batch_args(server, src, out, "--max-iterations", "6", "--patience", "9"))
    (row,) = read_jsonl(out)
    assert row["stop_reason"] == "unjudged"
    assert row["error"].startswith("unjudged: the evaluator could not judge two attempts")
    assert done.code == 1 and "failed 1" in done.out


def unjudged_result() -> Any:
    """A result as the loop ends it after two attempts in a row left unjudged."""
    from langgraph_refine import Attempt, Evaluation, RefineResult, Usage

    judged = Attempt(index=0, response="draft 1", evaluation=Evaluation(score=0.3, feedback="x"))
    left = [
        Attempt(index=i, response=f"draft {i + 1}", error="the judge's reply is unreadable")
        for i in (1, 2)
    ]
    return RefineResult(
        value="draft 1",
        score=0.3,
        verdict=None,
        feedback="x",
        stop_reason="unjudged",
        iterations=2,
        converged=False,
        score_history=[0.3],
        attempts=[judged, *left],
        usage=Usage(calls=6),
        best_index=0,
    )


async def test_a_result_stopped_unjudged_is_a_failed_row(tmp_path: Path) -> None:
    """The batch's own rule, on a result the loop stopped so (a fast test of `run_rows`)."""
    from rich.console import Console

    from langgraph_refine.cli._batch import LineProgress, LineWriter, read_input, run_rows
    from langgraph_refine.cli._options import CommandOptions

    src = write_jsonl(tmp_path / "in.jsonl", tasks(2))
    items = read_input(src, CommandOptions()).items
    writer = LineWriter(tmp_path / "out.jsonl")

    async def run_one(item: Any) -> Any:
        return (
            unjudged_result()
            if item.id == "t1"
            else unjudged_result().model_copy(update={"stop_reason": "max_iterations"})
        )

    stats = await run_rows(items, run_one, writer, concurrency=2, progress=LineProgress(Console()))
    writer.close()
    rows = {row["id"]: row for row in read_jsonl(tmp_path / "out.jsonl")}
    assert (stats.done, stats.failed) == (1, 1)
    assert "error" not in rows["t0"]
    assert rows["t1"]["error"].startswith(
        "unjudged: the evaluator could not judge two attempts in a row (the last: the judge's "
        "reply is unreadable)"
    )
    assert rows["t1"]["stop_reason"] == "unjudged" and len(rows["t1"]["attempts"]) == 3


def test_run_and_batch_fail_a_result_by_one_rule() -> None:
    """`run` exits 1 with the same words a batch row's `error` holds."""
    from langgraph_refine.cli._single import failed_result

    stopped = unjudged_result()
    assert failed_result(stopped) == (
        "unjudged: the evaluator could not judge two attempts in a row (the last: the judge's "
        "reply is unreadable), so the loop stopped; the response shown is the best judged "
        "one. Check the judge (--judge-model, --base-url) or the checks (-e)"
    )
    assert failed_result(stopped.model_copy(update={"stop_reason": "max_iterations"})) is None

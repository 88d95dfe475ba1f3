"""The `batch` verb: JSONL in, JSONL out, resumable, bounded real concurrency."""

# ruff: noqa: F811 - pytest fixtures are imported from the helper module

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.test_cli_helpers import (  # noqa: F401 - fixtures
    Reply,
    assert_one_line_error,
    cli,
    is_judge,
    openai_server,
    per_task,
    task_of,
)

OUTPUT_KEYS = {
    "id",
    "task",
    "value",
    "score",
    "verdict",
    "stop_reason",
    "iterations",
    "score_history",
}


def write_jsonl(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def tasks(n: int) -> list[dict[str, Any]]:
    return [{"id": f"t{i}", "task": f"task number {i}"} for i in range(n)]


def batch_args(server: Any, src: Path, out: Path, *extra: str) -> list[str]:
    return [
        "batch",
        str(src),
        "--out",
        str(out),
        "--model",
        "m",
        "--base-url",
        server.base_url,
        *extra,
    ]


def test_batch_writes_one_line_per_task(cli: Any, openai_server: Any, tmp_path: Path) -> None:
    server = openai_server(per_task())
    src, out = write_jsonl(tmp_path / "in.jsonl", tasks(3)), tmp_path / "out.jsonl"
    run = cli(*batch_args(server, src, out))
    assert run.code == 0, run.err
    rows = read_jsonl(out)
    assert sorted(r["id"] for r in rows) == ["t0", "t1", "t2"]
    for row in rows:
        assert set(row) >= OUTPUT_KEYS and "attempts" in row
        assert row["task"] == f"task number {row['id'][1:]}"
        assert row["score_history"] == [0.5, 0.75, 1.0]
        assert (row["stop_reason"], row["verdict"], row["iterations"]) == ("passed", "PASS", 2)
        assert row["value"] == f"answer to {row['task']} v2"
        assert row["attempts"][0]["response"] == f"answer to {row['task']} v0"
    # A summary with counts and scores; the progress bar draws on stderr.
    assert "done 3/3" in run.out and "0.50 → 1.00" in run.out
    assert "done 3/3" in run.err


def test_rerun_skips_done_ids_and_only_appends(
    cli: Any, openai_server: Any, tmp_path: Path
) -> None:
    server = openai_server(per_task())
    src, out = write_jsonl(tmp_path / "in.jsonl", tasks(2)), tmp_path / "out.jsonl"
    assert cli(*batch_args(server, src, out)).code == 0
    before, requests = out.read_bytes(), len(server.requests)

    again = cli(*batch_args(server, src, out))
    assert again.code == 0
    assert out.read_bytes() == before and len(server.requests) == requests
    assert "skipped 2" in again.out

    write_jsonl(src, [*tasks(3)])
    third = cli(*batch_args(server, src, out))
    assert third.code == 0
    assert out.read_bytes().startswith(before)  # never rewritten
    assert [r["id"] for r in read_jsonl(out)][2:] == ["t2"]
    assert {task_of(r) for r in server.requests[requests:]} == {"task number 2"}


def test_a_line_cut_short_by_a_crash_does_not_corrupt_the_next(
    cli: Any, openai_server: Any, tmp_path: Path
) -> None:
    server = openai_server(per_task())
    src, out = write_jsonl(tmp_path / "in.jsonl", tasks(2)), tmp_path / "out.jsonl"
    partial = '{"id": "t0", "task": "task number 0", "val'
    out.write_text(partial)
    run = cli(*batch_args(server, src, out))
    assert "out.jsonl:1: not a complete JSON line" in run.err
    text = out.read_text()
    assert text.startswith(partial + "\n")
    assert sorted(r["id"] for r in map(json.loads, text.splitlines()[1:])) == ["t0", "t1"]


@pytest.mark.slow
def test_an_interrupted_batch_keeps_every_finished_line(openai_server: Any, tmp_path: Path) -> None:
    server = openai_server(per_task(), delay=0.15)
    src, out = write_jsonl(tmp_path / "in.jsonl", tasks(6)), tmp_path / "out.jsonl"
    env = {k: v for k, v in os.environ.items() if k not in ("REFINE_MODEL", "OPENAI_BASE_URL")}
    command = [
        sys.executable,
        "-m",
        "langgraph_refine.cli",
        *batch_args(server, src, out, "-c", "1"),
    ]
    proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (not out.exists() or out.read_text().count("\n") < 2):
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    finished = read_jsonl(out)  # every line is whole JSON
    assert 2 <= len(finished) < 6
    before = out.read_bytes()

    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    rerun = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert rerun.returncode == 0, rerun.stderr
    assert out.read_bytes().startswith(before)
    ids = [r["id"] for r in read_jsonl(out)]
    assert sorted(ids) == [f"t{i}" for i in range(6)]  # each exactly once


@pytest.mark.parametrize("concurrency", [1, 3])
def test_concurrency_is_real_and_bounded(
    cli: Any, openai_server: Any, tmp_path: Path, concurrency: int
) -> None:
    server = openai_server(per_task(), delay=0.15)
    src, out = write_jsonl(tmp_path / "in.jsonl", tasks(6)), tmp_path / "out.jsonl"
    run = cli(
        *batch_args(server, src, out, "--concurrency", str(concurrency), "--max-iterations", "0")
    )
    assert run.code == 0, run.err
    assert len(read_jsonl(out)) == 6
    assert server.max_in_flight == concurrency


def test_bad_lines_are_reported_by_number_and_the_rest_runs(
    cli: Any, openai_server: Any, tmp_path: Path
) -> None:
    server = openai_server(per_task())
    rows = [
        {"id": "a", "task": "first"},
        '{"id": "b", "task": ',
        "",
        {"id": "c"},
        {"id": "a", "task": "again"},
        ["not", "an", "object"],
        {"id": "d", "task": "fine", "evaluator": "nope:1"},
        {"id": "e", "task": "last"},
    ]
    src, out = write_jsonl(tmp_path / "in.jsonl", rows), tmp_path / "out.jsonl"
    run = cli(*batch_args(server, src, out))
    assert run.code == 1
    errors = [line for line in run.err.splitlines() if line.startswith("langgraph-refine: ")]
    assert any("in.jsonl:2: malformed JSON line" in e for e in errors)
    assert any("in.jsonl:4: missing 'task'; skipped" in e for e in errors)  # no "got None"
    assert any("in.jsonl:5: duplicate id 'a' (first on line 1)" in e for e in errors)
    assert any("in.jsonl:6: expected a JSON object" in e for e in errors)
    assert any("in.jsonl:7: unknown evaluator spec 'nope:1'" in e for e in errors)
    assert len(errors) == 5
    assert "Traceback" not in run.err
    assert sorted(r["id"] for r in read_jsonl(out)) == ["a", "e"]


def test_per_line_evaluator_and_options(cli: Any, openai_server: Any, tmp_path: Path) -> None:
    server = openai_server(per_task())
    rows = [
        {"id": 1, "task": "judged", "max_iterations": 0},
        {
            "id": 2,
            "task": "counted",
            "evaluator": ["words:1-3", "contains:answer"],
            "extra": "kept out",
        },
        {"id": 3, "task": "strict", "target_score": 0.7, "patience": None, "memory": "all"},
    ]
    src, out = write_jsonl(tmp_path / "in.jsonl", rows), tmp_path / "out.jsonl"
    run = cli(*batch_args(server, src, out))
    assert run.code == 0, run.err
    by_id = {r["id"]: r for r in read_jsonl(out)}
    assert (by_id[1]["stop_reason"], by_id[1]["iterations"]) == ("max_iterations", 0)
    assert (by_id[3]["stop_reason"], by_id[3]["score_history"]) == ("target_reached", [0.5, 0.75])
    # "answer to counted v0" has 4 words: over the range, so the words check scores 2/3.
    assert by_id[2]["score_history"][0] == pytest.approx((2 / 3 + 1) / 2)
    judged_tasks = {task_of(r) for r in server.requests if is_judge(r)}
    assert "counted" not in judged_tasks and {"judged", "strict"} <= judged_tasks


def test_a_failing_task_is_reported_and_retried_on_rerun(
    cli: Any, openai_server: Any, tmp_path: Path
) -> None:
    broken = {"on": True}
    ok = per_task()

    def script(body: dict[str, Any]) -> Reply | str:
        if broken["on"] and task_of(body) == "task number 1":
            return Reply(status=400, error="this task upsets the server")
        return ok(body)

    server = openai_server(script)
    src, out = write_jsonl(tmp_path / "in.jsonl", tasks(3)), tmp_path / "out.jsonl"
    run = cli(*batch_args(server, src, out))
    assert run.code == 1
    assert "id 't1' (line 2) failed" in run.err and "HTTP 400" in run.err
    rows = {r["id"]: r for r in read_jsonl(out)}
    assert sorted(rows) == ["t0", "t1", "t2"]
    assert "this task upsets the server" in rows["t1"]["error"]
    assert rows["t1"]["attempts"] == [] and rows["t1"]["task"] == "task number 1"
    assert "error" not in rows["t0"] and "error" not in rows["t2"]
    assert "rerun to retry" in run.out

    broken["on"] = False
    before = len(server.requests)
    rerun = cli(*batch_args(server, src, out))
    assert rerun.code == 0 and "skipped 2" in rerun.out
    # Only t1 ran again; its new row follows the error row.
    assert {task_of(b) for b in server.requests[before:]} == {"task number 1"}
    rows = read_jsonl(out)
    assert len(rows) == 4 and rows[-1]["id"] == "t1" and "error" not in rows[-1]
    assert [r["id"] for r in rows if "error" in r] == ["t1"]
    assert cli(*batch_args(server, src, out)).code == 0  # now nothing is left to run
    assert len(read_jsonl(out)) == 4


def test_budget_error_row_keeps_the_attempts(cli: Any, openai_server: Any, tmp_path: Path) -> None:
    server = openai_server(per_task())
    rows = [
        {"id": "tight", "task": "A", "budget": {"max_calls": 3}, "on_budget_exhausted": "raise"},
        {"id": "free", "task": "B", "max_iterations": 0},
    ]
    src, out = write_jsonl(tmp_path / "in.jsonl", rows), tmp_path / "out.jsonl"
    run = cli(*batch_args(server, src, out))
    assert run.code == 1
    by_id = {r["id"]: r for r in read_jsonl(out)}
    tight = by_id["tight"]
    assert "budget" in tight["error"].lower()
    # Generate + judge; a second answer would leave no call for its judgment.
    assert [a["index"] for a in tight["attempts"]] == [0]
    assert tight["score_history"] == [0.5] and tight["stop_reason"] == "budget_exhausted"
    assert "error" not in by_id["free"]


@pytest.mark.slow
def test_unreachable_endpoint_stops_the_batch_with_one_line(cli: Any, tmp_path: Path) -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    src, out = write_jsonl(tmp_path / "in.jsonl", tasks(4)), tmp_path / "out.jsonl"
    run = cli(
        "batch",
        str(src),
        "--out",
        str(out),
        "--model",
        "m",
        "--base-url",
        f"http://127.0.0.1:{port}/v1",
    )
    errors = [line for line in run.err.splitlines() if line.startswith("langgraph-refine: ")]
    assert run.code == 1
    assert len(errors) == 1 and "cannot reach the model server" in errors[0]
    assert "Traceback" not in run.err
    assert not out.exists() or out.read_text() == ""


def test_no_model_fails_before_any_output_unless_nothing_is_left(
    cli: Any, openai_server: Any, tmp_path: Path
) -> None:
    src, out = write_jsonl(tmp_path / "in.jsonl", tasks(2)), tmp_path / "out.jsonl"
    assert_one_line_error(cli("batch", str(src), "--out", str(out)), "no model given")
    assert not out.exists()

    server = openai_server(per_task())
    assert cli(*batch_args(server, src, out)).code == 0
    finished = cli("batch", str(src), "--out", str(out))  # nothing left: no model needed
    assert finished.code == 0 and "skipped 2" in finished.out

"""`--checkpoint postgresql://...`: `run` and `batch` on a PostgreSQL database.

The same promises as on a SQLite file, through the installed `langgraph-refine` command
in its own process, a scripted model server on loopback that counts every request, and
the test database: an interrupted run resumes with the command it printed (pasted into
`/bin/sh`), a busy thread is refused, a batch killed with SIGKILL reruns every row once
paying again only the calls in flight, and one batch at a time uses the database.
"""

# ruff: noqa: F811 - pytest fixtures are imported from the helper module

from __future__ import annotations

import json
import signal
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.cli_process import (
    held_after,
    run_command,
    run_in_shell,
    start_command,
    stop,
    wait_until,
)
from tests.test_cli_batch import batch_args, read_jsonl, write_jsonl
from tests.test_cli_helpers import openai_server, per_task  # noqa: F401 - fixture
from tests.test_cli_stop import CALLS, held_at
from tests.test_durable import require_postgres

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


def run_args(server: Any, uri: str, *extra: str) -> list[str]:
    return [
        "run",
        "Write notes.",
        "--model",
        "scripted",
        "--base-url",
        server.base_url,
        "--checkpoint",
        uri,
        "--max-iterations",
        "3",
        "--patience",
        "5",
        "--json",
        *extra,
    ]


def test_an_interrupted_run_resumes_from_postgres_and_a_busy_thread_is_refused(
    openai_server: Any,
) -> None:
    uri = require_postgres()
    release = threading.Event()
    server = openai_server(held_at(3, release))
    thread = f"notes-{uuid.uuid4().hex[:8]}"
    args = run_args(server, uri, "--thread", thread)
    proc = start_command(*args)
    try:
        wait_until(lambda: len(server.requests) >= 3)  # the second draft is held
        busy = run_command(*args)
        stopped = stop(proc, signal.SIGINT)
    finally:
        release.set()
    assert busy.code == 1
    assert busy.lines() == [
        f"langgraph-refine: thread {thread!r} is in use: another run is writing it (a "
        "PostgreSQL session); wait for that run to end, or use another thread"
    ]
    assert stopped.code == 130, stopped.err
    assert json.loads(stopped.out)["stop_reason"] == "interrupted"
    said = stopped.err[stopped.err.index("langgraph-refine: interrupted: ") :]
    assert said.startswith(
        f"langgraph-refine: interrupted: 1 attempt(s) are saved on thread {thread} in {uri}"
    )
    command = said.split("resume with: ", 1)[1].removesuffix("\n")
    assert f"--checkpoint {uri}" in command

    resumed = run_in_shell(command)
    assert resumed.code == 0, resumed.err
    assert len(json.loads(resumed.out)["attempts"]) == 4
    assert len(server.requests) <= CALLS + 1  # at most the call in flight paid twice


def test_a_killed_batch_on_postgres_reruns_each_row_once_and_holds_the_database(
    openai_server: Any, tmp_path: Path
) -> None:
    uri = require_postgres()
    prefix = uuid.uuid4().hex[:8]  # the database outlives the test: threads of its own
    rows = [{"id": f"{prefix}-{i}", "task": f"task number {i}"} for i in range(4)]
    src = write_jsonl(tmp_path / "in.jsonl", rows)
    reference = openai_server(per_task())
    whole = run_command(*batch_args(reference, src, tmp_path / "whole.jsonl", "--no-store"))
    assert whole.code == 0, whole.err
    paid = len(reference.requests)

    release = threading.Event()
    server = openai_server(held_after(per_task(), 14, release))  # one task done, two mid-way
    out = tmp_path / "out.jsonl"
    args = batch_args(server, src, out, "-c", "2", "--checkpoint", uri, "--no-store")
    proc = start_command(*args)
    try:
        wait_until(lambda: len(server.requests) >= 16)  # both tasks running wait for a reply
        other = run_command(*batch_args(server, src, tmp_path / "other.jsonl", "--checkpoint", uri))
        killed = stop(proc, signal.SIGKILL)
    finally:
        release.set()
        if proc.poll() is None:
            proc.kill()
    assert other.code == 1
    assert other.lines() == [
        f"langgraph-refine: --checkpoint {uri} is in use by another batch (another run is "
        "writing it (a PostgreSQL session)); wait for it to end, or give this batch another "
        "--out or --checkpoint"
    ]
    assert killed.code == -signal.SIGKILL
    finished = len(read_jsonl(out))
    assert 1 <= finished < len(rows), "the kill came too late"

    rerun = run_command(*args)
    assert rerun.code == 0, rerun.err
    again = read_jsonl(out)
    assert sorted(row["id"] for row in again) == sorted(row["id"] for row in rows)  # once each
    assert len(server.requests) <= paid + 2  # at most the two calls in flight paid twice
    whole_rows = {row["id"]: row for row in read_jsonl(tmp_path / "whole.jsonl")}
    for row in again:  # the resumed tasks end as an uninterrupted batch's
        assert row["score_history"] == whole_rows[row["id"]]["score_history"]

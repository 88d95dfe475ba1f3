"""Honest counts and exits of the command line, each driven as a user would: in a subprocess.

Invalid batch lines are counted in the summary; an interrupted batch (Ctrl-C, SIGTERM)
says what is saved and restores the terminal's cursor; an unreachable server is not a
failed task and names its cause; cached replies are not calls, tokens or cost.
"""

# ruff: noqa: F811 - pytest fixtures are imported from the helper module

from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.test_cli_helpers import MODEL_ENV, openai_server, per_task  # noqa: F401 - fixtures


def env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in MODEL_ENV}


def command(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run `langgraph-refine ARGS` in a subprocess (stderr is not a terminal)."""
    return subprocess.run(
        [sys.executable, "-m", "langgraph_refine.cli", *args],
        env=env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def tasks(path: Path, n: int, *extra: str) -> Path:
    path.write_text(
        "".join(json.dumps({"id": i, "task": f"task {i}"}) + "\n" for i in range(n))
        + "".join(line + "\n" for line in extra)
    )
    return path


def test_invalid_lines_are_counted_in_the_summary(openai_server: Any, tmp_path: Path) -> None:
    server = openai_server(per_task())
    src = tasks(
        tmp_path / "in.jsonl",
        3,
        "{not json",
        '{"id": 9}',
        json.dumps({"id": 1, "task": "a duplicate id"}),
    )
    out = tmp_path / "out.jsonl"
    run = command(
        "batch", str(src), "--out", str(out), "--model", "m", "--base-url", server.base_url
    )
    assert run.returncode == 1  # the invalid lines, and nothing else, make it 1
    summary = run.stdout.strip().splitlines()[0]
    assert summary.startswith("done 3/3, failed 0, invalid 3 line(s) not run"), summary
    assert len(out.read_text().splitlines()) == 3


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_an_interrupted_batch_says_what_is_saved_and_restores_the_cursor(
    openai_server: Any, tmp_path: Path, sig: int, code: int
) -> None:
    server = openai_server(per_task(), delay=0.4)
    src = tasks(tmp_path / "in.jsonl", 8)
    out = tmp_path / "out.jsonl"
    args = [
        *("batch", str(src), "--out", str(out), "--model", "m", "--base-url", server.base_url),
        *("-e", "words:1-50", "-c", "1"),
    ]
    main, child = pty.openpty()  # stderr is a terminal: the bar hides the cursor
    proc = subprocess.Popen(
        [sys.executable, "-m", "langgraph_refine.cli", *args],
        env={**env(), "TERM": "xterm", "COLUMNS": "100"},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=child,
    )
    os.close(child)
    screen = b""
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline and not (out.exists() and out.read_text().count("\n")):
            screen += _read(main, 0.05)
        assert out.exists(), "no task finished in time"
        proc.send_signal(sig)
        assert proc.wait(timeout=30) == code
        screen += _read(main, 0.5)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(main)
    text = screen.decode(errors="replace")
    saved = out.read_text().count("\n")
    assert 1 <= saved < 8
    assert f"interrupted: {saved} of 8 task(s) finished and saved in {out}" in text, text
    assert "rerun the same command to continue" in text
    assert "\x1b[?25l" in text  # the bar hid the cursor ...
    assert text.rindex("\x1b[?25h") > text.rindex("\x1b[?25l")  # ... and showed it again

    rerun = command(*args)
    assert rerun.returncode == 0, rerun.stderr
    ids = [json.loads(line)["id"] for line in out.read_text().splitlines()]
    assert sorted(ids) == list(range(8))  # every task once: the saved ones were skipped


def _read(fd: int, wait: float) -> bytes:
    data = b""
    while select.select([fd], [], [], wait)[0]:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # the other end closed
            break
        if not chunk:
            break
        data += chunk
        wait = 0.05
    return data


def test_an_unreachable_server_is_no_failed_task_and_names_its_cause(tmp_path: Path) -> None:
    src = tasks(tmp_path / "in.jsonl", 3)
    run = command(
        *("batch", str(src), "--out", str(tmp_path / "out.jsonl"), "--model", "m"),
        *("--base-url", "http://127.0.0.1:9/v1", "-e", "words:1-5", "-c", "2"),
    )
    assert run.returncode == 1
    assert "done 0/3, failed 0" in run.stderr  # the bar agrees with the error line
    assert "failed 1" not in run.stderr and "failed 2" not in run.stderr
    last = run.stderr.strip().splitlines()[-1]
    assert "cannot reach the model server at http://127.0.0.1:9/v1" in last
    assert "[Errno 111]" in last and "()" not in last  # the cause, from the socket
    assert "0 task(s) saved before that" in last and "rerun the same command" in last


def test_cached_replies_are_not_calls_tokens_or_cost(openai_server: Any, tmp_path: Path) -> None:
    server = openai_server(per_task())
    cache = str(tmp_path / "cache.sqlite")
    args = ["run", "Write.", "--model", "m", "--base-url", server.base_url, "--cache", cache]
    first = command(*args, "--json")
    assert first.returncode == 0, first.stderr
    paid = json.loads(first.stdout)["usage"]
    assert paid["calls"] == 6 and paid["total_tokens"] > 0 and paid["cache_hits"] == 0

    # A budget of 2 calls would stop a paid rerun after round 0; cached replies are no calls.
    second = command(*args, "--json", "--budget-calls", "2")
    assert second.returncode == 0, second.stderr
    data = json.loads(second.stdout)
    assert len(server.requests) == 6  # nothing reached the server
    assert data["usage"]["calls"] == 0
    assert data["usage"]["total_tokens"] == data["usage"]["input_tokens"] == 0
    assert data["usage"]["cost"] in (0, 0.0, None)
    assert data["usage"]["cache_hits"] == 6
    assert data["stop_reason"] == json.loads(first.stdout)["stop_reason"] != "budget_exhausted"
    assert all(a["usage"]["calls"] == 0 for a in data["attempts"])

    shown = command(*args)
    assert "spent: 0 model calls, 0 tokens" in shown.stdout
    assert "6 cache hits" in shown.stdout

"""Nothing paid twice: a stopped `run` says what is saved and resumes from its last call.

A real process of the console script talks to a scripted OpenAI-compatible server on
loopback that counts every request; the request in flight when the signal comes is held
by the server, so a process that waited for its reply could not stop in time. The same
command, rerun in-process (the `cli` fixture), may repeat only that one request.
"""

# ruff: noqa: F811 - pytest fixtures are imported from the helper module

from __future__ import annotations

import json
import os
import select
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.sqlite import SqliteSaver

from langgraph_refine import create_refine_graph, refine
from langgraph_refine._loop._driver import strict_serde
from tests.test_cli_helpers import (  # noqa: F401 - fixtures
    MODEL_ENV,
    ScriptedOpenAI,
    cli,
    drafts_and_judge,
    openai_server,
)

CALLS = 8
"""Requests of an uninterrupted run: 4 drafts (`--max-iterations 3`), each judged."""


def held_at(call: int, release: threading.Event) -> Any:
    """`drafts_and_judge`, holding its `call`-th request until `release` (at most 30 s)."""
    inner = drafts_and_judge()
    seen = {"n": 0}
    lock = threading.Lock()

    def script(body: dict[str, Any]) -> str:
        with lock:
            seen["n"] += 1
            n = seen["n"]
        if n == call:
            release.wait(30)
        return inner(body)

    return script


def run_args(server: ScriptedOpenAI, db: Path, *extra: str) -> list[str]:
    return [
        "run",
        "Write notes.",
        "--model",
        "scripted",
        "--base-url",
        server.base_url,
        "--checkpoint",
        str(db),
        "--max-iterations",
        "3",
        "--patience",
        "5",
        "--criterion",
        "Mention rain",
        *extra,
    ]


def _default_sigint() -> None:
    # A suite started in the background ignores SIGINT, and so would its children.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.slow
@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_stopped_run_says_what_is_saved_and_its_rerun_repeats_at_most_the_call_in_flight(
    cli: Any, openai_server: Any, tmp_path: Path, sig: int, code: int
) -> None:
    release = threading.Event()
    server = openai_server(held_at(3, release))  # the second draft is in flight
    db = tmp_path / "runs.sqlite"
    args = run_args(server, db)
    env = {k: v for k, v in os.environ.items() if k not in MODEL_ENV}
    proc = subprocess.Popen(
        [sys.executable, "-m", "langgraph_refine.cli", *args],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=_default_sigint,
    )
    try:
        deadline = time.monotonic() + 60
        while len(server.requests) < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(server.requests) == 3, "the run did not reach its third call"
        sent = time.monotonic()
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=20)
        stopped_in = time.monotonic() - sent
    finally:
        release.set()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == code, err
    assert stopped_in < 2.0, f"took {stopped_in:.1f} s: the call in flight was awaited"
    text = err.decode()
    thread = text.split("thread ")[1].split()[0]
    assert "Traceback" not in text
    assert f"interrupted: 1 attempt(s) are saved on thread {thread} in {db}" in text, text
    assert "resume with: langgraph-refine run 'Write notes.' --model scripted" in text
    assert text.rstrip().endswith(f"--thread {thread}"), text
    assert "round  0" in out.decode()  # the finished round was shown before the stop

    # Another criterion is refused, as after kill -9, before any model call.
    other = cli(*[a if a != "Mention rain" else "Mention snow" for a in args], "--thread", thread)
    assert other.code == 2, other.err
    assert "criteria" in other.err and "--restart" in other.err
    assert len(server.requests) == 3

    same = cli(*args, "--thread", thread, "--json")
    assert same.code == 0, same.err
    result = json.loads(same.out)
    assert len(result["attempts"]) == 4
    assert len(server.requests) <= CALLS + 1  # at most the call in flight paid twice


def test_a_run_stopped_after_a_steps_writes_resumes_without_repeating_them(
    tmp_path: Path,
) -> None:
    """Stopped after a node's writes are saved but before the next checkpoint (what Ctrl-C
    did to the old sync `run`): the thread is unfinished, and its rerun repeats no call."""
    calls: list[str] = []

    def generator(state: Any) -> str:
        calls.append(f"gen {len(state['attempts'])}")
        return f"draft {len(state['attempts'])}"

    def evaluator(response: str, state: Any) -> float:
        calls.append(f"eval {response.split()[1]}")
        return 0.3

    armed = [True]  # outside the saver: LangGraph may run a copy of it

    class StopsBeforeCheckpoint(SqliteSaver):
        def put(self, *args: Any, **kwargs: Any) -> Any:
            if armed[0] and calls == ["gen 0", "eval 0", "gen 1"]:
                armed[0] = False
                raise KeyboardInterrupt  # the second draft's writes are saved, not its step
            return super().put(*args, **kwargs)

    options: dict[str, Any] = {"max_iterations": 2, "patience": 5}
    with sqlite3.connect(tmp_path / "runs.sqlite", check_same_thread=False) as conn:
        saver = StopsBeforeCheckpoint(conn, serde=strict_serde())
        graph = create_refine_graph(generator, evaluator, **options).compile(checkpointer=saver)
        with pytest.raises(KeyboardInterrupt):
            graph.invoke({"task": "T"}, {"configurable": {"thread_id": "t"}}, durability="sync")
        assert calls == ["gen 0", "eval 0", "gen 1"]
        result = refine(generator, "T", evaluator, checkpointer=saver, thread_id="t", **options)
    assert calls == ["gen 0", "eval 0", "gen 1", "eval 1", "gen 2", "eval 2"]
    assert [a.response for a in result.attempts] == ["draft 0", "draft 1", "draft 2"]


@pytest.mark.slow
def test_ctrl_c_at_the_review_prompt_stops_at_once_and_the_review_resumes(
    cli: Any, openai_server: Any, tmp_path: Path
) -> None:
    server = openai_server(drafts_and_judge())
    db = tmp_path / "runs.sqlite"
    args = [*run_args(server, db), "--thread", "reviewed", "--review", "--max-iterations", "0"]
    env = {k: v for k, v in os.environ.items() if k not in MODEL_ENV}
    proc = subprocess.Popen(
        [sys.executable, "-m", "langgraph_refine.cli", *args],
        env=env,
        stdin=subprocess.PIPE,  # open and silent: the prompt waits
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=_default_sigint,
    )
    try:
        assert proc.stdout is not None
        shown = b""
        deadline = time.monotonic() + 60
        while b"re[v]ise?" not in shown and time.monotonic() < deadline:
            if select.select([proc.stdout], [], [], 0.1)[0]:
                shown += os.read(proc.stdout.fileno(), 4096)
        assert b"re[v]ise?" in shown, shown
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=20)
        stopped_in = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert stopped_in < 2.0
    assert "interrupted: 1 attempt(s) are saved on thread reviewed" in err.decode()
    paid = len(server.requests)
    approved = cli(*args, stdin="a\n")
    assert approved.code == 0, approved.err
    assert len(server.requests) == paid  # the review is asked again: no call repeated

"""An interrupted `run` keeps what it paid for, and says how to go on in words that work.

Each test runs the installed `langgraph-refine` command in its own process against a
scripted OpenAI-compatible server on loopback that counts every request; the request in
flight when the signal comes is held by the server. The command printed after the
interruption is run as pasted into a POSIX shell (`/bin/sh -c`).
"""

# ruff: noqa: F811 - pytest fixtures are imported from the helper module

from __future__ import annotations

import json
import signal
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.cli_process import run_command, run_in_shell, start_command, stop, wait_until
from tests.test_cli_helpers import (  # noqa: F401 - fixture
    drafts_and_judge,
    last_user_text,
    openai_server,
)
from tests.test_cli_stop import CALLS, held_at
from tests.test_cli_threads import failing_once_at

TASK = 'Line one: it\'s "quoted".\nLine two, naïve café 東京.\n\ttabbed  and  spaced $HOME `x`\n'
"""A task a shell would mangle unless every character is quoted: line breaks, both
quotes, a tab, runs of spaces, non-ASCII, `$` and backquotes, a trailing line break."""


def loop_args(server: Any, *extra: str) -> list[str]:
    return [
        "--model",
        "scripted",
        "--base-url",
        server.base_url,
        "--max-iterations",
        "3",
        "--patience",
        "5",
        *extra,
    ]


def interrupted_at_third_call(server: Any, release: threading.Event, *args: str, sig: int) -> Any:
    """Start `run ARGS`, wait for its third request (held), and stop it with `sig`."""
    proc = start_command("run", *args)
    try:
        wait_until(lambda: len(server.requests) >= 3)
        return stop(proc, sig)
    finally:
        release.set()


@pytest.mark.slow
def test_the_printed_command_resumes_a_multi_line_task_when_pasted_into_a_shell(
    openai_server: Any, tmp_path: Path
) -> None:
    release = threading.Event()
    server = openai_server(held_at(3, release))
    db = tmp_path / "runs.sqlite"
    args = ["run", TASK, *loop_args(server, "--checkpoint", str(db), "--json")]
    stopped = interrupted_at_third_call(server, release, *args[1:], sig=signal.SIGINT)
    assert stopped.code == 130, stopped.err
    said = stopped.err[stopped.err.index("langgraph-refine: interrupted: ") :]
    message, command = said.split("resume with: ", 1)
    assert message.startswith("langgraph-refine: interrupted: 1 attempt(s) are saved on thread")
    assert "\n" not in message  # the message is one line; the command is printed as it is
    command = command.removesuffix("\n")
    assert command.startswith("langgraph-refine run 'Line one: it'")

    resumed = run_in_shell(command)
    assert resumed.code == 0, resumed.err
    assert "started differently" not in resumed.err
    result = json.loads(resumed.out)
    assert len(result["attempts"]) == 4 and result["stop_reason"] == "max_iterations"
    assert len(server.requests) <= CALLS + 1  # at most the call in flight paid twice
    assert TASK.strip() in last_user_text(server.generator_requests[-1])  # the same task


def test_a_refused_rerun_shows_where_two_alike_tasks_differ(
    openai_server: Any, tmp_path: Path
) -> None:
    server = openai_server(failing_once_at(2))
    db = tmp_path / "runs.sqlite"
    common = [*loop_args(server, "--checkpoint", str(db), "--thread", "t", "-e", "words:30-50")]
    first = run_command("run", "Line one.\nLine two.", *common)
    assert first.code == 1 and "server fell over" in first.err  # the thread holds its run

    pasted = run_command("run", "Line one. Line two.", *common)  # the line break lost
    assert pasted.code == 2
    (line,) = pasted.lines()
    assert (
        "task: started with 'Line one.\\nLine two.', now 'Line one. Line two.' "
        "(they differ at character 10: '\\n' then ' ')"
    ) in line
    assert len(server.requests) == 2  # refused before any call


@pytest.mark.slow
@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_ctrl_c_without_a_checkpoint_writes_the_best_answer_as_json(
    openai_server: Any, sig: int, code: int
) -> None:
    release = threading.Event()
    server = openai_server(held_at(3, release))  # attempt 0 judged, the second draft held
    stopped = interrupted_at_third_call(
        server, release, "Write notes.", *loop_args(server, "--json"), sig=sig
    )
    assert stopped.code == code, stopped.err
    result = json.loads(stopped.out)
    assert result["stop_reason"] == "interrupted"
    assert result["value"] == "draft 0" and result["score"] == pytest.approx(0.3)
    assert [a["response"] for a in result["attempts"]] == ["draft 0"]
    assert result["usage"]["calls"] >= 2 and "error" not in result
    (line,) = stopped.lines()
    assert line == (
        "langgraph-refine: interrupted: nothing is saved (no --checkpoint) (the best answer "
        "so far is on stdout); add --checkpoint FILE to make a run resumable"
    )


@pytest.mark.slow
def test_ctrl_c_without_a_checkpoint_prints_the_best_answer(openai_server: Any) -> None:
    release = threading.Event()
    server = openai_server(held_at(3, release))
    stopped = interrupted_at_third_call(
        server, release, "Write notes.", *loop_args(server), sig=signal.SIGINT
    )
    assert stopped.code == 130, stopped.err
    assert "best response so far — score 0.30" in stopped.out
    assert "stopped: interrupted" in stopped.out and "draft 0" in stopped.out
    assert "Traceback" not in stopped.err


def test_a_rerun_of_a_finished_thread_says_it_starts_a_new_run(
    openai_server: Any, tmp_path: Path
) -> None:
    server = openai_server(drafts_and_judge())
    args = [
        "run",
        "Write notes.",
        *loop_args(server, "--checkpoint", str(tmp_path / "runs.sqlite"), "--thread", "notes"),
        "--max-iterations",
        "0",
    ]
    first = run_command(*args)
    assert first.code == 0, first.err
    assert "finished run" not in first.err
    paid = len(server.requests)
    again = run_command(*args)
    assert again.code == 0, again.err
    assert (
        "thread notes holds a finished run: this starts a new run on it, whose calls are paid again"
    ) in again.err
    assert len(server.requests) == 2 * paid

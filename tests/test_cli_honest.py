"""Honest counts and exits of the command line.

Invalid batch lines are counted in the summary; an interrupted batch (Ctrl-C, SIGTERM)
says what is saved and restores the terminal's cursor; an unreachable server is not a
failed task and names its cause; cached replies are not calls, tokens or cost.

What needs a process of its own (a signal, a terminal, stderr written to a file as it goes)
runs the console script in a subprocess; the rest runs the same entry point in-process (the
`cli` fixture): a process costs two seconds of imports, and tests/test_cli_errors.py checks
that the console script exits with what `main` returns.
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

from tests.test_cli_batch import batch_args
from tests.test_cli_helpers import MODEL_ENV, cli, openai_server, per_task  # noqa: F401 - fixtures

CLI = (sys.executable, "-m", "langgraph_refine.cli")


def env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in MODEL_ENV}


def tasks(path: Path, n: int, *extra: str) -> Path:
    path.write_text(
        "".join(json.dumps({"id": i, "task": f"task {i}"}) + "\n" for i in range(n))
        + "".join(line + "\n" for line in extra)
    )
    return path


@pytest.mark.slow
def test_invalid_lines_are_counted_in_the_summary(
    cli: Any, openai_server: Any, tmp_path: Path
) -> None:
    server = openai_server(per_task())
    src = tasks(
        tmp_path / "in.jsonl",
        3,
        "{not json",
        '{"id": 9}',
        json.dumps({"id": 1, "task": "a duplicate id"}),
    )
    out = tmp_path / "out.jsonl"
    run = cli("batch", str(src), "--out", str(out), "--model", "m", "--base-url", server.base_url)
    assert run.code == 1  # the invalid lines, and nothing else, make it 1
    summary = run.out.strip().splitlines()[0]
    assert summary.startswith("done 3/3, failed 0, invalid 3 line(s) not run"), summary
    assert len(out.read_text().splitlines()) == 3


TASKS = 8


@pytest.mark.slow
@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_an_interrupted_batch_says_what_is_saved_and_restores_the_cursor(
    cli: Any, openai_server: Any, tmp_path: Path, sig: int, code: int
) -> None:
    server = openai_server(per_task(), delay=0.4)
    src = tasks(tmp_path / "in.jsonl", TASKS)
    out = tmp_path / "out.jsonl"
    args = [
        *batch_args(server, src, out, "-e", "words:1-50", "-c", "1"),
    ]
    main, child = pty.openpty()  # stderr is a terminal: the bar hides the cursor
    proc = subprocess.Popen(
        [sys.executable, "-m", "langgraph_refine.cli", *args],
        env={**env(), "TERM": "xterm", "COLUMNS": "100"},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=child,
        # Ctrl-C as in a terminal: a suite started in the background (`make test &`)
        # ignores SIGINT, and a Python started so never raises KeyboardInterrupt.
        preexec_fn=_default_sigint,
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
    assert 1 <= saved < TASKS
    assert f"interrupted: {saved} of {TASKS} task(s) finished and saved in {out}" in text, text
    assert "rerun the same command to continue" in text
    assert "\x1b[?25l" in text  # the bar hid the cursor ...
    assert text.rindex("\x1b[?25h") > text.rindex("\x1b[?25l")  # ... and showed it again

    rerun = cli(*args)
    assert rerun.code == 0, rerun.err
    ids = [json.loads(line)["id"] for line in out.read_text().splitlines()]
    assert sorted(ids) == list(range(TASKS))  # every task once: the saved ones were skipped


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _read(fd: int, wait: float) -> bytes:
    """What the terminal shows within `wait` seconds (and what is waiting then).

    Bounded in time: the bar redraws many times a second, so reading until it pauses
    could last as long as the batch.
    """
    data = b""
    deadline = time.monotonic() + wait
    while select.select([fd], [], [], max(0.0, deadline - time.monotonic()))[0]:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # the other end closed
            break
        if not chunk:
            break
        data += chunk
    return data


@pytest.mark.slow
def test_an_unreachable_server_is_no_failed_task_and_names_its_cause(
    cli: Any, tmp_path: Path
) -> None:
    src = tasks(tmp_path / "in.jsonl", 3)
    run = cli(
        *("batch", str(src), "--out", str(tmp_path / "out.jsonl"), "--model", "m"),
        *("--base-url", "http://127.0.0.1:9/v1", "-e", "words:1-5", "-c", "2"),
    )
    assert run.code == 1
    assert "done 0/3, failed 0" in run.err  # the bar agrees with the error line
    assert "failed 1" not in run.err and "failed 2" not in run.err
    last = run.err.strip().splitlines()[-1]
    assert "cannot reach the model server at http://127.0.0.1:9/v1" in last
    assert "[Errno 111]" in last and "()" not in last  # the cause, from the socket
    assert "0 task(s) saved before that" in last and "rerun the same command" in last


@pytest.mark.slow
def test_cached_replies_are_not_calls_tokens_or_cost(
    cli: Any, openai_server: Any, tmp_path: Path
) -> None:
    server = openai_server(per_task())
    cache = str(tmp_path / "cache.sqlite")
    args = ["run", "Write.", "--model", "m", "--base-url", server.base_url, "--cache", cache]
    first = cli(*args, "--json")
    assert first.code == 0, first.err
    paid = json.loads(first.out)["usage"]
    assert paid["calls"] == 6 and paid["total_tokens"] > 0 and paid["cache_hits"] == 0

    # A budget of 2 calls would stop a paid rerun after round 0; cached replies are no calls.
    second = cli(*args, "--json", "--budget-calls", "2")
    assert second.code == 0, second.err
    data = json.loads(second.out)
    assert len(server.requests) == 6  # nothing reached the server
    assert data["usage"]["calls"] == 0
    assert data["usage"]["total_tokens"] == data["usage"]["input_tokens"] == 0
    assert data["usage"]["cost"] in (0, 0.0, None)
    assert data["usage"]["cache_hits"] == 6
    assert data["stop_reason"] == json.loads(first.out)["stop_reason"] != "budget_exhausted"
    assert all(a["usage"]["calls"] == 0 for a in data["attempts"])

    shown = cli(*args)
    assert "spent: 0 model calls, 0 tokens" in shown.out
    assert "6 cache hits" in shown.out


def flat(body: dict[str, Any]) -> str:
    """A generator whose every answer scores the same under `words:30-50` (4 words)."""
    return "one two three four"


@pytest.mark.slow
def test_patience_zero_disables_the_plateau_rule_on_every_surface(
    cli: Any, openai_server: Any, tmp_path: Path
) -> None:
    from langgraph_refine import LoopOptions, RefineMiddleware, StopRules, refine

    # The library: 0 is None, the rule off (flat scores run to max_iterations).
    assert LoopOptions(patience=0).patience is None and StopRules(patience=0).patience is None
    assert LoopOptions().for_run({"patience": 0}).patience is None
    assert RefineMiddleware(lambda r, s: 0.5, patience=0) is not None
    result = refine(lambda s: "x", "t", lambda r, s: 0.5, patience=0, max_iterations=3)
    assert result.stop_reason == "max_iterations" and len(result.attempts) == 4

    # The command line: --patience 0 and a batch line's patience 0 alike.
    server = openai_server(flat)
    base = ["--model", "m", "--base-url", server.base_url, "-e", "words:30-50"]
    run = cli("run", "Write.", *base, "--patience", "0", "--max-iterations", "3", "--json")
    assert run.code == 0, run.err
    assert json.loads(run.out)["stop_reason"] == "max_iterations"
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"id": 1, "task": "Write.", "patience": 0}) + "\n")
    out = tmp_path / "out.jsonl"
    batch = cli("batch", str(src), "--out", str(out), *base, "--max-iterations", "3")
    assert batch.code == 0, batch.err
    row = json.loads(out.read_text())
    assert row["stop_reason"] == "max_iterations" and len(row["attempts"]) == 4


@pytest.mark.slow
def test_no_python_only_wording_in_errors_rows_or_the_report(
    cli: Any, openai_server: Any, tmp_path: Path
) -> None:
    server = openai_server(flat)
    base = ["--model", "m", "--base-url", server.base_url, "-e", "words:30-50"]
    budget = ["--budget-calls", "1", "--on-budget-exhausted", "raise"]
    run = cli("run", "Write.", *base, *budget)
    assert run.code == 1
    assert ".result" not in run.out + run.err
    assert "budget exhausted" in run.err and "the attempts so far are kept" in run.err

    src = tasks(tmp_path / "in.jsonl", 1)
    out = tmp_path / "out.jsonl"
    batch = cli("batch", str(src), "--out", str(out), *base, *budget)
    assert batch.code == 1
    assert ".result" not in batch.out + batch.err + out.read_text()
    report = cli("report", str(out), "--html", str(tmp_path / "r.html"))
    assert ".result" not in report.out + (tmp_path / "r.html").read_text()


@pytest.mark.parametrize(
    ("flag", "value", "named"),
    [
        ("--memory", "foo", "--memory must be one of"),
        ("--strategy", "foo", "--strategy must be one of"),
        ("--target-score", "1.01", "--target-score must be in [0, 1], got 1.01"),
        ("--max-iterations", "-1", "--max-iterations must be an integer >= 0"),
        ("--patience", "-1", "--patience must be an integer >= 1, or 0 to disable"),
    ],
)
def test_a_bad_option_value_is_a_usage_error(cli: Any, flag: str, value: str, named: str) -> None:
    run = cli("run", "Write.", "--model", "m", "--base-url", "http://127.0.0.1:9/v1", flag, value)
    assert run.code == 2
    lines = run.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("langgraph-refine: ") and named in lines[0]


def test_concurrency_zero_is_a_usage_error_and_report_names_its_input(
    cli: Any, tmp_path: Path
) -> None:
    src = tasks(tmp_path / "in.jsonl", 1)
    run = cli("batch", str(src), "--out", str(tmp_path / "o.jsonl"), "--concurrency", "0")
    assert run.code == 2
    assert run.err.strip() == "langgraph-refine: --concurrency must be >= 1, got 0"

    report = cli("report", "nope.jsonl", "--html", str(tmp_path / "r.html"))
    assert report.code == 2  # a missing input is a usage error, as on every verb
    assert "input file (a batch's --out) nope.jsonl does not exist" in report.err
    assert "output file" not in report.err


def test_revise_revises_then_the_stop_rules_decide_as_docs_say(
    cli: Any, openai_server: Any
) -> None:
    from tests.test_cli_helpers import drafts_and_judge, last_user_text

    # The revision (draft 1) falls short of the target: the loop refines it (draft 2)
    # before asking again, as docs/cli.md says.
    server = openai_server(drafts_and_judge({"draft 0": 0.95, "draft 1": 0.5, "draft 2": 0.96}))
    run = cli(
        *("run", "Write a poem.", "--model", "m", "--base-url", server.base_url),
        *("--review", "--json"),
        stdin="v\nmention the sea\na\n",
    )
    assert run.code == 0, run.err
    assert len(server.generator_requests) == 3
    assert "mention the sea" in last_user_text(server.generator_requests[1])
    assert json.loads(run.out)["stop_reason"] == "approved"


def test_a_server_batch_leaves_file_checks_to_the_server(tmp_path: Path) -> None:
    from langgraph_refine.cli._batch import read_input
    from langgraph_refine.cli._options import CommandOptions

    src = tmp_path / "in.jsonl"
    line = {"id": 1, "task": "t", "evaluator": ["json-schema:person.json", "words:1-9"]}
    src.write_text(
        json.dumps(line) + "\n" + json.dumps({"id": 2, "task": "t", "evaluator": "nope:1"})
    )
    found = read_input(src, CommandOptions(), on_server=True)
    [item] = found.items  # person.json is not opened here: the path is the server's
    assert item.options.run_context()["evaluator"] == ["json-schema:person.json", "words:1-9"]
    assert len(found.errors) == 1 and "unknown evaluator spec 'nope:1'" in found.errors[0]
    local = read_input(src, CommandOptions())
    assert not local.items and "person.json" in local.errors[0]  # locally, it is this disk's


@pytest.mark.slow
def test_the_bar_keeps_its_counts_in_80_columns(openai_server: Any, tmp_path: Path) -> None:
    import fcntl
    import struct
    import termios

    server = openai_server(per_task(), delay=0.1)
    src = tasks(tmp_path / "in.jsonl", 4)
    main, child = pty.openpty()
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    proc = subprocess.Popen(
        [*CLI, *batch_args(server, src, tmp_path / "out.jsonl", "--price", "m=1,2", "-c", "1")],
        env={k: v for k, v in env().items() if k not in ("COLUMNS", "LINES")} | {"TERM": "xterm"},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=child,
    )
    os.close(child)
    screen = b""
    try:
        while proc.poll() is None:
            screen += _read(main, 0.1)
        screen += _read(main, 0.2)
    finally:
        os.close(main)
    assert proc.returncode == 0
    rows = [row for row in screen.decode(errors="replace").replace("\r", "\n").split("\n") if row]
    bars = [row for row in rows if "done " in row]
    assert bars, rows
    final = bars[-1]
    assert "done 4/4, failed 0, mean score 0.50 → 1.00, cost $" in final, final
    visible = "".join(ch for ch in final.split("\x1b")[0])  # text before any escape code
    assert len(visible) <= 80


@pytest.mark.slow
def test_progress_is_plain_lines_as_it_goes_when_stderr_is_a_file(
    openai_server: Any, tmp_path: Path
) -> None:
    server = openai_server(per_task(), delay=0.4)
    src = tasks(tmp_path / "in.jsonl", 5)
    out, log = tmp_path / "out.jsonl", tmp_path / "stderr.log"
    with log.open("w") as stderr:
        proc = subprocess.Popen(
            [*CLI, *batch_args(server, src, out, "-e", "words:1-50", "-c", "1")],
            env=env(),
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and "done 1/5" not in log.read_text():
            time.sleep(0.05)
        running = proc.poll() is None  # the line came while the batch was still running
        proc.wait(timeout=60)
    assert running
    lines = log.read_text().splitlines()
    assert lines[0] == "refining 5 task(s)"
    assert lines[-1].startswith("refining: done 5/5, failed 0")
    assert not any("\x1b" in line or "━" in line for line in lines)  # no bar, no escapes


@pytest.mark.slow
def test_a_cached_batch_reports_cache_hits_not_calls(
    cli: Any, openai_server: Any, tmp_path: Path
) -> None:
    server = openai_server(per_task())
    src = tasks(tmp_path / "in.jsonl", 2)
    cache = ("--cache", str(tmp_path / "cache.sqlite"), "--price", "m=1,2")
    first = cli(*batch_args(server, src, tmp_path / "first.jsonl", *cache))
    assert first.code == 0 and "cache hit" not in first.out
    second = cli(*batch_args(server, src, tmp_path / "second.jsonl", *cache))
    assert second.code == 0, second.err
    assert len(server.requests) == 12  # 2 tasks x 3 rounds x (generator + judge), once
    assert "cost $0.00, 12 cache hit(s)" in second.out
    report = tmp_path / "r.html"
    assert cli("report", str(tmp_path / "second.jsonl"), "--html", str(report)).code == 0
    page = report.read_text()
    assert '<th>model calls</th><td class="num">0</td>' in page
    assert '<th>cache hits (no call, no cost)</th><td class="num">12</td>' in page

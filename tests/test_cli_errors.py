"""Bad input on the command line: one line on stderr, a non-zero exit, never a traceback."""

# ruff: noqa: F811 - pytest fixtures are imported from the helper module

from __future__ import annotations

import os
import shutil
import socket
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
    drafts_and_judge,
    openai_server,
)


def closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def model_args(base_url: str) -> list[str]:
    return ["--model", "scripted", "--base-url", base_url]


@pytest.mark.parametrize("task", ["", "   ", "\n\t"])
def test_empty_task(cli: Any, task: str) -> None:
    assert_one_line_error(cli("run", task, "--model", "m"), "task is empty")


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ("bogus", "unknown evaluator spec 'bogus'"),
        ("judge:extra", "unknown evaluator spec"),
        ("words:abc", "words:MIN-MAX"),
        ("words:9-2", "MIN (9) is greater than MAX (2)"),
        ("contains:", "list the words"),
        ("regex:(", "invalid regular expression"),
        ("json-schema:", "needs a file name"),
        ("json-schema:/no/such/schema.json", "file not found: /no/such/schema.json"),
        ("python-tests:/no/such/tests.py", "file not found"),
    ],
)
def test_bad_evaluator_specs(cli: Any, spec: str, fragment: str) -> None:
    run = cli("run", "Write.", "--model", "m", "--evaluator", spec)
    assert_one_line_error(run, fragment)
    assert "judge, words:MIN-MAX" in run.err or "spec" in run.err


def test_spec_files_that_cannot_be_used(cli: Any, tmp_path: Path) -> None:
    not_json = tmp_path / "schema.json"
    not_json.write_text("{nope")
    assert_one_line_error(
        cli("run", "Write.", "--model", "m", "-e", f"json-schema:{not_json}"), "is not valid JSON"
    )
    folder = tmp_path / "folder.py"
    folder.mkdir()
    assert_one_line_error(
        cli("run", "Write.", "--model", "m", "-e", f"python-tests:{folder}"), "cannot read"
    )
    not_utf8 = tmp_path / "latin1.py"
    not_utf8.write_bytes(b"def test_x():\n    assert '\xe9'\n")
    assert_one_line_error(
        cli("run", "Write.", "--model", "m", "-e", f"python-tests:{not_utf8}"), "cannot read"
    )


def test_unreachable_endpoint_fails_fast(cli: Any) -> None:
    url = closed_port_url()
    started = time.monotonic()
    run = cli("run", "Write.", *model_args(url))
    assert_one_line_error(run, "cannot reach the model server", url)
    assert time.monotonic() - started < 15


@pytest.mark.slow
def test_a_slow_server_is_reported_as_slow_naming_timeout(cli: Any) -> None:
    from tests.fault_server import FaultServer, hang

    with FaultServer().serve() as server:
        server.script(*[hang(30)] * 20)  # reached, but no reply within --timeout
        run = cli("run", "Write.", *model_args(server.base_url), "--timeout", "0.5")
        assert_one_line_error(run, "answered too slowly", "--timeout", "0.5 seconds")
        assert "cannot reach" not in run.err
        assert server.received  # the requests did arrive


def test_http_errors_are_one_line(cli: Any, openai_server: Any) -> None:
    server = openai_server(lambda body: Reply(status=401, error="Incorrect API key provided"))
    run = cli("run", "Write.", *model_args(server.base_url))
    assert_one_line_error(run, "HTTP 401", "Incorrect API key provided")
    assert len(server.requests) == 1  # a 401 is not retried


def test_missing_model(cli: Any) -> None:
    assert_one_line_error(cli("run", "Write."), "no model given", "REFINE_MODEL")


def test_unknown_provider_package(cli: Any) -> None:
    # "groq:" is a LangChain provider whose package the test extra does not install
    # (anthropic's comes with Deep Agents).
    pytest.importorskip("langchain_openai")
    try:
        import langchain_groq  # noqa: F401
    except ImportError:
        assert_one_line_error(cli("run", "Write.", "--model", "groq:llama-x"), "groq")
    else:  # pragma: no cover - depends on the environment
        pytest.skip("langchain-groq is installed")


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--target-score", "1.5"], "--target-score must be in [0, 1], got 1.5"),
        (["--max-iterations", "-1"], "--max-iterations must be an integer >= 0"),
        (["--patience", "-2"], "--patience must be an integer >= 1"),
        (["--memory", "everything"], "memory must be one of all, last, best_and_last"),
        (["--memory", "0"], "memory window must be >= 1"),
        (["--timeout", "0"], "--timeout must be a positive number"),
        (["--thread", "t"], "--thread needs --checkpoint"),
    ],
)
def test_bad_options(cli: Any, args: list[str], fragment: str) -> None:
    assert_one_line_error(cli("run", "Write.", "--model", "m", *args), fragment)


def test_bad_checkpoint_and_cache_files(cli: Any, tmp_path: Path, openai_server: Any) -> None:
    server = openai_server(drafts_and_judge())
    text = tmp_path / "notes.txt"
    text.write_text("this is not a database, just some text that is long enough " * 20)
    base = ["run", "Write.", *model_args(server.base_url)]
    assert_one_line_error(cli(*base, "--checkpoint", str(text)), "not a usable SQLite database")
    assert_one_line_error(
        cli(*base, "--checkpoint", str(tmp_path / "no" / "c.db")), "does not exist"
    )
    assert_one_line_error(cli(*base, "--cache", str(text)), "not a usable SQLite database")
    assert_one_line_error(cli(*base, "--cache", str(tmp_path)), "is a folder")
    assert server.requests == []


def test_usage_errors_are_one_line(cli: Any) -> None:
    assert_one_line_error(cli("run"), "Missing argument", "--help")
    assert_one_line_error(cli("run", "x", "--no-such-option"), "No such option")
    assert_one_line_error(cli("frobnicate"), "No such command")
    run = cli("batch", "in.jsonl")
    assert_one_line_error(run, "--out")
    assert run.code == 2


def test_report_and_batch_file_errors(cli: Any, tmp_path: Path) -> None:
    missing = tmp_path / "missing.jsonl"
    assert_one_line_error(
        cli("report", str(missing), "--html", str(tmp_path / "r.html")), "does not exist"
    )
    assert_one_line_error(
        cli("batch", str(missing), "--out", str(tmp_path / "o.jsonl"), "--model", "m"),
        "does not exist",
    )
    assert_one_line_error(
        cli("batch", str(tmp_path), "--out", str(tmp_path / "o.jsonl"), "--model", "m"),
        "is a folder",
    )
    binary = tmp_path / "bin.jsonl"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    assert_one_line_error(
        cli("batch", str(binary), "--out", str(tmp_path / "o.jsonl"), "--model", "m"), "not UTF-8"
    )
    assert_one_line_error(
        cli("batch", str(missing), "--out", str(tmp_path / "o.jsonl"), "--concurrency", "0"),
        "--concurrency must be >= 1",
    )


def test_missing_cli_extra_names_the_install_command(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from langgraph_refine.cli import main

    monkeypatch.setitem(sys.modules, "typer", None)
    assert main(["--help"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "pip install 'langgraph-refine[cli]'" in err and "typer" in err


def _console_script() -> list[str]:
    script = shutil.which("langgraph-refine", path=os.path.dirname(sys.executable))
    return [script] if script else [sys.executable, "-m", "langgraph_refine.cli"]


@pytest.mark.slow
def test_console_script_errors_in_a_real_process(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("REFINE_MODEL", "OPENAI_BASE_URL")}
    cases = [
        (["run", "  ", "--model", "m"], "task is empty", 2),
        (["run", "Write.", "--model", "m", "-e", "nope:x"], "unknown evaluator spec", 2),
        (["run", "Write.", *model_args(closed_port_url())], "cannot reach the model server", 1),
    ]
    for args, fragment, code in cases:  # a bad option value is a usage error: 2
        proc = subprocess.run(
            [*_console_script(), *args], capture_output=True, text=True, env=env, timeout=60
        )
        assert proc.returncode == code, proc
        assert proc.stderr.count("\n") == 1 and fragment in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr and proc.stdout == ""


def test_python_dash_m_runs_the_cli() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "langgraph_refine.cli", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0 and "batch" in proc.stdout

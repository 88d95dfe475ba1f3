"""One rule for exit codes, kept by every verb (docs/cli.md, "Errors and exit codes").

0 done, 1 ran and failed, 2 usage (every missing or unusable input, file or folder; no
model; a flag that needs another), 130 / 143 interrupted (see test_cli_interrupted).
Each case runs the installed `langgraph-refine` command in its own process with a model
server on loopback that must receive nothing: a usage error is found before any call.
"""

# ruff: noqa: F811 - pytest fixtures are imported from the helper module

from __future__ import annotations

from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest

from tests.cli_process import run_command
from tests.test_cli_batch import tasks, write_jsonl
from tests.test_cli_helpers import openai_server, per_task  # noqa: F401 - fixture

USAGE_ERRORS = [
    (
        ["batch", "{tmp}/missing.jsonl", "--out", "{tmp}/o.jsonl", "{model}"],
        "missing.jsonl does not exist",
    ),
    (["batch", "{tmp}", "--out", "{tmp}/o.jsonl", "{model}"], "is a folder, not a JSONL file"),
    (
        ["batch", "{src}", "--out", "{tmp}/none/o.jsonl", "{model}"],
        "the folder {tmp}/none does not exist",
    ),
    (["batch", "{src}", "--out", "{tmp}", "{model}"], "output file {tmp} is a folder"),
    (["batch", "{src}", "--out", "{tmp}/o.jsonl"], "no model given"),
    (["run", "Write."], "no model given"),
    (
        ["run", "Write.", "{model}", "--cache", "{tmp}/none/c.sqlite"],
        "--cache {tmp}/none/c.sqlite: the folder",
    ),
    (["run", "Write.", "{model}", "--cache", "{src}"], "is not a usable SQLite database"),
    (
        ["run", "Write.", "{model}", "--schema", "{tmp}/missing.json"],
        "--schema {tmp}/missing.json: file not found",
    ),
    (
        ["run", "Write.", "{model}", "--checkpoint", "{tmp}/none/r.sqlite"],
        "the folder {tmp}/none does not exist",
    ),
    (
        ["run", "Write.", "{model}", "--checkpoint", "postgresql://postgres@127.0.0.1:1/x"],
        "cannot use that PostgreSQL database",
    ),
    (["run", "Write.", "{model}", "--restart"], "--restart needs --thread ID"),
    (["run", "Write.", "{model}", "--thread", "t"], "--thread needs --checkpoint"),
    (
        ["batch", "{src}", "--out", "{tmp}/o.jsonl", "{model}", "--store", "{tmp}/none/s.sqlite"],
        "--store",
    ),
    (["calibrate", "{tmp}/missing.jsonl", "-e", "words:1-5"], "missing.jsonl"),
    (["report", "{tmp}/missing.jsonl", "--html", "{tmp}/r.html"], "missing.jsonl does not exist"),
    (["report", "{src}", "--html", "{tmp}/r.html"], "holds no results"),
    (
        ["run", "Write.", "{model}", "--pirce", "m=1,2"],
        "No such option: --pirce; did you mean --price?",
    ),
]
"""Arguments (`{tmp}` the test's folder, `{src}` a batch input file, `{model}` the model
flags) and a part of the one error line."""


@pytest.mark.slow
def test_every_missing_or_unusable_input_is_a_usage_error_before_any_call(
    openai_server: Any, tmp_path: Path
) -> None:
    server = openai_server(per_task())
    src = write_jsonl(tmp_path / "in.jsonl", tasks(1))
    model = ["--model", "m", "--base-url", server.base_url]
    for args, fragment in USAGE_ERRORS:
        filled: list[str] = []
        for arg in args:
            if arg == "{model}":
                filled += model
            else:
                filled.append(arg.format(tmp=tmp_path, src=src))
        done = run_command(*filled)
        assert done.code == 2, (filled, done)
        (line,) = done.lines()
        assert line.startswith("langgraph-refine: ") and "Traceback" not in done.err
        assert fragment.format(tmp=tmp_path) in line, (filled, line)
        assert "None" not in line and done.out == ""
    assert server.requests == []
    assert not (tmp_path / "o.jsonl").exists()  # a refused batch leaves no output file


def test_version_and_unknown_flags(tmp_path: Path) -> None:
    shown = run_command("--version")
    assert shown.code == 0 and shown.out == f"langgraph-refine {version('langgraph-refine')}\n"
    far = run_command("run", "Write.", "--prompt", "x")
    assert far.code == 2
    assert far.lines() == [
        "langgraph-refine: No such option: --prompt (see `langgraph-refine run --help`)"
    ]
    near = run_command("batch", "in.jsonl", "--out", "o.jsonl", "--max-iter", "2")
    assert near.code == 2 and "did you mean --max-iterations?" in near.err

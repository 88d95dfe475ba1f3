"""Bad input is refused clearly, and one bad line is one failed row, never the batch's end.

A task holding a lone surrogate (valid JSON, no text) becomes a failed row that says so
while the other tasks run; a file that is not UTF-8 is refused naming its first bad line;
a SQLite file that is not a checkpoint file is refused naming it; every invalid option
value exits 2; criteria that no check would read are refused.
"""

# ruff: noqa: F811 - pytest fixtures are imported from the helper module

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.test_cli_batch import batch_args, read_jsonl
from tests.test_cli_helpers import (  # noqa: F401 - fixtures
    assert_one_line_error,
    cli,
    drafts_and_judge,
    openai_server,
    per_task,
)


def test_a_task_that_is_no_text_is_one_failed_row_and_the_batch_goes_on(
    cli: Any, openai_server: Any, tmp_path: Path
) -> None:
    server = openai_server(per_task())
    src = tmp_path / "in.jsonl"
    src.write_text(
        '{"id": 1, "task": "first"}\n'
        '{"id": 2, "task": "rain \\ud800 now"}\n'  # valid JSON: a lone surrogate
        '{"id": 3, "task": "third"}\n'
    )
    out = tmp_path / "out.jsonl"
    run = cli(*batch_args(server, src, out, "-e", "words:1-50"))
    assert run.code == 1, run.err
    assert "'utf-8' codec" not in run.err + run.out
    rows = {row["id"]: row for row in read_jsonl(out)}
    assert sorted(rows) == [1, 2, 3]
    assert rows[2]["task"] == "rain \ud800 now"  # kept as written (escaped in the file)
    assert rows[2]["error"].startswith(
        "the task was not run: it holds a lone surrogate (\\ud800) at character 6"
    ), rows[2]
    assert "line 2 of the input file" in rows[2]["error"]
    assert "error" not in rows[1] and "error" not in rows[3]
    assert not any("ud800" in json.dumps(body) for body in server.requests)  # never sent
    assert "id 2 (line 2) failed: the task was not run" in run.err

    rerun = cli(*batch_args(server, src, out, "-e", "words:1-50"))  # retried, still one row
    assert rerun.code == 1
    assert [row["id"] for row in read_jsonl(out)].count(2) == 2


def test_a_file_that_is_not_utf8_is_refused_naming_its_first_bad_line(
    cli: Any, tmp_path: Path
) -> None:
    src = tmp_path / "in.jsonl"
    src.write_bytes(b'{"id": 1, "task": "ok"}\n{"id": 2, "task": "caf\xe9"}\n{"id": 3}\n')
    run = cli("batch", str(src), "--out", str(tmp_path / "out.jsonl"), "--model", "m")
    assert_one_line_error(
        run, f"input file {src} is not UTF-8 text: line 2 holds the byte 0xe9 at column 23"
    )


def test_a_sqlite_file_that_is_not_a_checkpoint_file_is_refused_naming_it(
    cli: Any, openai_server: Any, tmp_path: Path
) -> None:
    server = openai_server(drafts_and_judge())
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE checkpoints (x INTEGER)")
        conn.execute("CREATE TABLE writes (y INTEGER)")
    src = tmp_path / "in.jsonl"
    src.write_text('{"id": 1, "task": "t"}\n')
    base = ["--model", "m", "--base-url", server.base_url, "--checkpoint", str(other)]
    for args in (["run", "Write."], ["batch", str(src), "--out", str(tmp_path / "o.jsonl")]):
        run = cli(*args, *base)
        assert run.code == 2, run.err
        assert_one_line_error(run, f"--checkpoint {other} is a SQLite database but not a")
    assert not server.requests


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["run", "  ", "--model", "m"], "the task is empty"),
        (["run", "Write.", "--model", ""], "--model '' is empty"),
        (["run", "Write.", "--model", "m", "--model", "m"], "--model 'm' is given twice"),
        (["run", "Write.", "--model", "m", "--thread", "t"], "--thread needs --checkpoint"),
        (["run", "Write.", "--model", "m", "--max-tokens", "0"], "--max-tokens must be"),
        (["run", "Write.", "--model", "m", "--criterion", ""], "--criterion is given an empty"),
        (
            ["run", "Write.", "--model", "m", "-e", "words:1-5", "--criterion", "Mention rain"],
            "the criteria ('Mention rain') need a judge to read them, but the checks (words:1-5)",
        ),
        (
            ["run", "Write.", "--model", "m", "-e", "cascade:words:3-20;;judge"],
            "a cascade has an empty spec between its ';'",
        ),
        (
            ["run", "Write.", "--model", "m", "-e", "checklist:Mentions rain"],
            "-e checklist --criterion 'Mentions rain'",
        ),
    ],
)
def test_every_invalid_option_value_exits_2(cli: Any, args: list[str], fragment: str) -> None:
    run = cli(*args, "--base-url", "http://127.0.0.1:9/v1")
    assert run.code == 2, run
    assert_one_line_error(run, fragment)


def test_store_with_no_store_exits_2(cli: Any, tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text('{"id": 1, "task": "t"}\n')
    run = cli(
        "batch", str(src), "--out", str(tmp_path / "o.jsonl"), "--model", "m",
        "--store", str(tmp_path / "s.db"), "--no-store",
    )  # fmt: skip
    assert run.code == 2
    assert_one_line_error(run, "contradict each other")


def test_criteria_a_judge_reads_are_accepted(cli: Any, openai_server: Any) -> None:
    server = openai_server(drafts_and_judge())
    for checks in (["-e", "words:1-5", "-e", "judge"], ["-e", "cascade:words:1-5;judge"]):
        run = cli(
            "run", "Write.", "--model", "m", "--base-url", server.base_url, "--json",
            "--max-iterations", "0", *checks, "--criterion", "Mention rain",
        )  # fmt: skip
        assert run.code == 0, run.err

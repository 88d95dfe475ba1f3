"""The strategy record on the command line: batch shares a store, --store, --no-store, report.

Real `ChatOpenAI` clients talk to a scripted OpenAI server whose refinements always score
below the attempt they refine, so a loop that learned from the tasks before samples
afresh in round 1 instead of refining.
"""

# ruff: noqa: F811 - pytest fixtures are imported from the helper module

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.test_cli_batch import batch_args
from tests.test_cli_helpers import (  # noqa: F401 - fixtures
    MODEL_ENV,
    assert_one_line_error,
    cli,
    is_judge,
    judge_json,
    last_user_text,
    openai_server,
    rated_text,
    task_of,
)

KEY = "openai:m|llm_judge"


def refinements_fall(body: dict[str, Any]) -> str:
    """Fresh answers score 0.5; a refinement scores 0.2, below the attempt it refines."""
    if is_judge(body):
        refined = "(refined)" in rated_text(body)
        return judge_json(0.2 if refined else 0.5, feedback="add more detail")
    if re.search(r"## Attempt \d+", last_user_text(body)):
        return f"answer to {task_of(body)} (refined)"
    return f"answer to {task_of(body)}"


def write_tasks(path: Path, n: int, prefix: str = "t") -> Path:
    rows = [{"id": f"{prefix}{i}", "task": f"task number {i}"} for i in range(n)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def moves_at_round_1(out: Path) -> dict[str, str]:
    """Each task's round 1, by id: `"refine"` (of attempt 0) or `"fresh"` (a sample of any kind)."""
    found = {}
    for line in out.read_text().splitlines():
        row = json.loads(line)
        found[row["id"]] = "fresh" if row["attempts"][1]["parent"] is None else "refine"
    return found


def record_line(out: str) -> str:
    """The summary's strategy record line."""
    [line] = [line for line in out.splitlines() if line.startswith(f"strategy record {KEY}: ")]
    return line


def batch(server: Any, src: Path, out: Path, *extra: str) -> list[str]:
    return batch_args(
        server, src, out, "--max-iterations", "3", "--patience", "3", "--concurrency", "1", *extra
    )


def test_batch_shares_one_store_over_its_tasks(
    cli: Any, openai_server: Any, tmp_path: Path
) -> None:
    server = openai_server(refinements_fall)
    src, out = write_tasks(tmp_path / "in.jsonl", 5), tmp_path / "out.jsonl"
    run = cli(*batch(server, src, out))
    assert run.code == 0, run.err
    moves = moves_at_round_1(out)
    assert moves["t0"] == "refine"  # the first task knows nothing yet
    assert moves["t4"] == "fresh"  # a later one learned that refinements fall
    # Every refinement fell below what it refined, and none raised the best score.
    found = re.search(
        r"refine (\d+) rounds, raised the best 0 \(0%\), fell (\d+)", record_line(run.out)
    )
    assert found and found.group(1) == found.group(2) != "0"


def test_no_store_keeps_every_task_cold(cli: Any, openai_server: Any, tmp_path: Path) -> None:
    server = openai_server(refinements_fall)
    src, out = write_tasks(tmp_path / "in.jsonl", 5), tmp_path / "out.jsonl"
    run = cli(*batch(server, src, out, "--no-store"))
    assert run.code == 0, run.err
    assert set(moves_at_round_1(out).values()) == {"refine"}
    assert "strategy record" not in run.out


@pytest.mark.slow
def test_store_file_carries_the_record_across_batches(
    cli: Any, openai_server: Any, tmp_path: Path
) -> None:
    server = openai_server(refinements_fall)
    store = tmp_path / "record.sqlite"
    first_out, second_out = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    run = cli(
        *batch(server, write_tasks(tmp_path / "a.jsonl", 4, "a"), first_out, "--store", str(store))
    )
    assert run.code == 0, run.err
    assert moves_at_round_1(first_out)["a0"] == "refine"
    # A new batch with the same store starts from what the first one learned ...
    second = write_tasks(tmp_path / "b.jsonl", 1, "b")
    run = cli(*batch(server, second, second_out, "--store", str(store)))
    assert run.code == 0, run.err
    assert moves_at_round_1(second_out) == {"b0": "fresh"}
    # ... while a batch with its own in-memory store starts cold.
    cold_out = tmp_path / "cold.jsonl"
    run = cli(*batch(server, second, cold_out))
    assert run.code == 0, run.err
    assert moves_at_round_1(cold_out) == {"b0": "refine"}


def test_report_shows_the_moves_and_the_stored_record(
    cli: Any, openai_server: Any, tmp_path: Path
) -> None:
    server = openai_server(refinements_fall)
    store, out, page = tmp_path / "record.sqlite", tmp_path / "out.jsonl", tmp_path / "r.html"
    assert (
        cli(*batch(server, write_tasks(tmp_path / "in.jsonl", 3), out, "--store", str(store))).code
        == 0
    )
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    refines = sum(1 for r in rows for a in r["attempts"][1:] if a["parent"] is not None)
    run = cli("report", str(out), "--html", str(page), "--store", str(store))
    assert run.code == 0, run.err
    # Every refinement fell below what it refined, and none raised the best score.
    counted = f"refine {refines} round{'' if refines == 1 else 's'}, raised the best 0 (0%)"
    assert f"{counted}, fell {refines}" in run.out
    assert f"{counted}, fell {refines}" in record_line(run.out)
    html = page.read_text()
    assert '<section id="moves">' in html
    assert f'data-title="strategy record {KEY}"' in html
    assert '<tr data-move="refine"><td>refine</td>' in html


def test_report_without_a_store_shows_the_batch_moves(
    cli: Any, openai_server: Any, tmp_path: Path
) -> None:
    server = openai_server(refinements_fall)
    out, page = tmp_path / "out.jsonl", tmp_path / "r.html"
    assert cli(*batch(server, write_tasks(tmp_path / "in.jsonl", 2), out, "--no-store")).code == 0
    run = cli("report", str(out), "--html", str(page))
    assert run.code == 0, run.err
    assert "moves in this batch: refine 2 rounds, raised the best 0 (0%), fell 2" in run.out
    assert "strategy record" not in run.out


def stored_rounds(path: Path) -> int:
    """The rounds counted in the SQLite store's record."""
    from langgraph_refine.cli._store import read_store_records

    records = read_store_records(path)
    return sum(stats.rounds for stats in records[KEY].moves.values())


def test_store_file_keeps_the_counts_of_every_batch(
    cli: Any, openai_server: Any, tmp_path: Path
) -> None:
    server = openai_server(refinements_fall)
    store = tmp_path / "record.sqlite"
    first = cli(
        *batch(
            server,
            write_tasks(tmp_path / "a.jsonl", 2, "a"),
            tmp_path / "a.out",
            "--store",
            str(store),
        )
    )
    assert first.code == 0, first.err
    assert stored_rounds(store) == 6  # two tasks, three rounds each
    second = cli(
        *batch(
            server,
            write_tasks(tmp_path / "b.jsonl", 1, "b"),
            tmp_path / "b.out",
            "--store",
            str(store),
        )
    )
    assert second.code == 0, second.err
    assert stored_rounds(store) == 9  # the second batch added to the first one's record
    assert f"strategy record {KEY}: " in second.out


@pytest.mark.slow
def test_batches_run_side_by_side_on_one_store_file_lose_no_round(
    openai_server: Any, tmp_path: Path
) -> None:
    """Two batch commands at once on one `--store` file (how docs/cli.md splits a very large
    batch over cores): the record counts every round of both."""
    server = openai_server(refinements_fall)
    store = tmp_path / "record.sqlite"
    env = {k: v for k, v in os.environ.items() if k not in MODEL_ENV}
    commands = [
        [
            sys.executable,
            "-m",
            "langgraph_refine.cli",
            *batch(
                server,
                write_tasks(tmp_path / f"{part}.jsonl", 3, part),
                tmp_path / f"{part}.out",
                "--store",
                str(store),
            ),
        ]
        for part in ("a", "b")
    ]
    running = [
        subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for command in commands
    ]
    for proc in running:
        _, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, err.decode()
        assert b"Traceback" not in err and b"store failed" not in err, err.decode()
    assert stored_rounds(store) == 18  # six tasks, three rounds each


async def test_two_stores_setting_up_one_new_file_at_once_both_succeed(tmp_path: Path) -> None:
    """Both batches run the store's migrations on a new file; one finds a step already
    taken (a duplicate version or column) and tries again (without that, most of these
    runs fail: 22 of 30 here)."""
    from langgraph.store.sqlite.aio import AsyncSqliteStore

    from langgraph_refine.cli._store import _setup

    for run in range(10):
        path = str(tmp_path / f"new{run}.sqlite")
        async with (
            AsyncSqliteStore.from_conn_string(path) as first,
            AsyncSqliteStore.from_conn_string(path) as second,
        ):
            await asyncio.gather(_setup(first), _setup(second))
            await first.aput(("ns",), "k", {"v": run})
            item = await second.aget(("ns",), "k")
            assert item is not None and item.value == {"v": run}


# -- bad input: one clear line, no traceback, no output file ---------------------------------


def test_store_and_no_store_contradict(cli: Any, tmp_path: Path) -> None:
    src, out = write_tasks(tmp_path / "in.jsonl", 1), tmp_path / "out.jsonl"
    run = cli(
        "batch", str(src), "--out", str(out), "--store", str(tmp_path / "s.sqlite"), "--no-store"
    )
    assert_one_line_error(run, "--store", "--no-store", "contradict")
    assert not out.exists()


def test_store_options_do_not_apply_with_server(cli: Any, tmp_path: Path) -> None:
    src, out = write_tasks(tmp_path / "in.jsonl", 1), tmp_path / "out.jsonl"
    run = cli("batch", str(src), "--out", str(out), "--server", "http://127.0.0.1:9", "--no-store")
    assert_one_line_error(run, "--no-store does not apply with --server", "its own store")


def test_store_path_problems(cli: Any, tmp_path: Path) -> None:
    src, out = write_tasks(tmp_path / "in.jsonl", 1), tmp_path / "out.jsonl"
    args = [
        "batch",
        str(src),
        "--out",
        str(out),
        "--model",
        "m",
        "--base-url",
        "http://127.0.0.1:9",
    ]
    run = cli(*args, "--store", str(tmp_path))
    assert_one_line_error(run, f"--store {tmp_path} is a folder", "give a file name")
    run = cli(*args, "--store", str(tmp_path / "missing" / "s.sqlite"))
    assert_one_line_error(run, "does not exist")
    text = tmp_path / "notes.txt"
    text.write_text("not a database, just some notes\n" * 20)
    run = cli(*args, "--store", str(text))
    assert_one_line_error(run, f"--store {text} is not a usable SQLite store")
    assert not out.exists()


def test_report_store_must_exist(cli: Any, tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    out.write_text("")
    run = cli(
        "report",
        str(out),
        "--html",
        str(tmp_path / "r.html"),
        "--store",
        str(tmp_path / "no.sqlite"),
    )
    assert_one_line_error(run, "does not exist")


def test_an_unwritable_store_file_is_refused(
    cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from langgraph_refine.cli import _store

    store = tmp_path / "record.sqlite"
    store.write_bytes(b"")  # an empty file is a valid (empty) SQLite database
    # Tests may run as root, for whom every file is writable: ask the check directly.
    readable_only = {os.R_OK, os.F_OK, os.X_OK}
    monkeypatch.setattr(_store.os, "access", lambda path, mode: mode in readable_only)
    src, out = write_tasks(tmp_path / "in.jsonl", 1), tmp_path / "out.jsonl"
    run = cli("batch", str(src), "--out", str(out), "--store", str(store))
    assert_one_line_error(run, f"--store {store} is not writable", "permissions")
    assert not out.exists()

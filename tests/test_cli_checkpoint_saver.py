"""The command line's SQLite checkpointer: statements on the event loop, puts committed in groups.

Real graphs run on a real SQLite file: the puts of one turn of the event loop share one
commit, each put is in the file (seen from another connection) when it returns, the file
is in WAL mode and commits are not synced one by one; the leases a process holds in one
file share one connection and one renewing thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import operator
import sqlite3
import threading
import time
from pathlib import Path
from typing import Annotated, Any

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from langgraph_refine._loop._claim import Lease
from langgraph_refine.cli._errors import CliError
from langgraph_refine.cli._sqlite_saver import LoopSqliteSaver, open_sqlite_saver

THREADS = 16


class Steps(TypedDict):
    done: Annotated[list[str], operator.add]


def _graph(saver: LoopSqliteSaver) -> Any:
    async def step(state: Steps) -> dict[str, Any]:
        await asyncio.sleep(0.01)  # the threads' steps end together, as a batch's do
        return {"done": ["step"]}

    graph = StateGraph(Steps)
    graph.add_node("one", step)
    graph.add_node("two", step)
    graph.add_edge(START, "one")
    graph.add_edge("one", "two")
    graph.add_edge("two", END)
    return graph.compile(checkpointer=saver)


def _statements(conn: sqlite3.Connection) -> list[str]:
    seen: list[str] = []
    conn.set_trace_callback(lambda sql: seen.append(sql.split()[0].upper()))
    return seen


async def test_the_puts_of_concurrent_runs_share_commits_and_each_is_in_the_file(
    tmp_path: Path,
) -> None:
    path = tmp_path / "runs.sqlite"
    with open_sqlite_saver(path) as saver:
        seen = _statements(saver.conn)
        graph = _graph(saver)
        configs: list[RunnableConfig] = [
            {"configurable": {"thread_id": f"t{n}"}} for n in range(THREADS)
        ]
        await asyncio.gather(*(graph.ainvoke({"done": []}, c, durability="sync") for c in configs))
        puts = seen.count("INSERT")
        commits = seen.count("COMMIT")
        # Each run puts 4 checkpoints and 3 steps' writes; the runs' puts share commits.
        assert puts >= THREADS * 7
        assert 0 < commits <= puts / 4, (commits, puts)
    with contextlib.closing(sqlite3.connect(path)) as other:  # what another process reads
        rows = other.execute("SELECT COUNT(DISTINCT thread_id) FROM checkpoints").fetchone()
    assert rows == (THREADS,)


async def test_a_step_runs_only_once_the_checkpoint_before_it_is_committed(
    tmp_path: Path,
) -> None:
    path = tmp_path / "runs.sqlite"
    seen: list[int] = []
    with open_sqlite_saver(path) as saver, contextlib.closing(sqlite3.connect(path)) as other:

        async def step(state: Steps) -> dict[str, Any]:
            # Another connection sees only committed rows: those of the steps before.
            seen.append(other.execute("SELECT COUNT(*) FROM checkpoints").fetchone()[0])
            return {"done": ["step"]}

        graph = StateGraph(Steps)
        graph.add_node("one", step)
        graph.add_node("two", step)
        graph.add_edge(START, "one")
        graph.add_edge("one", "two")
        graph.add_edge("two", END)
        compiled = graph.compile(checkpointer=saver)
        config: RunnableConfig = {"configurable": {"thread_id": "t"}}
        await compiled.ainvoke({"done": []}, config, durability="sync")  # as the CLI runs it
    assert seen == [2, 3]  # the input's and the start's checkpoints, then the first step's


def test_the_file_is_wal_and_commits_are_not_synced_one_by_one(tmp_path: Path) -> None:
    with open_sqlite_saver(tmp_path / "runs.sqlite") as saver:
        assert saver.conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert saver.conn.execute("PRAGMA synchronous").fetchone() == (1,)  # NORMAL


def test_a_file_that_is_no_database_is_refused_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "notes.sqlite"
    path.write_text("not a database, " * 100)
    refused = pytest.raises(CliError, match=r"notes\.sqlite is not a usable SQLite database")
    with refused as exc, open_sqlite_saver(path):
        pass
    assert exc.value.exit_code == 2


def _renewers() -> int:
    return sum(t.name == "refine-lease" and t.is_alive() for t in threading.enumerate())


def test_leases_in_one_file_share_one_renewer_and_leave_no_row(tmp_path: Path) -> None:
    path = str(tmp_path / "runs.sqlite")
    before = _renewers()
    leases = [Lease(path, f"thread {n}") for n in range(8)]
    for lease in leases:
        lease.take()
    with contextlib.closing(sqlite3.connect(path)) as conn:
        assert conn.execute("SELECT COUNT(*) FROM refine_writers").fetchone() == (8,)
    assert _renewers() == before + 1
    for lease in leases:
        lease.give_back()
    deadline = time.monotonic() + 5
    while _renewers() > before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _renewers() == before  # the last lease given back stops the renewer
    with contextlib.closing(sqlite3.connect(path)) as conn:
        assert conn.execute("SELECT COUNT(*) FROM refine_writers").fetchone() == (0,)

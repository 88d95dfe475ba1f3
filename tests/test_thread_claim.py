"""One writer per thread: a second run on a thread in progress is refused at once.

On SQLite and PostgreSQL, in one process (`refine` in two threads) and across processes
(the console script), and a writer killed with SIGKILL leaves no claim behind: its thread
resumes, repeating at most the call that was in flight.
"""

# ruff: noqa: F811 - pytest fixtures are imported from the helper module

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.sqlite import SqliteSaver

from langgraph_refine import ThreadBusyError, arefine, refine
from langgraph_refine._loop._claim import claim_thread
from tests.conftest import POSTGRES_URI_ENV, postgres_uri
from tests.test_cli_helpers import MODEL_ENV, cli, openai_server  # noqa: F401 - fixtures
from tests.test_cli_stop import CALLS, held_at, run_args


class Held:
    """A generator that holds its first call until released, and counts its calls."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()
        self.calls = 0

    def __call__(self, state: Any) -> str:
        self.calls += 1
        self.started.set()
        self.release.wait(20)
        return "draft"


def _saver_pair(kind: str, tmp_path: Path) -> Iterator[tuple[Any, Any]]:
    """Two savers on one store (as two processes would have)."""
    if kind == "sqlite":
        path = tmp_path / "runs.sqlite"
        with (
            sqlite3.connect(path, check_same_thread=False) as one,
            sqlite3.connect(path, check_same_thread=False) as two,
        ):
            first, second = SqliteSaver(one), SqliteSaver(two)
            first.setup()
            yield first, second
        return
    uri = postgres_uri()
    if not uri:
        pytest.fail(f"{POSTGRES_URI_ENV} is not set; `make test` sets it")
    from langgraph.checkpoint.postgres import PostgresSaver

    if kind == "postgres-pool":  # one connection only: the claim must not take it
        from psycopg.rows import dict_row
        from psycopg_pool import ConnectionPool

        kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
        with (
            ConnectionPool(uri, min_size=1, max_size=1, kwargs=kwargs, open=True) as pool,
            PostgresSaver.from_conn_string(uri) as second,
        ):
            first = PostgresSaver(pool)  # type: ignore[arg-type]
            first.setup()
            yield first, second
        return
    with (
        PostgresSaver.from_conn_string(uri) as first,
        PostgresSaver.from_conn_string(uri) as second,
    ):
        first.setup()
        yield first, second


@pytest.fixture(params=["sqlite", "postgres", "postgres-pool"])
def savers(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Any, Any]]:
    yield from _saver_pair(request.param, tmp_path)


def test_a_second_refine_on_a_running_thread_is_refused_naming_it(
    savers: tuple[Any, Any],
) -> None:
    first, second = savers
    thread = f"t-{uuid.uuid4().hex[:8]}"
    held = Held()
    done: list[Any] = []
    options: dict[str, Any] = {"max_iterations": 0, "thread_id": thread}
    runner = threading.Thread(
        target=lambda: done.append(
            refine(held, "T", lambda r, s: 0.5, checkpointer=first, **options)
        )
    )
    runner.start()
    try:
        assert held.started.wait(20)
        for saver in (first, second):  # the same saver object, and another on the same store
            other = Held()
            other.release.set()
            with pytest.raises(ThreadBusyError, match=f"thread '{thread}' is in use"):
                refine(other, "T", lambda r, s: 0.5, checkpointer=saver, **options)
            assert other.calls == 0  # refused before any call
        # Another thread of the same store is free.
        free = Held()
        free.release.set()
        refine(
            free,
            "T",
            lambda r, s: 0.5,
            checkpointer=second,
            max_iterations=0,
            thread_id="x" + thread,
        )
        assert free.calls == 1
    finally:
        held.release.set()
        runner.join(20)
    assert done and done[0].value == "draft"
    again = Held()
    again.release.set()
    refine(again, "T", lambda r, s: 0.5, checkpointer=second, **options)  # the claim was given back
    assert again.calls == 1


@pytest.mark.slow
def test_a_second_run_command_is_refused_and_a_killed_writers_thread_resumes(
    cli: Any, openai_server: Any, tmp_path: Path
) -> None:
    release = threading.Event()
    server = openai_server(held_at(3, release))
    db = tmp_path / "runs.sqlite"
    args = [*run_args(server, db), "--thread", "shared"]
    env = {k: v for k, v in os.environ.items() if k not in MODEL_ENV}
    proc = subprocess.Popen(
        [sys.executable, "-m", "langgraph_refine.cli", *args],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while len(server.requests) < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(server.requests) == 3, "the first run did not reach its third call"
        second = cli(*args)
        assert second.code == 1, second.err
        assert (
            f"thread 'shared' is in use: another run is writing it (process {proc.pid}"
            in second.err
        )
        assert len(server.requests) == 3  # refused before any call
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        release.set()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    resumed = cli(*args)
    assert resumed.code == 0, resumed.err
    assert len(server.requests) <= CALLS + 1  # at most the call in flight paid twice


@pytest.mark.slow
def test_a_killed_postgres_writer_leaves_no_claim() -> None:
    uri = postgres_uri()
    if not uri:
        pytest.fail(f"{POSTGRES_URI_ENV} is not set; `make test` sets it")
    from langgraph.checkpoint.postgres import PostgresSaver

    thread = f"k-{uuid.uuid4().hex[:8]}"
    holder = textwrap.dedent(
        f"""
        import sys, time
        from langgraph.checkpoint.postgres import PostgresSaver
        from langgraph_refine._loop._claim import claim_thread
        with PostgresSaver.from_conn_string({uri!r}) as saver:
            with claim_thread(saver, {{"configurable": {{"thread_id": {thread!r}}}}}):
                print("held", flush=True)
                time.sleep(60)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", holder], stdout=subprocess.PIPE, text=True)
    config: Any = {"configurable": {"thread_id": thread}}
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        with PostgresSaver.from_conn_string(uri) as saver:
            with pytest.raises(ThreadBusyError), claim_thread(saver, config):
                pass
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
            deadline = time.monotonic() + 10
            while True:  # the server ends the dead writer's session as its socket closes
                try:
                    with claim_thread(saver, config):
                        break
                except ThreadBusyError:
                    assert time.monotonic() < deadline, "the killed writer's claim stayed"
                    time.sleep(0.1)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@contextlib.asynccontextmanager
async def _async_saver_pair(kind: str, tmp_path: Path) -> AsyncIterator[tuple[Any, Any]]:
    if kind == "sqlite":
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        path = str(tmp_path / "runs.sqlite")
        async with (
            AsyncSqliteSaver.from_conn_string(path) as first,
            AsyncSqliteSaver.from_conn_string(path) as second,
        ):
            await first.setup()
            yield first, second
        return
    uri = postgres_uri()
    if not uri:
        pytest.fail(f"{POSTGRES_URI_ENV} is not set; `make test` sets it")
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    async with (
        AsyncPostgresSaver.from_conn_string(uri) as first,
        AsyncPostgresSaver.from_conn_string(uri) as second,
    ):
        await first.setup()
        yield first, second


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_arefine_on_async_savers_is_refused_while_the_thread_runs(
    kind: str, tmp_path: Path
) -> None:
    thread = f"a-{uuid.uuid4().hex[:8]}"
    started, release = asyncio.Event(), asyncio.Event()

    async def held(state: Any) -> str:
        started.set()
        await release.wait()
        return "draft"

    options: dict[str, Any] = {"max_iterations": 0, "thread_id": thread}
    async with _async_saver_pair(kind, tmp_path) as (first, second):
        running = asyncio.create_task(
            arefine(held, "T", lambda r, s: 0.5, checkpointer=first, **options)
        )
        await asyncio.wait_for(started.wait(), 20)
        with pytest.raises(ThreadBusyError, match=f"thread '{thread}' is in use"):
            await arefine(
                lambda state: "other", "T", lambda r, s: 0.5, checkpointer=second, **options
            )
        release.set()
        assert (await running).value == "draft"
        again = await arefine(
            lambda state: "again", "T", lambda r, s: 0.5, checkpointer=second, **options
        )
        assert again.value == "again"  # the claim was given back


def test_giving_a_claim_back_does_not_wait_for_a_locked_file(tmp_path: Path) -> None:
    # An interrupted run's async saver may hold the file's write lock while the run is
    # cancelled; the claim is given back without waiting for it (its row is void once
    # the process is gone), so an interrupted command exits at once.
    from langgraph_refine._loop._claim import Lease

    path = str(tmp_path / "c.sqlite")
    lease = Lease(path, "thread-1")
    lease.take()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # the saver's open transaction
    try:
        giving = threading.Thread(target=lease.give_back)
        giving.start()
        giving.join(timeout=5)
        assert not giving.is_alive(), "give_back waited for the locked file"
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    with contextlib.closing(sqlite3.connect(path)) as conn:
        (row,) = conn.execute("SELECT pid FROM refine_writers").fetchall()
    assert row == (os.getpid(),)  # left behind while locked: void once this process ends

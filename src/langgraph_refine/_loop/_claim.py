"""One writer per thread: a run claims its checkpoint thread for as long as it runs.

Two runs writing one thread at once would both pay for every round and interleave their
checkpoints, so a second run on a thread already running is refused at once, naming it
(`ThreadBusyError`). The claim is held where the checkpoints are, so it holds across
processes, and it must not outlive a writer that crashed, or the thread could never be
resumed:

- PostgreSQL: a session advisory lock, on the saver's connection (or, for a pool, on a
  connection of its own) for the run. The server drops it when that session ends, however
  the writer ended (a `kill -9` closes its socket).
- SQLite: a row in a `refine_writers` table of the same file, naming the writer's host and
  process and renewed every `LEASE_SECONDS / 3`. It is stale, and taken over, when its
  process is gone (same host) or when it was not renewed for `LEASE_SECONDS` (a host that
  died, or a process id reused).
- Any saver, within one process: a claim per (saver, thread), so two `refine` calls in
  threads of one program cannot share a thread either.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import sqlite3
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

from langchain_core.runnables import RunnableConfig

from langgraph_refine._errors import ThreadBusyError

LEASE_SECONDS = 30.0
"""How long a SQLite claim lasts without renewal (its writer renews it every third)."""

_LOCK_PREFIX = "langgraph-refine thread "
"""Prefixed to a thread id before hashing it to an advisory lock key (other lock users)."""

_held: set[tuple[int, str]] = set()
"""The (store, thread) pairs this process's runs hold."""
_held_lock = threading.Lock()


def thread_of(config: RunnableConfig) -> str | None:
    """The thread id of a run config (None when it has none)."""
    thread = (config.get("configurable") or {}).get("thread_id")
    return None if thread is None else str(thread)


@contextlib.contextmanager
def claim_thread(saver: Any, config: RunnableConfig) -> Iterator[None]:
    """Hold `config`'s thread of `saver` for the block (sync savers).

    Raises:
        ThreadBusyError: If another run holds the thread.
    """
    thread = thread_of(config)
    with contextlib.ExitStack() as held:
        if saver is not None and thread is not None:
            held.enter_context(_in_process(saver, thread))
            if _is_postgres(saver):
                held.enter_context(_postgres_claim(saver, thread))
            else:
                held.enter_context(_sqlite_claim(_sqlite_path(saver), thread))
        yield


@contextlib.asynccontextmanager
async def aclaim_thread(saver: Any, config: RunnableConfig) -> AsyncIterator[None]:
    """Async `claim_thread` (async savers, or the in-memory one)."""
    thread = thread_of(config)
    async with contextlib.AsyncExitStack() as held:
        if saver is not None and thread is not None:
            held.enter_context(_in_process(saver, thread))
            if _is_postgres(saver):
                await held.enter_async_context(_apostgres_claim(saver, thread))
            else:
                path = await _asqlite_path(saver)
                await held.enter_async_context(_asqlite_claim(path, thread))
        yield


@contextlib.contextmanager
def _in_process(saver: Any, thread: str) -> Iterator[None]:
    # By what the saver stores into: LangGraph may run a copy of the saver object (with
    # its own serializer), which shares its connection; and a PostgreSQL session may take
    # its own advisory lock twice.
    shared = (getattr(saver, "conn", None), getattr(saver, "storage", None))
    store = next((part for part in shared if part is not None), saver)
    key = (id(store), thread)
    with _held_lock:
        if key in _held:
            raise ThreadBusyError(thread, "another run of this program is writing it")
        _held.add(key)
    try:
        yield
    finally:
        with _held_lock:
            _held.discard(key)


def _is_postgres(saver: Any) -> bool:
    return type(saver).__module__.startswith("langgraph.checkpoint.postgres")


# --- PostgreSQL: a session advisory lock -------------------------------------------------

_TRY_LOCK = "SELECT pg_try_advisory_lock(hashtextextended(%s, 0)) AS locked"
_UNLOCK = "SELECT pg_advisory_unlock(hashtextextended(%s, 0))"


@contextlib.contextmanager
def _postgres_claim(saver: Any, thread: str) -> Iterator[None]:
    key = _LOCK_PREFIX + thread
    pool = saver.conn if hasattr(saver.conn, "getconn") else None
    if pool is None:  # the saver's one connection, between its own statements
        with saver.lock:
            locked = _first(saver.conn.execute(_TRY_LOCK, (key,)).fetchone())
        if not locked:
            raise ThreadBusyError(thread, "another run is writing it (a PostgreSQL session)")
        try:
            yield
        finally:
            with saver.lock:
                saver.conn.execute(_UNLOCK, (key,))
        return
    import psycopg

    # A connection of its own, not one of the pool's: the run may need all of those.
    with psycopg.connect(pool.conninfo, **{**(pool.kwargs or {}), "autocommit": True}) as conn:
        if not _first(conn.execute(_TRY_LOCK, (key,)).fetchone()):
            raise ThreadBusyError(thread, "another run is writing it (a PostgreSQL session)")
        yield  # the lock ends with the connection


@contextlib.asynccontextmanager
async def _apostgres_claim(saver: Any, thread: str) -> AsyncIterator[None]:
    key = _LOCK_PREFIX + thread
    pool = saver.conn if hasattr(saver.conn, "getconn") else None
    if pool is None:
        async with saver.lock:
            row = await (await saver.conn.execute(_TRY_LOCK, (key,))).fetchone()
        if not _first(row):
            raise ThreadBusyError(thread, "another run is writing it (a PostgreSQL session)")
        try:
            yield
        finally:
            async with saver.lock:
                await saver.conn.execute(_UNLOCK, (key,))
        return
    import psycopg

    kwargs = {**(pool.kwargs or {}), "autocommit": True}
    async with await psycopg.AsyncConnection.connect(pool.conninfo, **kwargs) as conn:
        if not _first(await (await conn.execute(_TRY_LOCK, (key,))).fetchone()):
            raise ThreadBusyError(thread, "another run is writing it (a PostgreSQL session)")
        yield


def _first(row: Any) -> Any:
    """A one-column row's value (the savers' connections return rows as dicts)."""
    return row["locked"] if isinstance(row, dict) else row[0]


# --- SQLite: a renewed lease row -----------------------------------------------------------


def _sqlite_path(saver: Any) -> str | None:
    conn = getattr(saver, "conn", None)
    if not isinstance(conn, sqlite3.Connection):
        return None  # the in-memory saver, or one we do not know: this process only
    with getattr(saver, "lock", contextlib.nullcontext()):
        rows = conn.execute("PRAGMA database_list").fetchall()
    return _main_file(rows)


async def _asqlite_path(saver: Any) -> str | None:
    conn = getattr(saver, "conn", None)
    if isinstance(conn, sqlite3.Connection):  # a saver whose async methods run its sync ones
        return _sqlite_path(saver)
    if conn is None or type(conn).__module__.split(".")[0] != "aiosqlite":
        return None
    async with conn.execute("PRAGMA database_list") as cursor:
        rows = await cursor.fetchall()
    return _main_file(rows)


def _main_file(rows: Any) -> str | None:
    files = [str(row[2]) for row in rows if row[1] == "main"]
    return files[0] if files and files[0] else None  # "" is an in-memory database


@contextlib.contextmanager
def _sqlite_claim(path: str | None, thread: str) -> Iterator[None]:
    if path is None:
        yield
        return
    lease = Lease(path, thread)
    lease.take()
    try:
        yield
    finally:
        lease.give_back()


@contextlib.asynccontextmanager
async def _asqlite_claim(path: str | None, thread: str) -> AsyncIterator[None]:
    # In a worker thread: the event loop must keep running while the claim waits for the
    # file's write lock, which an async saver's own transaction may hold until the loop
    # lets it commit.
    if path is None:
        yield
        return
    lease = Lease(path, thread)
    await asyncio.to_thread(lease.take)
    try:
        yield
    finally:
        await asyncio.to_thread(lease.give_back)


class Lease:
    """A writer's row in `refine_writers`, renewed while it is held.

    The leases a process holds in one file share one connection and one renewing thread
    (`_LeaseFile`): a batch takes one per task, and a connection, a thread and a synced
    commit each would cost it more than its checkpoints.

    Args:
        path: The SQLite file.
        thread: What is claimed (a checkpoint thread, or a name such as a batch's).
    """

    def __init__(self, path: str, thread: str) -> None:
        self.path = path
        self.thread = thread
        self.owner = uuid.uuid4().hex
        self.host = socket.gethostname()

    def take(self) -> None:
        """Write this writer's row, unless a live writer's row is there.

        Raises:
            ThreadBusyError: Naming the live writer's process.
        """
        with _LeaseFile.of(self.path) as file:
            conn = file.connect(TAKE_WAIT)
            try:
                conn.execute("BEGIN IMMEDIATE")  # no other writer between the read and the write
                row = conn.execute(
                    "SELECT host, pid, beat FROM refine_writers WHERE thread_id = ?",
                    (self.thread,),
                ).fetchone()
                if row is not None and self._alive(*row):
                    host, pid, _ = row
                    raise ThreadBusyError(
                        self.thread, f"another run is writing it (process {pid} on {host})"
                    )
                conn.execute(
                    "INSERT OR REPLACE INTO refine_writers VALUES (?, ?, ?, ?, ?)",
                    (self.thread, self.owner, self.host, os.getpid(), time.time()),
                )
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                file.release(self)  # closes the file if no other lease of this process holds it
                raise
            file.hold(self)

    def _alive(self, host: str, pid: int, beat: float) -> bool:
        if time.time() - beat > LEASE_SECONDS:
            return False  # not renewed: its writer is gone, wherever it ran
        return host != self.host or _process_exists(pid)

    def give_back(self) -> None:
        """Stop renewing and delete this writer's row.

        It waits a second at most for a locked file (an interrupted run's saver may hold
        it): a row left behind is void once this process is gone (`_alive`), so an
        interrupt never waits on it.
        """
        with _LeaseFile.of(self.path) as file:
            with contextlib.suppress(sqlite3.Error):
                file.connect(GIVE_BACK_WAIT).execute(
                    "DELETE FROM refine_writers WHERE thread_id = ? AND owner = ?",
                    (self.thread, self.owner),
                )
            file.release(self)


TAKE_WAIT = 10.0
"""Seconds a take waits for the file's write lock (an async saver's transaction may hold
it while its run is being cancelled)."""
GIVE_BACK_WAIT = 1.0
"""Seconds a give-back or a renewal waits for it (see `Lease.give_back`)."""


class _LeaseFile:
    """This process's leases in one SQLite file: one connection, one renewing thread.

    Used as a context manager, it holds the file's lock: one statement at a time on the
    shared connection. The connection is opened by the first lease taken and closed
    with the last one given back, with the renewer.
    """

    _files: dict[tuple[int, str], _LeaseFile] = {}  # by process too: a forked child has none
    _files_lock = threading.Lock()

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._held: dict[str, Lease] = {}
        self._stop = threading.Event()

    @classmethod
    def of(cls, path: str) -> _LeaseFile:
        """The file's leases (one object per path in this process)."""
        with cls._files_lock:
            key = (os.getpid(), path)
            if key not in cls._files:
                cls._files[key] = cls(path)
            return cls._files[key]

    def __enter__(self) -> _LeaseFile:
        self._lock.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self._lock.release()

    def connect(self, wait: float) -> sqlite3.Connection:
        """The shared connection (opened if need be), its statements waiting `wait` s."""
        if self._conn is None:
            conn = sqlite3.connect(
                self.path, timeout=wait, isolation_level=None, check_same_thread=False
            )
            try:
                # A lease row need not outlive the machine, only the process: no fsync.
                conn.execute("PRAGMA synchronous=NORMAL")
                conn.execute(
                    "CREATE TABLE IF NOT EXISTS refine_writers (thread_id TEXT PRIMARY KEY, "
                    "owner TEXT NOT NULL, host TEXT NOT NULL, pid INTEGER NOT NULL, "
                    "beat REAL NOT NULL)"
                )
            except BaseException:
                conn.close()
                raise
            self._conn = conn
        self._conn.execute(f"PRAGMA busy_timeout = {int(wait * 1000)}")
        return self._conn

    def hold(self, lease: Lease) -> None:
        """Renew `lease` from now on (the renewer starts with the first lease)."""
        if not self._held:
            self._stop = threading.Event()
            threading.Thread(
                target=self._renew, args=(self._stop,), daemon=True, name="refine-lease"
            ).start()
        self._held[lease.owner] = lease

    def release(self, lease: Lease) -> None:
        """Stop renewing `lease`; the last one stops the renewer and closes the file."""
        self._held.pop(lease.owner, None)
        if not self._held:
            self._stop.set()
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def _renew(self, stop: threading.Event) -> None:
        while not stop.wait(LEASE_SECONDS / 3):
            with self, contextlib.suppress(sqlite3.Error):
                if stop.is_set():
                    return
                rows = [(time.time(), held.thread, owner) for owner, held in self._held.items()]
                self.connect(GIVE_BACK_WAIT).executemany(  # one missed is made at the next beat
                    "UPDATE refine_writers SET beat = ? WHERE thread_id = ? AND owner = ?", rows
                )


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True

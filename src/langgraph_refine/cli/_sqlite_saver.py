"""The SQLite checkpointer of `run --checkpoint` and `batch`: its statements run on the event loop.

LangGraph's `AsyncSqliteSaver` sends every statement to a worker thread of its own
(aiosqlite) and waits for the reply: a put is three round trips to that thread and an
`fsync`, one at a time for the whole command. A batch of 64 tasks at once waits in that
line: with it, a batch took three times as long. SQLite needs no thread for this: a
statement on a local file takes microseconds once no commit waits for the disk, less
than a hop to a thread and back.

So the command opens LangGraph's `SqliteSaver` (the same tables and rows, so a file
either saver wrote is read by the other) and runs its statements where the loop runs
(`LoopSqliteSaver`, which also lets the puts of one turn of the loop share a commit),
with the file in WAL mode and `synchronous=NORMAL` (`PRAGMAS`): a commit is in the file
as soon as it returns, so a process killed at any point loses no committed checkpoint;
only a crash of the machine itself may lose the last few.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import sqlite3
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
)
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.sqlite import SqliteSaver

from langgraph_refine._loop._driver import strict_serde
from langgraph_refine.cli._errors import CliError

PRAGMAS = ("PRAGMA journal_mode=WAL", "PRAGMA synchronous=NORMAL")
"""How the checkpoint file is written: a write-ahead log, synced at its checkpoints only.

WAL is what LangGraph's savers set up; `synchronous=NORMAL` drops the `fsync` of every
commit, which WAL makes safe against a killed process (the log is in the operating
system's hands as the commit returns), not against a power cut."""

T = TypeVar("T")

BUSY_SECONDS = 5.0
"""How long a statement waits while another process writes the file (SQLite's default)."""


_GROUPED: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "langgraph_refine_grouped_commit", default=False
)
"""Set while an async put runs its statements: the commit is left to its group."""


class LoopSqliteSaver(SqliteSaver):
    """LangGraph's `SqliteSaver`, whose async methods run its statements on the event loop.

    Each async method is its sync counterpart, called directly: no worker thread, no
    queue. A statement holds the loop for its own microseconds. The puts made in one turn
    of the event loop share one commit, at the start of the next turn (a batch's tasks
    finish their steps together), and each put returns only once it is committed, as
    `SqliteSaver`'s does: what a step wrote is in the file before the step after it runs.
    """

    def __init__(self, conn: sqlite3.Connection, *, serde: SerializerProtocol | None = None):
        super().__init__(conn, serde=serde)
        self._group: asyncio.Future[None] | None = None

    @contextlib.contextmanager
    def cursor(self, transaction: bool = True) -> Iterator[sqlite3.Cursor]:
        """`SqliteSaver.cursor`; within an async put, its commit is left to the group."""
        with super().cursor(transaction=transaction and not _GROUPED.get()) as cur:
            yield cur

    async def _grouped(self, put: Callable[[], T]) -> T:
        """Run the statements of `put` now and return once their group is committed."""
        token = _GROUPED.set(True)
        try:
            done = put()
        finally:
            _GROUPED.reset(token)
        if self._group is None:
            loop = asyncio.get_running_loop()
            self._group = loop.create_future()
            loop.call_soon(self._commit_group)
        await asyncio.shield(self._group)  # a put cancelled meanwhile is committed all the same
        return done

    def _commit_group(self) -> None:
        group, self._group = self._group, None
        if group is None:  # committed already (a close committed the group left open)
            return
        try:
            with self.lock:
                self.conn.commit()
        except sqlite3.Error as exc:  # every put of the group fails, and none is kept
            with self.lock, contextlib.suppress(sqlite3.Error):
                self.conn.rollback()
            group.set_exception(exc)
        else:
            group.set_result(None)

    def flush(self) -> None:
        """Commit the group in progress, if any (before the connection is closed)."""
        if self._group is not None:
            with self.lock, contextlib.suppress(sqlite3.Error):  # else that step is run again
                self.conn.commit()

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """`get_tuple`, on the event loop."""
        return self.get_tuple(config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """`list`, on the event loop."""
        for found in self.list(config, filter=filter, before=before, limit=limit):
            yield found

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """`put`, on the event loop, committed with the others of its turn."""
        return await self._grouped(lambda: self.put(config, checkpoint, metadata, new_versions))

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """`put_writes`, on the event loop, committed with the others of its turn."""
        await self._grouped(lambda: self.put_writes(config, writes, task_id, task_path))

    async def adelete_thread(self, thread_id: str) -> None:
        """`delete_thread`, on the event loop."""
        self.delete_thread(thread_id)

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """`get_delta_channel_history`, on the event loop."""
        return self.get_delta_channel_history(config=config, channels=channels)


@contextlib.contextmanager
def open_sqlite_saver(path: Path) -> Iterator[LoopSqliteSaver]:
    """The checkpointer on the SQLite file `path` (created if missing), closed at the end.

    Raises:
        CliError: With exit code 2, if the file is no SQLite database, or one whose
            `checkpoints` or `writes` table is some other program's.
    """
    conn = sqlite3.connect(path, timeout=BUSY_SECONDS, check_same_thread=False)
    try:
        try:
            for pragma in PRAGMAS:
                conn.execute(pragma)
            saver = LoopSqliteSaver(conn, serde=strict_serde())
            saver.setup()
        except sqlite3.DatabaseError as exc:
            raise CliError(
                f"--checkpoint {path} is not a usable SQLite database: {exc}", exit_code=2
            ) from None
        _check_checkpoint_tables(conn, path)
        try:
            yield saver
        finally:
            saver.flush()  # a group the loop did not get to commit (an interrupted command)
    finally:
        conn.close()


def _check_checkpoint_tables(conn: sqlite3.Connection, path: Path) -> None:
    """Refuse a SQLite file whose `checkpoints` or `writes` table is some other program's.

    Raises:
        CliError: Naming the file and what to give instead.
    """
    try:
        for probe in _CHECKPOINT_PROBES:
            conn.execute(probe).close()
    except sqlite3.DatabaseError as exc:
        raise CliError(
            f"--checkpoint {path} is a SQLite database but not a checkpoint file ({exc}); "
            "give a new file name, or a file run or batch wrote with --checkpoint",
            exit_code=2,
        ) from None


_CHECKPOINT_PROBES = (
    "SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, "
    "metadata FROM checkpoints LIMIT 0",
    "SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, value "
    "FROM writes LIMIT 0",
)
"""Queries that fail on tables that are not LangGraph's SQLite checkpoint tables."""

"""Where a local batch keeps the strategy record: in memory (default), a SQLite file, or nowhere.

`batch` shares one LangGraph store over its tasks, so explore learns from the tasks
before (see `langgraph_refine._records._record`). By default the store lives in memory for one
batch; `--store PATH` keeps it in a SQLite file (`langgraph.store.sqlite`), so the next
batch starts from what this one learned; `--no-store` runs every task on its own. With
`--server` the server's own store is used, so neither option applies.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore

from langgraph_refine._decisions._strategy import MoveStats
from langgraph_refine._records._record import StrategyRecord, aread_records, read_records
from langgraph_refine.cli._errors import USAGE, CliError

if TYPE_CHECKING:
    from langgraph.store.sqlite.aio import AsyncSqliteStore


@dataclass(frozen=True)
class StoreChoice:
    """The batch's store: off, in memory (`path` None), or a SQLite file.

    Attributes:
        enabled: False with `--no-store`.
        path: The SQLite file of `--store PATH`, else None.
    """

    enabled: bool = True
    path: Path | None = None

    @classmethod
    def from_cli(cls, path: Path | None, no_store: bool, server: str | None) -> StoreChoice:
        """Check the store options of `batch`.

        Raises:
            CliError: For `--store` with `--no-store`, either with `--server`, or a
                `--store` path that cannot be a SQLite file.
        """
        if path is not None and no_store:
            raise CliError(
                f"--store {path} and --no-store contradict each other; keep one "
                "(--store keeps the strategy record in that file, --no-store keeps none)",
                exit_code=2,
            )
        if server is not None and (path is not None or no_store):
            given = "--no-store" if no_store else f"--store {path}"
            raise CliError(
                f"{given} does not apply with --server: the server keeps the strategy record "
                "in its own store; drop the option",
                exit_code=2,
            )
        if path is not None:
            check_store_path(path, writable=True)
        return cls(enabled=not no_store, path=path)

    @contextlib.asynccontextmanager
    async def open(self) -> AsyncIterator[BaseStore | None]:
        """The store for the batch's runs (None with `--no-store`), closed at the end.

        Raises:
            CliError: If the SQLite file cannot be opened or is not a store.
        """
        if not self.enabled:
            yield None
            return
        if self.path is None:
            yield InMemoryStore()
            return
        from langgraph.store.sqlite.aio import AsyncSqliteStore

        async with contextlib.AsyncExitStack() as stack:
            try:
                store = await stack.enter_async_context(
                    AsyncSqliteStore.from_conn_string(str(self.path))
                )
                await _setup(store)
            except sqlite3.Error as exc:
                raise CliError(_not_a_store(self.path, exc), USAGE) from None
            yield store


SETUP_TRIES = 20
"""Tries of a SQLite store's setup while another process sets up the same new file."""


async def _setup(store: AsyncSqliteStore) -> None:
    """`store.setup()`, tried again while another batch sets the same new file up.

    Batches started at once on a new `--store` file (docs/cli.md splits a large batch so)
    both run the store's migrations, and one finds a step the other already took: its
    version already recorded, its column already added, or the file locked. Each try
    applies only the steps not yet recorded, so a later one succeeds. A file that is no
    store fails otherwise (`sqlite3.DatabaseError`) and is not tried again.
    """
    for attempt in range(SETUP_TRIES):
        try:
            await store.setup()
            return
        except (sqlite3.IntegrityError, sqlite3.OperationalError):
            if attempt == SETUP_TRIES - 1:
                raise
            await asyncio.sleep(0.02 * (attempt + 1))


def check_store_path(path: Path, *, writable: bool) -> None:
    """Refuse a store path that is a folder, in a missing folder, or not writable.

    Raises:
        CliError: Saying what is wrong with the path and how to fix it.
    """
    if path.is_dir():
        raise CliError(
            f"--store {path} is a folder; give a file name, e.g. {path / 'store.sqlite'}", USAGE
        )
    if not path.parent.is_dir():
        raise CliError(f"--store {path}: the folder {path.parent} does not exist", USAGE)
    if not writable:
        if not path.exists():
            raise CliError(
                f"--store {path} does not exist; give the file a batch wrote with --store", USAGE
            )
        return
    target = path if path.exists() else path.parent
    if not os.access(target, os.W_OK):
        raise CliError(f"--store {path} is not writable: check the permissions of {target}", USAGE)
    if path.exists():  # checked before any task runs (and before --out is created)
        try:
            conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
            try:
                conn.execute("SELECT name FROM sqlite_master LIMIT 1").fetchall()
            finally:
                conn.close()
        except sqlite3.Error as exc:
            raise CliError(_not_a_store(path, exc), USAGE) from None


def read_store_records(path: Path) -> dict[str, StrategyRecord]:
    """The strategy records in a SQLite store file (for `report --store`).

    Raises:
        CliError: If the file is missing or not a store.
    """
    check_store_path(path, writable=False)
    from langgraph.store.sqlite import SqliteStore

    try:
        # Read only: a report never changes (or creates) the record.
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, isolation_level=None)
    except sqlite3.Error as exc:
        raise CliError(_not_a_store(path, exc), USAGE) from None
    try:
        return read_records(SqliteStore(conn))
    except sqlite3.Error as exc:
        raise CliError(_not_a_store(path, exc), USAGE) from None
    finally:
        conn.close()


def _not_a_store(path: Path, exc: BaseException) -> str:
    return (
        f"--store {path} is not a usable SQLite store ({exc}); give a new file name or one a "
        "batch wrote with --store"
    )


def describe_moves(moves: dict[str, MoveStats]) -> str:
    """One line per record: `refine 12 rounds, raised the best 3 (25%), fell 8; ...`."""
    if not moves:
        return "no rounds yet"
    parts = []
    for kind, stats in sorted(moves.items()):
        share = f" ({stats.raised / stats.rounds:.0%})" if stats.rounds else ""
        parts.append(
            f"{kind} {stats.rounds} round{'s' if stats.rounds != 1 else ''}, raised the best "
            f"{stats.raised}{share}, fell {stats.fell}"
        )
    return "; ".join(parts)


async def store_summary(store: BaseStore | None) -> list[str]:
    """`strategy record <key>: <moves>` lines for the records in a batch's store."""
    if store is None:
        return []
    records = await aread_records(store)
    return [
        f"strategy record {key}: {describe_moves(record.moves)}" for key, record in records.items()
    ]

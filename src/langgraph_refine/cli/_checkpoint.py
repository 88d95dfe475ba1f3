"""What `--checkpoint` names: a SQLite file or a PostgreSQL database, read in one place.

`run` and `batch` take the same value: a path (a SQLite file, made on first use) or a
`postgresql://` / `postgres://` URI (the database's checkpoint tables, set up on first
use). `open_saver` turns it into the async checkpointer both commands run on; the
thread claims follow the saver's kind (`_loop._claim`), and the command printed after
an interruption repeats the value as it was typed.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from langgraph.checkpoint.base import BaseCheckpointSaver

from langgraph_refine._loop._driver import strict_serde
from langgraph_refine.cli._errors import USAGE, CliError

POSTGRES_SCHEMES = ("postgresql://", "postgres://")
"""How a `--checkpoint` value names a PostgreSQL database (libpq's URI schemes)."""


def is_postgres(value: str | Path) -> bool:
    """True if a `--checkpoint` value is a PostgreSQL URI rather than a SQLite path.

    Example:
        >>> is_postgres("postgresql://postgres@127.0.0.1:5432/test"), is_postgres("runs.sqlite")
        (True, False)
    """
    return isinstance(value, str) and value.lower().startswith(POSTGRES_SCHEMES)


def shown(value: str | Path) -> str:
    """A `--checkpoint` value as messages show it: a URI without its password.

    Example:
        >>> shown("postgresql://me:secret@db.example:5432/runs")
        'postgresql://me:***@db.example:5432/runs'
    """
    if not is_postgres(value):
        return str(value)
    parts = urlsplit(str(value))
    if parts.password is None:
        return str(value)
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


@contextlib.asynccontextmanager
async def open_saver(value: str | Path | None) -> AsyncIterator[BaseCheckpointSaver[Any]]:
    """The checkpointer a `--checkpoint` value names, open for the block.

    Args:
        value: A SQLite path, a PostgreSQL URI, or None (an in-memory checkpointer).

    Raises:
        CliError: With exit code 2, if the database cannot be reached or used (naming it
            without its password), or its checkpointer is not installed.
    """
    if value is not None and is_postgres(value):
        async with _open_postgres(str(value)) as saver:
            yield saver
        return
    from langgraph_refine.cli._single import open_checkpointer

    async with open_checkpointer(None if value is None else Path(value)) as saver:
        yield saver


@contextlib.asynccontextmanager
async def _open_postgres(uri: str) -> AsyncIterator[BaseCheckpointSaver[Any]]:
    """LangGraph's async PostgreSQL checkpointer on one connection, its tables set up."""
    try:
        import psycopg
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    except ImportError:
        raise CliError(
            f"--checkpoint {shown(uri)} needs the PostgreSQL checkpointer: "
            "pip install 'langgraph-refine[postgres]'",
            USAGE,
        ) from None
    async with contextlib.AsyncExitStack() as stack:
        try:  # only opening is a usage error: a failure later is the run's own
            saver = await stack.enter_async_context(
                AsyncPostgresSaver.from_conn_string(uri, serde=strict_serde())
            )
            await saver.setup()
        except (psycopg.Error, ValueError) as exc:
            raise CliError(
                f"--checkpoint {shown(uri)}: cannot use that PostgreSQL database "
                f"({' '.join(str(exc).split())}); check the URI and that the server is running",
                USAGE,
            ) from None
        yield saver

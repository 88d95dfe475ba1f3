"""A SQLite-backed LangChain model cache, so a rerun of an unchanged loop makes no model calls.

LangChain's chat models look every call up in a `BaseCache` before calling the provider
(the key is the serialised prompt plus the model's parameters). langchain-core ships only an
in-memory cache; the SQLite one lives in the sunset `langchain-community` package, so this
module implements the same table on the standard library's `sqlite3` instead.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path
from typing import Any

from langchain_core.caches import RETURN_VAL_TYPE, BaseCache
from langchain_core.messages import message_to_dict, messages_from_dict
from langchain_core.outputs import ChatGeneration, Generation

_SCHEMA = """
CREATE TABLE IF NOT EXISTS model_cache (
    prompt TEXT NOT NULL,
    llm TEXT NOT NULL,
    idx INTEGER NOT NULL,
    response TEXT NOT NULL,
    PRIMARY KEY (prompt, llm, idx)
)
"""


class SQLiteCache(BaseCache):
    """LangChain model cache stored in one SQLite file.

    Safe to share between threads (one connection behind a lock) and between processes
    (SQLite's own locking). Generations are stored as JSON, never as pickles or
    LangChain-serialised objects, so reading a cache file cannot run code.

    Args:
        path: The database file; created with its table if missing.

    Example:
        >>> from langchain_core.globals import set_llm_cache
        >>> set_llm_cache(SQLiteCache(".refine-cache.sqlite"))  # doctest: +SKIP
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(self.path, check_same_thread=False, timeout=30.0)
        with self._lock, self._conn:
            self._conn.execute(_SCHEMA)

    def lookup(self, prompt: str, llm_string: str) -> RETURN_VAL_TYPE | None:
        """The cached generations for this prompt and model, or None on a miss."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT response FROM model_cache WHERE prompt = ? AND llm = ? ORDER BY idx",
                (prompt, llm_string),
            ).fetchall()
        if not rows:
            return None
        try:
            return [_load(row[0]) for row in rows]
        except (ValueError, KeyError, TypeError):
            return None  # an entry this version cannot read is a miss, then overwritten

    def update(self, prompt: str, llm_string: str, return_val: RETURN_VAL_TYPE) -> None:
        """Store the generations of one model call."""
        rows = [(prompt, llm_string, i, _dump(gen)) for i, gen in enumerate(return_val)]
        with self._lock, self._conn:
            self._conn.execute(
                "DELETE FROM model_cache WHERE prompt = ? AND llm = ?", (prompt, llm_string)
            )
            self._conn.executemany(
                "INSERT INTO model_cache (prompt, llm, idx, response) VALUES (?, ?, ?, ?)", rows
            )

    def clear(self, **kwargs: Any) -> None:
        """Delete every cached entry."""
        with self._lock, self._conn:
            self._conn.execute("DELETE FROM model_cache")

    def count(self) -> int:
        """Number of cached generations."""
        with self._lock:
            row = self._conn.execute("SELECT COUNT(*) FROM model_cache").fetchone()
        return int(row[0])

    def close(self) -> None:
        """Close the database connection."""
        with self._lock:
            self._conn.close()


def _dump(generation: Generation) -> str:
    info = generation.generation_info
    if isinstance(generation, ChatGeneration):
        return json.dumps(
            {"message": message_to_dict(generation.message), "generation_info": info},
            default=str,
        )
    return json.dumps({"text": generation.text, "generation_info": info}, default=str)


def _load(text: str) -> Generation:
    data = json.loads(text)
    if "message" in data:
        (message,) = messages_from_dict([data["message"]])
        return ChatGeneration(message=message, generation_info=data.get("generation_info"))
    return Generation(text=data["text"], generation_info=data.get("generation_info"))

"""`--cache`: LangChain's model cache on SQLite; an unchanged rerun makes no model calls."""

# ruff: noqa: F811 - pytest fixtures are imported from the helper module

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration, Generation

from langgraph_refine.cli._cache import SQLiteCache
from tests.test_cli_helpers import cli, openai_server, per_task  # noqa: F401 - fixtures


def summary(data: dict[str, Any]) -> tuple[Any, ...]:
    return (
        data["value"],
        data["score_history"],
        data["stop_reason"],
        [a["response"] for a in data["attempts"]],
        [a["evaluation"]["feedback"] for a in data["attempts"]],
    )


def test_rerunning_an_unchanged_loop_makes_no_model_calls(
    cli: Any, openai_server: Any, tmp_path: Path
) -> None:
    server = openai_server(per_task())
    args = ["run", "Write.", "--model", "m", "--base-url", server.base_url, "--json"]
    cache = str(tmp_path / "cache.sqlite")
    first = cli(*args, "--cache", cache)
    assert first.code == 0, first.err
    calls = len(server.requests)
    assert calls == 6  # 3 rounds, generator + judge

    second = cli(*args, "--cache", cache)
    assert second.code == 0, second.err
    assert len(server.requests) == calls  # every call answered from the cache
    assert summary(second.json()) == summary(first.json())

    # A changed task is a different prompt: the model is called again.
    cli(
        "run",
        "Write more.",
        "--model",
        "m",
        "--base-url",
        server.base_url,
        "--json",
        "--cache",
        cache,
    )
    assert len(server.requests) == calls + 6
    # Without --cache nothing is reused.
    cli(*args)
    assert len(server.requests) == calls + 12


def test_a_cached_batch_costs_nothing_the_second_time(
    cli: Any, openai_server: Any, tmp_path: Path
) -> None:
    server = openai_server(per_task())
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"id": i, "task": f"task {i}"}) + "\n" for i in range(4)))
    cache = str(tmp_path / "cache.sqlite")
    base = [
        "batch",
        str(src),
        "--model",
        "m",
        "--base-url",
        server.base_url,
        "--cache",
        cache,
        "-c",
        "4",
        # No strategy record: each loop's choices depend on its task alone, not on which
        # concurrent loop finished first, so the second batch asks exactly the same.
        "--no-store",
    ]
    assert cli(*base, "--out", str(tmp_path / "a.jsonl")).code == 0
    calls = len(server.requests)
    assert calls == 4 * 6
    assert cli(*base, "--out", str(tmp_path / "b.jsonl")).code == 0
    assert len(server.requests) == calls

    def rows(name: str) -> dict[Any, Any]:
        lines = (tmp_path / name).read_text().splitlines()
        return {d["id"]: summary(d) for d in map(json.loads, lines)}

    assert rows("a.jsonl") == rows("b.jsonl")


def test_cache_round_trip_keeps_messages_and_usage(tmp_path: Path) -> None:
    cache = SQLiteCache(tmp_path / "c.sqlite")
    message = AIMessage(
        "hello",
        usage_metadata={"input_tokens": 3, "output_tokens": 1, "total_tokens": 4},
        response_metadata={"finish_reason": "stop"},
    )
    cache.update("prompt", "llm", [ChatGeneration(message=message, generation_info={"x": 1})])
    cache.update("plain", "llm", [Generation(text="t1"), Generation(text="t2")])
    assert cache.lookup("missing", "llm") is None
    (got,) = cache.lookup("prompt", "llm") or []
    assert isinstance(got, ChatGeneration) and isinstance(got.message, AIMessage)
    assert got.message.content == "hello" and got.generation_info == {"x": 1}
    assert got.message.usage_metadata == message.usage_metadata
    assert [g.text for g in cache.lookup("plain", "llm") or []] == ["t1", "t2"]
    # Updating replaces; entries survive reopening; clear empties the file.
    cache.update("plain", "llm", [Generation(text="t3")])
    cache.close()
    reopened = SQLiteCache(tmp_path / "c.sqlite")
    assert [g.text for g in reopened.lookup("plain", "llm") or []] == ["t3"]
    assert reopened.count() == 2
    reopened.clear()
    assert reopened.count() == 0


def test_cache_entries_are_plain_json(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    cache = SQLiteCache(path)
    cache.update("p", "llm", [ChatGeneration(message=AIMessage("hi"))])
    cache.close()
    with sqlite3.connect(path) as conn:
        (stored,) = conn.execute("SELECT response FROM model_cache").fetchone()
    assert json.loads(stored)["message"]["data"]["content"] == "hi"
    # An entry this version cannot read is a miss, not an error.
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE model_cache SET response = '{\"unexpected\": 1}'")
    assert SQLiteCache(path).lookup("p", "llm") is None

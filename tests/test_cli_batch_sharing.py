"""What a batch builds once and shares: HTTP clients, the SSL context, the compiled loop, fsyncs."""

# ruff: noqa: F811 - pytest fixtures are imported from the helper module

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from langgraph_refine._loop import _run
from langgraph_refine.cli._batch import LineWriter
from langgraph_refine.cli._models import ModelSettings
from tests.test_cli_batch import batch_args, read_jsonl, tasks, write_jsonl
from tests.test_cli_helpers import cli, openai_server, per_task  # noqa: F401 - fixtures


def test_models_of_one_command_share_one_client_pair_and_one_ssl_context(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    made: list[Any] = []
    real = httpx.create_ssl_context
    monkeypatch.setattr(httpx, "create_ssl_context", lambda: made.append(real()) or made[-1])
    settings = ModelSettings(model="m", base_url="http://127.0.0.1:9/v1", judge_model="j")
    generator, judge, again = settings.generator(), settings.judge(), settings.generator()
    assert len(made) == 1
    clients = {id(m.http_async_client) for m in (generator, judge, again)}  # type: ignore[attr-defined]
    assert len(clients) == 1 and None not in clients
    assert len({id(m.http_client) for m in (generator, judge, again)}) == 1  # type: ignore[attr-defined]
    sync, async_ = settings.http.pair()
    assert generator.http_async_client is async_ and generator.http_client is sync  # type: ignore[attr-defined]
    asyncio.run(settings.http.aclose())
    assert async_.is_closed and sync.is_closed
    assert settings.http.pair()[1] is not async_  # a new pair after closing


def test_a_batch_compiles_its_loop_once_and_opens_one_connection_per_task_in_flight(
    cli: Any, openai_server: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    compiled: list[Any] = []
    real = _run.create_refine_graph

    def counting(*args: Any, **kwargs: Any) -> Any:
        compiled.append(kwargs["options"].target_score)  # refine builds its options once
        return real(*args, **kwargs)

    monkeypatch.setattr(_run, "create_refine_graph", counting)
    server = openai_server(per_task())
    rows = [*tasks(5), {"id": "own", "task": "task number 9", "target_score": 0.7}]
    src, out = write_jsonl(tmp_path / "in.jsonl", rows), tmp_path / "out.jsonl"
    run = cli(*batch_args(server, src, out, "--concurrency", "2"))
    assert run.code == 0, run.err
    assert len(read_jsonl(out)) == 6
    # The five lines without options share one loop; the line with its own gets its own.
    assert sorted(compiled) == [0.7, 0.9]


def test_lines_finished_together_are_all_durable_and_share_fsyncs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[int] = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: synced.append(fd) or real(fd))
    path = tmp_path / "out.jsonl"
    writer = LineWriter(path)

    async def finish_together() -> None:
        await asyncio.gather(*(writer.awrite({"id": i}) for i in range(20)))

    asyncio.run(finish_together())
    writer.close()
    assert sorted(json.loads(line)["id"] for line in path.read_text().splitlines()) == list(
        range(20)
    )
    assert 1 <= len(synced) < 20  # the first line alone, the others in groups

    writer = LineWriter(path)

    async def one() -> None:
        await writer.awrite({"id": "last"})
        # Durable before awrite returns: another handle sees the line at once.
        assert path.read_text().splitlines()[-1] == '{"id": "last"}'

    asyncio.run(one())
    writer.close()


def test_the_command_process_freezes_its_imports_for_the_garbage_collector(
    tmp_path: Path,
) -> None:
    code = (
        "import gc, sys\n"
        "sys.argv = ['langgraph-refine', 'report', '--help']\n"
        "from langgraph_refine.cli import main\n"
        "assert gc.get_freeze_count() == 0\n"
        "code = main()\n"
        "print(code, gc.get_freeze_count() > 10000, gc.get_threshold()[0], gc.isenabled())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "0 True 10000 True"


def test_the_shared_pool_reuses_its_connections_and_maps_errors_to_the_sdk_library() -> None:
    import openai
    from benchmarks.concurrency import _server_stats, scripted_server

    settings = ModelSettings(model="m", timeout=5.0)
    _, client = settings.http.pair()
    library = sys.modules[type(openai.DEFAULT_CONNECTION_LIMITS).__module__.partition(".")[0]]

    async def calls(url: str) -> None:
        gate = asyncio.Semaphore(8)

        async def one(i: int) -> None:
            async with gate:
                reply = await client.post(f"{url}/chat/completions", json={"model": "m"})
                assert reply.status_code == 200 and reply.json()["object"] == "chat.completion"

        await asyncio.gather(*(one(i) for i in range(40)))
        with pytest.raises(library.ConnectError):  # nothing listens on port 9
            await client.post("http://127.0.0.1:9/v1/chat/completions", json={})
        with pytest.raises(library.ReadTimeout):
            await client.post(f"{url}/chat/completions", json={}, timeout=0.01)
        await settings.http.aclose()

    with scripted_server(0.05) as url:
        _server_stats(url, "/reset")
        asyncio.run(calls(url))
        stats = _server_stats(url, "/stats")
    assert stats["requests"] >= 40
    assert stats["connections"] <= 9  # 8 in flight at most, kept alive (+1: the timed-out one)


def test_each_batch_worker_sends_through_its_lanes_pool_and_keeps_one_connection() -> None:
    from benchmarks.concurrency import _server_stats, scripted_server

    from langgraph_refine.cli._http import LANE, LANES

    settings = ModelSettings(model="m", timeout=5.0)
    _, client = settings.http.pair()
    transport = client._transport
    seen: dict[int, Any] = {}

    async def worker(number: int, url: str) -> None:
        LANE.set(number)  # as `drive` does: this task's context only
        for _ in range(5):  # a worker's calls follow one another
            reply = await client.post(f"{url}/chat/completions", json={"model": "m"})
            assert reply.status_code == 200
        seen[number] = transport._pool()

    async def batch(url: str) -> None:
        await asyncio.gather(*(worker(n, url) for n in range(2 * LANES)))
        assert transport._pool() is seen[0]  # this task never set a lane: lane 0
        await settings.http.aclose()

    with scripted_server(0.02) as url:
        _server_stats(url, "/reset")
        asyncio.run(batch(url))
        stats = _server_stats(url, "/stats")
    assert seen[1] is not seen[0] and seen[LANES + 1] is seen[1]  # lane = worker % LANES
    assert len({id(pool) for pool in seen.values()}) == LANES
    assert stats["requests"] == 2 * LANES * 5
    assert stats["connections"] == 2 * LANES + 1  # one per worker (+1: the /stats request)


def test_a_closed_connection_reads_as_readable() -> None:
    from langgraph_refine.cli._http import ReadyWatch

    watch, owner = ReadyWatch(), object()
    ours, theirs = socket.socketpair()
    fd = watch.watch(ours, owner)

    def readable() -> bool:
        return watch.readable(ours, fd)  # outside an event loop: a fresh poll every time

    with ours:
        assert not readable()
        theirs.sendall(b"x")
        assert readable()
        ours.recv(1)
        assert not readable()
        theirs.close()
        assert readable()  # the peer's close: a read returns b"" at once
    assert readable()  # our own close: the connection is unusable, httpcore drops it


def test_one_poll_answers_a_turn_of_the_event_loop_and_the_next_turn_polls_again() -> None:
    from langgraph_refine.cli._http import ReadyWatch

    watch = ReadyWatch()
    pairs = [socket.socketpair() for _ in range(3)]
    fds = [watch.watch(ours, ours) for ours, _ in pairs]

    async def turns() -> None:
        pairs[1][1].sendall(b"x")
        assert [watch.readable(o, fd) for (o, _), fd in zip(pairs, fds, strict=True)] == [
            False,
            True,
            False,
        ]
        pairs[2][1].sendall(b"y")  # within the same turn: the pass's snapshot stands
        assert not watch.readable(pairs[2][0], fds[2])
        await asyncio.sleep(0)  # the next turn sees it
        assert [watch.readable(o, fd) for (o, _), fd in zip(pairs, fds, strict=True)] == [
            False,
            True,
            True,
        ]

    asyncio.run(turns())
    watch.forget(fds[1], object())  # not the owner: still watched
    assert watch.readable(pairs[1][0], fds[1])
    watch.forget(fds[1], pairs[1][0])
    assert not watch.readable(pairs[1][0], fds[1])  # unwatched: poll no longer reports it
    for ours, theirs in pairs:
        ours.close()
        theirs.close()

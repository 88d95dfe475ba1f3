"""A loopback OpenAI-compatible chat server that answers every request after a fixed delay.

Run as `python -m benchmarks._scripted_server DELAY_SECONDS`; it prints its base URL on
the first line of stdout, then serves until killed. Every POST waits `DELAY_SECONDS`
(requests overlap like a real server's parallel slots) and returns one short reply with
usage. Connections are kept alive (HTTP/1.1), as a hosted API's are, so a client that
reuses its connections pays for no new TCP connection per call. `GET /stats` and
`GET /reset` read and reset its counters (see `STATS`).

It is one asyncio event loop in its own process: cheap enough per request that hundreds
of concurrent calls measure the client, not the server.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import sys
import time
from typing import Any

_counter = itertools.count()
STATS: dict[str, float] = {"requests": 0, "connections": 0, "first": 0.0, "last": 0.0}
"""What `GET /stats` reports since the last `GET /reset`: POSTs answered, connections
opened, and the `time.monotonic()` of the first POST's arrival and the last reply."""


def _reply(model: str) -> dict[str, Any]:
    n = next(_counter)
    return {
        "id": f"chatcmpl-{n}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": f"scripted reply {n}"},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25},
    }


def _response(status: str, body: bytes, keep_alive: bool) -> bytes:
    head = (
        f"HTTP/1.1 {status}\r\n"
        "Content-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n"
        f"Connection: {'keep-alive' if keep_alive else 'close'}\r\n\r\n"
    )
    return head.encode() + body


def _get(request_line: str) -> bytes:
    if " /reset " in request_line:
        STATS.update(requests=0, connections=0, first=0.0, last=0.0)
    if " /stats " in request_line:
        return json.dumps(STATS).encode()
    return b'{"status": "ok"}'


async def _serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float) -> None:
    """Answer the requests of one connection, one after another, until the client closes."""
    STATS["connections"] += 1
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method = lines[0].split(" ", 1)[0]
            headers = {
                key.strip().lower(): value.strip()
                for key, _, value in (line.partition(":") for line in lines[1:] if line)
            }
            length = int(headers.get("content-length") or 0)
            raw = await reader.readexactly(length) if length else b""
            keep_alive = headers.get("connection", "").lower() != "close"
            if method == "POST":
                STATS["first"] = STATS["first"] or time.monotonic()
                body = json.loads(raw or b"{}")
                await asyncio.sleep(delay)
                data = json.dumps(_reply(str(body.get("model", "scripted")))).encode()
                STATS["requests"] += 1
                STATS["last"] = time.monotonic()
            else:
                data = _get(lines[0])
            writer.write(_response("200 OK", data, keep_alive))
            await writer.drain()
            if not keep_alive:
                break
    except (asyncio.IncompleteReadError, ConnectionError):
        pass  # the client closed its connection: normal for keep-alive
    finally:
        writer.close()


async def main_async(delay: float) -> None:
    """Listen on a free loopback port, print the base URL, serve forever."""
    server = await asyncio.start_server(
        lambda r, w: _serve(r, w, delay), "127.0.0.1", 0, backlog=1024
    )
    port = server.sockets[0].getsockname()[1]
    print(f"http://127.0.0.1:{port}/v1", flush=True)
    async with server:
        await server.serve_forever()


def main() -> None:
    delay = float(sys.argv[1]) if len(sys.argv) > 1 else 0.2
    asyncio.run(main_async(delay))


if __name__ == "__main__":
    main()

"""A loopback OpenAI-compatible chat server that answers every request after a fixed delay.

Run as `python -m benchmarks._scripted_server DELAY_SECONDS`; it prints its base URL on
the first line of stdout, then serves until killed. Every POST
sleeps `DELAY_SECONDS` (each in its own thread, so requests overlap like a real server's
parallel slots) and returns one short reply with usage.
"""

from __future__ import annotations

import itertools
import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_counter = itertools.count()


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


class Handler(BaseHTTPRequestHandler):
    """Sleeps, then answers any POST with a chat completion."""

    delay = 0.2
    # One connection per request: the standard library's keep-alive handling lost an
    # occasional request under 32 concurrent clients, which would show up as a timeout.
    protocol_version = "HTTP/1.0"

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        time.sleep(self.delay)
        data = json.dumps(_reply(str(body.get("model", "scripted")))).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        data = b'{"status": "ok"}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class Server(ThreadingHTTPServer):
    """A threading server with room for many waiting connections."""

    daemon_threads = True
    request_queue_size = 256

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients closing idle keep-alive connections is normal, not worth a traceback.
        pass


def main() -> None:
    Handler.delay = float(sys.argv[1]) if len(sys.argv) > 1 else 0.2
    server = Server(("127.0.0.1", 0), Handler)
    print(f"http://127.0.0.1:{server.server_address[1]}/v1", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()

"""The local model for the benchmarks that need one, started once per run.

`make bench` on a fresh clone builds llama.cpp's server and fetches the SmolLM2 weights
through `tools.local_model` the first time (several minutes), then reuses
the cache.
"""

from __future__ import annotations

import atexit
import os
from typing import Any

_server: Any = None


def server(threads: int | None = None) -> Any:
    """The running `LocalModelServer`, started on first use and stopped at exit.

    Args:
        threads: llama.cpp threads; by default all cores but one (see below).
    """
    global _server
    if _server is None or not _server.running:
        from tools.local_model import LocalModelServer

        # Leave a core to the benchmark itself: it times client-side work, and llama.cpp
        # threads fighting the client for every core slow both down badly.
        threads = threads or max(1, (os.cpu_count() or 2) - 1)
        _server = LocalModelServer(extra_args=("--threads", str(threads))).start()
        atexit.register(_server.stop)
    return _server


def stop() -> None:
    """Stop the server if this run started one."""
    global _server
    if _server is not None:
        _server.stop()
        _server = None

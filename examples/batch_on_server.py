"""One batch file, two ways: on this machine, and on LangGraph Server (`langgraph dev`).

What a user does in two terminals, done by one script:

1. serve the project's graphs (`langgraph.json`) with `langgraph dev`, the model named by
   `REFINE_MODEL` and reached through `OPENAI_BASE_URL`:
   `REFINE_MODEL=smollm2 OPENAI_BASE_URL=... langgraph dev --no-browser --port 2124`
2. send every task of a JSONL file to it, each as a run on its own thread:
   `langgraph-refine batch tasks.jsonl --out results.jsonl --server http://127.0.0.1:2124`

Each line's check (`evaluator`) and loop options (`max_iterations`, `budget`,
`strategy`, ...) travel as its run's context. The lines name their strategy: `explore`,
the default, also learns from the earlier runs a store remembers (the server's store
outlives this script), so its choices, and the requests a recording replays, would vary.
The script runs the same batch again (every id is already in the output file, so nothing
is sent to the model), then runs the same file on this machine
(`langgraph-refine batch tasks.jsonl --out local.jsonl --model ...`): both give a row per
task, each scored by its own check. In production the same command drives
a deployed server (`langgraph up`, or LangGraph Platform) backed by PostgreSQL; see
docs/scaling-out.md.

Run: `python -m tools.local_model run -- python examples/batch_on_server.py`
(or set `OPENAI_BASE_URL`, `OPENAI_API_KEY` and `REFINE_MODEL` for another server).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PROJECT = Path(__file__).resolve().parents[1]  # where langgraph.json lives
MAX_TOKENS = 160  # short answers: a runaway generation ends soon
STARTUP_SECONDS = 90.0

TASKS: list[dict[str, Any]] = [
    {
        "id": "capital",
        "task": "In one sentence, name the capital of France and one thing it is known for.",
        "evaluator": "contains:Paris",
        "max_iterations": 1,
        "strategy": "chain",  # each round refines the latest answer
    },
    {
        "id": "sky",
        "task": "Explain in two sentences why the sky is blue.",
        "evaluator": ["words:15-60", "no_repetition"],  # combined with equal weights
        "max_iterations": 2,
        "budget": {"max_calls": 3},  # generator calls: the checks call no model
        "strategy": "chain",
    },
    {
        "id": "colors",
        "task": "Name the three primary colors of paint in one sentence.",
        "evaluator": "contains:red,yellow,blue",
        "max_iterations": 1,
        "strategy": "sample",  # each round a fresh answer: best-of-N
    },
]


@dataclass
class Outcome:
    """What the script did: the rows of both runs and the server rerun's summary line."""

    server_rows: list[dict[str, Any]]
    local_rows: list[dict[str, Any]]
    rerun: str


def main(
    base_url: str | None = None, model: str | None = None, workdir: Path | None = None
) -> Outcome:
    """Serve the graphs, run the batch on the server twice, then on this machine; print rows.

    Args:
        base_url: The OpenAI-compatible endpoint the model is reached through;
            `OPENAI_BASE_URL` (or the local model's URL) when omitted.
        model: The model name; `REFINE_MODEL` (or the local model) when omitted.
        workdir: Where the task and result files go; a temporary folder when omitted.

    Returns:
        The rows of both runs, in the order they were written, and the rerun's summary.
    """
    base_url, model = _model_settings(base_url, model)
    with _folder(workdir) as folder:
        tasks = folder / "tasks.jsonl"
        on_server, local = folder / "results.jsonl", folder / "local.jsonl"
        tasks.write_text("".join(json.dumps(line) + "\n" for line in TASKS))
        with serve(base_url, model, logs=folder / "server.log") as url:
            _batch(tasks, on_server, "--server", url, "--concurrency", "2")
            rerun = _batch(tasks, on_server, "--server", url)
        _batch(
            tasks, local, "--model", model, "--base-url", base_url, "--max-tokens", str(MAX_TOKENS)
        )
        outcome = Outcome(_rows(on_server), _rows(local), rerun)
    for where, rows in (("server", outcome.server_rows), ("local", outcome.local_rows)):
        for row in rows:
            scores = ", ".join(f"{s:.2f}" for s in row.get("score_history", []))
            print(f"{where} {row['id']}: {row.get('stop_reason') or row.get('error')} ({scores})")
            print(f"    {row.get('value', '')!r}")
    print(f"server rerun: {rerun}")
    return outcome


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@contextmanager
def serve(
    base_url: str,
    model: str,
    *,
    logs: Path,
    settings: dict[str, str] | None = None,
    config: str | Path = "langgraph.json",
    state: Path | None = None,
) -> Iterator[str]:
    """Run `langgraph dev` on a free loopback port for the duration; yield its URL.

    `settings` adds deployment settings to its environment (such as
    `LANGGRAPH_REFINE_ALLOW_CODE_CHECKS`); `config` is the configuration file to serve,
    relative to the repository root (such as `examples/chat_server/langgraph.json`) or
    absolute; its own paths are the repository root's, as for `langgraph dev` run there.
    `state` is the folder the server works in: `langgraph dev` keeps its threads, runs,
    store and UI bundle in `.langgraph_api` under its working directory, so a server
    given its own folder starts empty and leaves the project's state alone. Omitted, it
    works in the project, as `langgraph dev` run there does (its store outlives the script).
    """
    workdir = PROJECT if state is None else state
    if state is not None:
        config = _config_in(state, PROJECT / config)
    port = _free_port()
    env = {
        **os.environ,
        "REFINE_MODEL": model,
        "REFINE_MAX_TOKENS": str(MAX_TOKENS),
        "OPENAI_BASE_URL": base_url,
        "OPENAI_API_KEY": os.environ.get("OPENAI_API_KEY", "local"),
        "LANGGRAPH_CLI_NO_ANALYTICS": "1",
        "LANGSMITH_TRACING": "false",
        **(settings or {}),
    }
    command = [
        *_console_script("langgraph"),
        "dev",
        "--no-browser",
        "--no-reload",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--config",
        str(config),
    ]
    url = f"http://127.0.0.1:{port}"
    # The log goes outside the project: the dev server watches the project folder.
    with logs.open("w") as log:
        # A session of its own: the server's children (the UI bundler's `node` watcher and
        # its esbuild) leave with it instead of outliving the script.
        server = subprocess.Popen(
            command, cwd=workdir, env=env, stdout=log, stderr=log, start_new_session=True
        )
        try:
            _wait_until_ready(url, server, logs)
            yield url
        finally:
            _stop(server)


def _config_in(folder: Path, config: Path) -> Path:
    """A copy of `config` in `folder` whose paths reach the project from there.

    `langgraph dev` resolves a config's paths from its working directory (the project's);
    one working elsewhere gets them absolute.
    """
    settings = json.loads(config.read_text())

    def absolute(spec: str) -> str:  # "./path.py:attr" or "./folder"
        path, colon, attr = spec.partition(":")
        return f"{(PROJECT / path).resolve()}{colon}{attr}"

    settings["dependencies"] = [absolute(dep) for dep in settings.get("dependencies", [])]
    for name, graph in settings.get("graphs", {}).items():
        if isinstance(graph, dict):
            graph["path"] = absolute(graph["path"])
        else:
            settings["graphs"][name] = absolute(graph)
    if "app" in settings.get("http", {}):
        settings["http"]["app"] = absolute(settings["http"]["app"])
    folder.mkdir(parents=True, exist_ok=True)
    # The UI bundler takes only files under its working directory: the folders holding
    # them are linked in, and their paths stay relative.
    for path in settings.get("ui", {}).values():
        top = Path(path).parts[0]
        if not (folder / top).exists():
            (folder / top).symlink_to(PROJECT / top, target_is_directory=True)
    copy = folder / "langgraph.json"
    copy.write_text(json.dumps(settings, indent=2))
    return copy


def _stop(server: subprocess.Popen[bytes]) -> None:
    """End the server and every process of its session: politely, then by force."""
    for sig, wait in ((signal.SIGTERM, 15.0), (signal.SIGKILL, None)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, sig)
        try:
            server.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
        # The server is gone; end what it left in its session (a watcher ignoring SIGTERM).
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGKILL)
        return


def _batch(tasks: Path, out: Path, *options: str) -> str:
    """`langgraph-refine batch TASKS --out OUT OPTIONS...`; returns its summary line."""
    command = [sys.executable, "-m", "langgraph_refine.cli", "batch", str(tasks)]
    command += ["--out", str(out), *options]
    done = subprocess.run(command, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise SystemExit(f"batch failed ({done.returncode}):\n{done.stderr}{done.stdout}")
    return done.stdout.strip().splitlines()[-1]


def _model_settings(base_url: str | None, model: str | None) -> tuple[str, str]:
    local = os.environ.get("LANGGRAPH_REFINE_LOCAL_BASE_URL")
    base_url = base_url or os.environ.get("OPENAI_BASE_URL") or local
    if not base_url:
        raise SystemExit(
            "No model server: set OPENAI_BASE_URL (and REFINE_MODEL), or run: "
            "python -m tools.local_model run -- python examples/batch_on_server.py"
        )
    return base_url, model or os.environ.get("REFINE_MODEL", "smollm2")


@contextmanager
def _folder(workdir: Path | None) -> Iterator[Path]:
    if workdir is not None:
        workdir.mkdir(parents=True, exist_ok=True)
        yield workdir
        return
    with tempfile.TemporaryDirectory(prefix="refine-batch-") as tmp:
        yield Path(tmp)


def _console_script(name: str) -> list[str]:
    """A console script of the running environment (its `bin/` may not be on PATH)."""
    beside = Path(sys.executable).parent / name
    return [str(beside)] if beside.exists() else [name]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _wait_until_ready(url: str, server: subprocess.Popen[bytes], logs: Path) -> None:
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"langgraph dev exited ({server.returncode}):\n{_tail(logs)}")
        try:
            with urllib.request.urlopen(f"{url}/ok", timeout=1) as reply:
                if reply.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    raise SystemExit(f"langgraph dev did not start in {STARTUP_SECONDS:.0f} s:\n{_tail(logs)}")


def _tail(path: Path) -> str:
    return path.read_text(errors="replace")[-3000:]


if __name__ == "__main__":
    main()

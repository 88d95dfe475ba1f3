"""Shared fixtures (checkpointers over memory, SQLite and PostgreSQL) and the parallel run.

`make test` runs the suite with pytest-xdist, two workers more than there are cores
(`--dist loadfile`: a test module's tests stay on one worker, so a module's server starts
once). Three things keep the workers out of each other's way:

- each worker has its own PostgreSQL database (`<database>_<worker>`, created on first use
  and kept), so schema setup and the tests' tables never race;
- a test that starts or uses the llama.cpp model (marker `local_model`) runs, setup and
  teardown included, under a lock the workers share: two busy model servers on two cores
  starve each other (llama.cpp's threads spin-wait), so at most one such test runs at a
  time. The `langgraph dev` tests (marker `server`) do not take it: their servers wait on
  sockets, not on each other, and a worker held at the lock would leave its core idle;
- everything else writes under pytest's per-worker `tmp_path` and binds port 0.

(xdist's `--dist loadgroup` would pin these tests to one worker, but with pytest 9.2 its
`xdist_group` marker no longer reaches the scheduler: xdist renames `item._nodeid`, which
pytest stopped reading.)
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
from langgraph.checkpoint.memory import InMemorySaver

POSTGRES_URI_ENV = "LANGGRAPH_REFINE_TEST_POSTGRES_URI"

SERVER_MARKERS = ("local_model",)
"""The markers of the tests that run one at a time (see the module's docstring)."""

MODULE_SECONDS = Path(__file__).with_name("module_seconds.json")
"""Each module's measured time (setup, call and teardown of its tests), for the order."""


def postgres_uri() -> str | None:
    """The test database's address, from the environment (set by `make test` and CI).

    Under pytest-xdist, the worker's own database (see `pytest_configure`).
    """
    return os.environ.get(POSTGRES_URI_ENV)


def pytest_configure(config: pytest.Config) -> None:
    """On an xdist worker, point the PostgreSQL tests (and subprocesses) at its own database."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    uri = postgres_uri()
    if worker and uri:
        own = worker_database(uri, worker)
        if own is not None:
            os.environ[POSTGRES_URI_ENV] = own


def worker_database(uri: str, worker: str) -> str | None:
    """The address of `uri`'s database suffixed with `worker`, created if missing.

    None when it cannot be made (no server, no right to create a database): the tests
    then share `uri`, and those that need PostgreSQL say what failed.
    """
    parts = urlsplit(uri)
    name = f"{parts.path.lstrip('/') or 'postgres'}_{worker}"
    try:
        import psycopg
        from psycopg import sql

        with psycopg.connect(uri, autocommit=True, connect_timeout=5) as conn:
            found = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,))
            if found.fetchone() is None:
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    except Exception:  # the tests that need it report the server's own error
        return None
    return urlunsplit(parts._replace(path=f"/{name}"))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--write-module-seconds",
        action="store_true",
        help=f"write each module's time of this run to {MODULE_SECONDS.name} (the order's guide)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Hand the workers the longest modules first, so that none is left running alone at the end.

    The order is by each module's time in `module_seconds.json` (longest first: the
    scheduler gives a worker its next module before the current one ends, so a long module
    handed out late left the other workers idle for a minute and more); a module not in
    it is guessed from its tests (a `slow` one counts 5 s, another 0.3 s). A module's tests
    keep their order (`--dist loadfile` sends a module as one unit). Refresh the file after
    adding or moving slow tests: `make test ARGS=--write-module-seconds`.
    """
    known: dict[str, float] = json.loads(MODULE_SECONDS.read_text())
    guessed: dict[str, float] = {}
    for item in items:
        module = _module(item.nodeid)
        each = 5.0 if item.get_closest_marker("slow") else 0.3
        guessed[module] = guessed.get(module, 0.0) + each
    seconds = {module: known.get(module, guess) for module, guess in guessed.items()}
    items.sort(key=lambda item: -seconds[_module(item.nodeid)])


def _module(nodeid: str) -> str:
    return nodeid.split("::")[0]


_spent: dict[str, float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Sum each module's time (on the controller, from every worker's reports)."""
    _spent[_module(report.nodeid)] = _spent.get(_module(report.nodeid), 0.0) + report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    """With `--write-module-seconds`, keep this run's times as the next runs' order.

    Only the modules this run ran are updated; a module that no longer exists is dropped.
    """
    config = session.config
    if hasattr(config, "workerinput") or not config.getoption("write_module_seconds"):
        return
    root = Path(config.rootpath)
    known: dict[str, float] = json.loads(MODULE_SECONDS.read_text())
    known.update({module: round(seconds, 1) for module, seconds in _spent.items()})
    kept = {module: known[module] for module in sorted(known) if (root / module).exists()}
    MODULE_SECONDS.write_text(json.dumps(kept, indent=1) + "\n")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    """Run a local-model test (setup to teardown) while no other worker runs one."""
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")  # the same in every worker of a run
    if run is None or not any(item.get_closest_marker(name) for name in SERVER_MARKERS):
        return (yield)
    with servers_lock(Path(tempfile.gettempdir()) / f"langgraph-refine-servers-{run}.lock"):
        return (yield)


@contextlib.contextmanager
def servers_lock(path: Path) -> Iterator[None]:
    """An exclusive lock on `path` across processes, released when the block ends."""
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def checkpointer(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[Any]:
    """A real checkpointer of each kind the library supports."""
    kind = request.param
    if kind == "memory":
        yield InMemorySaver()
    elif kind == "sqlite":
        from langgraph.checkpoint.sqlite import SqliteSaver

        with SqliteSaver.from_conn_string(str(tmp_path / "checkpoints.sqlite")) as saver:
            yield saver
    else:
        uri = postgres_uri()
        if not uri:
            pytest.fail(f"{POSTGRES_URI_ENV} is not set; `make test` sets it")
        from langgraph.checkpoint.postgres import PostgresSaver

        with PostgresSaver.from_conn_string(uri) as saver:
            saver.setup()
            yield saver


@pytest.fixture
def thread() -> dict[str, Any]:
    """A run config on a fresh thread."""
    return {"configurable": {"thread_id": str(uuid.uuid4())}}


# Recorded model traffic (`@pytest.mark.vcr`): see tests/recording.py.


@pytest.fixture(scope="module")
def vcr_cassette_dir(request: pytest.FixtureRequest) -> str:
    """Cassettes live in the top-level cassettes/ folder, one subfolder per test module."""
    from tests import recording

    return recording.cassette_dir(request.module)


@pytest.fixture
def vcr_config() -> dict[str, Any]:
    """Scrubbed headers, stable URIs, JSON body matching (tests/recording.py)."""
    from tests import recording

    return recording.vcr_config()


def pytest_recording_configure(config: pytest.Config, vcr: Any) -> None:
    """Register the JSON body matcher on every VCR that pytest-recording builds."""
    from tests import recording

    recording.configure(vcr)

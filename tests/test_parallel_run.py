"""The parallel run's own machinery (tests/conftest.py): the servers lock, the worker databases."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import POSTGRES_URI_ENV, postgres_uri, servers_lock, worker_database

# Another process tries the lock without waiting: exit 0 if it got it, 1 if it is held.
TRY_LOCK = textwrap.dedent(
    """
    import fcntl, sys
    with open(sys.argv[1], "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            sys.exit(1)
    """
)


def other_process_gets(lock: Path) -> bool:
    done = subprocess.run([sys.executable, "-c", TRY_LOCK, str(lock)], timeout=60)
    return done.returncode == 0


def test_the_servers_lock_keeps_other_processes_out_until_released(tmp_path: Path) -> None:
    lock = tmp_path / "servers.lock"
    with servers_lock(lock):
        assert not other_process_gets(lock)
    assert other_process_gets(lock)


@pytest.mark.postgres
def test_a_worker_gets_a_database_of_its_own() -> None:
    import psycopg

    uri = postgres_uri()
    if not uri:
        pytest.fail(f"{POSTGRES_URI_ENV} is not set; `make test` sets it")
    base = uri.rsplit("/", 1)[0]
    own = worker_database(f"{base}/test", "gwtest")
    assert own == f"{base}/test_gwtest"
    assert worker_database(f"{base}/test", "gwtest") == own  # made once, then found
    with psycopg.connect(own, connect_timeout=5) as conn:
        [(name,)] = conn.execute("SELECT current_database()").fetchall()
    assert name == "test_gwtest"


def test_without_a_reachable_server_the_worker_shares_the_given_database() -> None:
    assert worker_database("postgresql://postgres@127.0.0.1:9/test", "gw0") is None


class _Item:
    """What the ordering reads of a collected test: its id and its markers."""

    def __init__(self, nodeid: str, slow: bool = False) -> None:
        self.nodeid = nodeid
        self.slow = slow

    def get_closest_marker(self, name: str) -> object | None:
        return object() if name == "slow" and self.slow else None


def test_the_longest_modules_go_first_and_a_modules_tests_keep_their_order(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import tests.conftest as conftest

    seconds = tmp_path / "module_seconds.json"
    seconds.write_text('{"tests/a.py": 3.0, "tests/b.py": 40.0, "tests/c.py": 0.5}')
    monkeypatch.setattr(conftest, "MODULE_SECONDS", seconds)
    items = [
        _Item("tests/a.py::one"),
        _Item("tests/a.py::two"),
        _Item("tests/b.py::one"),
        _Item("tests/c.py::one"),
        _Item("tests/new.py::one", slow=True),  # not measured yet: a slow test counts 5 s
        _Item("tests/other.py::one"),  # not measured, nothing slow: 0.3 s
    ]
    conftest.pytest_collection_modifyitems(None, items)  # type: ignore[arg-type]
    assert [item.nodeid for item in items] == [
        "tests/b.py::one",
        "tests/new.py::one",
        "tests/a.py::one",
        "tests/a.py::two",
        "tests/c.py::one",
        "tests/other.py::one",
    ]


def test_write_module_seconds_updates_the_modules_run_and_drops_those_gone(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import json
    from types import SimpleNamespace

    import tests.conftest as conftest

    (tmp_path / "tests").mkdir()
    for name in ("a.py", "b.py"):
        (tmp_path / "tests" / name).touch()
    seconds = tmp_path / "module_seconds.json"
    seconds.write_text('{"tests/a.py": 3.0, "tests/b.py": 40.0, "tests/gone.py": 9.0}')
    monkeypatch.setattr(conftest, "MODULE_SECONDS", seconds)
    monkeypatch.setattr(conftest, "_spent", {})
    for duration in (1.25, 2.0):  # setup and call of one test of b.py
        report = SimpleNamespace(nodeid="tests/b.py::one", duration=duration)
        conftest.pytest_runtest_logreport(report)  # type: ignore[arg-type]
    options = {"write_module_seconds": True}
    config = SimpleNamespace(rootpath=tmp_path, getoption=options.__getitem__)
    conftest.pytest_sessionfinish(SimpleNamespace(config=config))  # type: ignore[arg-type]
    assert json.loads(seconds.read_text()) == {"tests/a.py": 3.0, "tests/b.py": 3.2}

    options["write_module_seconds"] = False  # without the option, nothing is written
    seconds.write_text("{}")
    conftest.pytest_sessionfinish(SimpleNamespace(config=config))  # type: ignore[arg-type]
    assert seconds.read_text() == "{}"

"""Shared fixtures: checkpointers over memory, SQLite and PostgreSQL."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

POSTGRES_URI_ENV = "LANGGRAPH_REFINE_TEST_POSTGRES_URI"


def postgres_uri() -> str | None:
    """The test database's address, from the environment (set by `make test` and CI)."""
    return os.environ.get(POSTGRES_URI_ENV)


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

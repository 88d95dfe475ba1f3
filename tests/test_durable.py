"""Crash and resume against real SQLite and PostgreSQL savers, with real killed processes.

A loop runs in a subprocess (tests/durable_worker.py) with `durability="sync"`; the test
kills it with SIGKILL when the worker's marker file shows the k-th model call, then
continues the run with `invoke(None, config)` in a fresh process. The result must equal
an uninterrupted run's, with no attempt lost or duplicated and at most the interrupted
call made twice.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from langgraph_refine import Evaluation, create_refine_graph
from tests.conftest import POSTGRES_URI_ENV, postgres_uri
from tests.durable_worker import (
    FAILED_EDIT_INDEX,
    INVALID_INDEX,
    EditRecorder,
    Recorder,
    TypedRecorder,
    build,
    summary,
)

ROOT = Path(__file__).resolve().parents[1]
DELAY = 0.12  # seconds each worker call takes, so that kills land mid-loop
TIMEOUT = 60.0


def require_postgres() -> str:
    """The test database's URI; fail (not skip) when it is missing or unreachable."""
    uri = postgres_uri()
    if not uri:
        pytest.fail(f"{POSTGRES_URI_ENV} is not set; `make test` and CI set it")
    import psycopg

    try:
        with psycopg.connect(uri, connect_timeout=5) as conn:
            conn.execute("SELECT 1")
    except psycopg.OperationalError as exc:
        pytest.fail(f"PostgreSQL at {POSTGRES_URI_ENV}={uri!r} is unreachable: {exc}")
    return uri


def spec_of(kind: str, tmp_path: Path) -> str:
    """The worker's `--saver` for a SQLite file in `tmp_path` or the test database."""
    if kind == "sqlite":
        return f"sqlite:{tmp_path / 'checkpoints.sqlite'}"
    return f"postgres:{require_postgres()}"


@pytest.fixture(params=["sqlite", "postgres"])
def saver_spec(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return spec_of(request.param, tmp_path)


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], list[str]]:
    """An uninterrupted run of the same loop: its result and its calls, in order."""
    markers = tmp_path_factory.mktemp("reference") / "markers"
    graph = build(Recorder(str(markers)), InMemorySaver())
    config = {"configurable": {"thread_id": "reference"}}
    graph.invoke({"task": "Describe the sea."}, config, durability="sync")
    result = summary(graph.get_state(config).values)
    assert result["stop_reason"] == "target_reached" and len(result["attempts"]) == 6
    return result, read_lines(markers)


def read_lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def start_worker(
    mode: str, spec: str, thread: str, markers: Path, *extra: str, env: Any = None
) -> Any:
    command = [
        sys.executable,
        "-m",
        "tests.durable_worker",
        mode,
        "--saver",
        spec,
        "--thread",
        thread,
        "--markers",
        str(markers),
        *extra,
    ]
    return subprocess.Popen(
        command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )


def kill_at(proc: Any, markers: Path, line: int, extra_wait: float) -> list[str]:
    """SIGKILL the worker `extra_wait` seconds after its `line`-th call began."""
    deadline = time.monotonic() + TIMEOUT
    while len(read_lines(markers)) < line:
        if proc.poll() is not None:
            pytest.fail(f"worker ended before call {line}: {proc.communicate()[1][-2000:]}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"worker never reached call {line}")
        time.sleep(0.005)
    time.sleep(extra_wait)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == -signal.SIGKILL, "the worker finished before the kill"
    return read_lines(markers)


def finish(proc: Any) -> dict[str, Any]:
    out, err = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 0, err[-3000:]
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


def check_calls(lines: list[str], expected: list[str], interrupted: list[str]) -> None:
    """Every expected call ran; the only repeats are calls that were cut off."""
    calls, wanted = Counter(lines), Counter(expected)
    assert not wanted - calls, f"calls never made: {wanted - calls}"
    repeated = calls - wanted
    assert sum(repeated.values()) <= len(interrupted), f"repeated calls: {repeated}"
    assert set(repeated) <= set(interrupted), f"completed calls ran again: {repeated}"


def check_result(result: dict[str, Any], ref: dict[str, Any]) -> None:
    assert result == ref
    indices = [attempt[0] for attempt in result["attempts"]]
    assert indices == list(range(len(indices)))


# (the k-th call at which to kill, extra wait in units of one call's duration): a zero
# wait lands inside that call; a wait longer than a call lands between steps, while the
# checkpoint is written or the next node starts.
KILL_POINTS = [(1, 0.0), (4, 1.3), (8, 0.5), (11, 1.05)]
# Each kill point on one saver, each saver killed inside a call and between steps: the
# full product (eight runs of a few seconds each) repeats the same paths.
SAVER_KILLS = [("sqlite", *KILL_POINTS[0]), ("sqlite", *KILL_POINTS[1])]
SAVER_KILLS += [("postgres", *KILL_POINTS[2]), ("postgres", *KILL_POINTS[3])]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("saver", "line", "wait"), SAVER_KILLS, ids=[f"{k}-call{n}" for k, n, _ in SAVER_KILLS]
)
def test_sigkill_then_resume_gives_the_uninterrupted_result(
    saver: str, tmp_path: Path, reference: Any, line: int, wait: float
) -> None:
    ref, ref_calls = reference
    result, calls, before = killed_and_resumed(spec_of(saver, tmp_path), tmp_path, line, wait)
    check_result(result, ref)
    check_calls(calls, ref_calls, interrupted=before[-1:])


def killed_and_resumed(
    saver_spec: str, tmp_path: Path, line: int, wait: float, *flags: str
) -> tuple[dict[str, Any], list[str], list[str]]:
    """A worker killed at its `line`-th call (after `wait` of its delay), then resumed.

    Returns:
        The resumed run's result, every call made (both processes), the calls before the kill.
    """
    markers, thread = tmp_path / "markers", str(uuid.uuid4())
    proc = start_worker("start", saver_spec, thread, markers, *flags, "--delay", str(DELAY))
    before = kill_at(proc, markers, line, wait * DELAY)
    result = finish(start_worker("resume", saver_spec, thread, markers, *flags))
    return result, read_lines(markers), before


@pytest.fixture(scope="module")
def agent_reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], list[str]]:
    """An uninterrupted run of the same loop in an agent: its result and its calls."""
    from langchain_core.messages import HumanMessage

    from tests.durable_worker import agent_summary, build_agent

    markers = tmp_path_factory.mktemp("agent-reference") / "markers"
    agent, middleware = build_agent(Recorder(str(markers)), InMemorySaver())
    config = {"configurable": {"thread_id": "reference"}}
    agent.invoke({"messages": [HumanMessage("Describe the sea.")]}, config, durability="sync")
    result = agent_summary(middleware, agent.get_state(config).values)
    assert result["stop_reason"] == "target_reached" and len(result["attempts"]) == 6
    assert result["last_message"] == "sea v5"
    return result, read_lines(markers)


# Inside a model call, inside a judgment, and between steps (a checkpoint being written).
AGENT_KILLS = [("sqlite", 3, 0.0), ("sqlite", 6, 0.5), ("postgres", 8, 1.3)]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("saver", "line", "wait"), AGENT_KILLS, ids=[f"{k}-call{n}" for k, n, _ in AGENT_KILLS]
)
def test_an_agent_killed_and_resumed_repeats_at_most_the_call_in_flight(
    saver: str, tmp_path: Path, agent_reference: Any, line: int, wait: float
) -> None:
    ref, ref_calls = agent_reference
    spec = spec_of(saver, tmp_path)
    result, calls, before = killed_and_resumed(spec, tmp_path, line, wait, "--agent")
    assert result == ref
    check_calls(calls, ref_calls, interrupted=before[-1:])


@pytest.mark.slow
def test_killed_twice_still_resumes_to_the_same_result(
    saver_spec: str, tmp_path: Path, reference: Any
) -> None:
    ref, ref_calls = reference
    markers, thread = tmp_path / "markers", str(uuid.uuid4())
    first = kill_at(
        start_worker("start", saver_spec, thread, markers, "--delay", str(DELAY)), markers, 3, 0
    )
    proc = start_worker("resume", saver_spec, thread, markers, "--delay", str(DELAY))
    second = kill_at(proc, markers, len(first) + 4, 0.5 * DELAY)
    result = finish(start_worker("resume", saver_spec, thread, markers))
    check_result(result, ref)
    check_calls(read_lines(markers), ref_calls, interrupted=[first[-1], second[-1]])


@pytest.mark.slow
@pytest.mark.parametrize(("saver", "fail"), [("sqlite", "gen:2"), ("postgres", "eval:4")])
def test_exception_in_user_code_then_resume_from_that_step(
    saver: str, tmp_path: Path, reference: Any, fail: str
) -> None:
    saver_spec = spec_of(saver, tmp_path)
    ref, ref_calls = reference
    markers, thread = tmp_path / "markers", str(uuid.uuid4())
    proc = start_worker("start", saver_spec, thread, markers, "--fail", fail)
    _out, err = proc.communicate(timeout=TIMEOUT)
    kind, index = fail.split(":")
    what = {"gen": "generator", "eval": "evaluator"}[kind]
    assert proc.returncode == 1
    assert f"{what} failed on attempt {index}" in err  # the attempt number is in the message
    assert "injected failure" in err
    before = read_lines(markers)
    assert before[-1] == f"{kind} {index}"

    result = finish(start_worker("resume", saver_spec, thread, markers))
    check_result(result, ref)
    after = read_lines(markers)[len(before) :]
    assert after[0] == f"{kind} {index}"  # resumed at the failed step, not from the start
    check_calls(read_lines(markers), ref_calls, interrupted=[f"{kind} {index}"])


@pytest.mark.slow
def test_durability_exit_loses_the_run_on_a_crash(tmp_path: Path) -> None:
    # What docs/checkpointing.md warns about: with "exit", nothing is saved until the
    # run ends, so a crash leaves nothing to resume.
    spec, markers, thread = f"sqlite:{tmp_path / 'c.sqlite'}", tmp_path / "m", "exit"
    proc = start_worker(
        "start", spec, thread, markers, "--delay", str(DELAY), "--durability", "exit"
    )
    kill_at(proc, markers, 6, 0)
    proc = start_worker("resume", spec, thread, markers)
    out, _ = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 3
    assert "nothing to resume" in out


# -- many threads on one saver ---------------------------------------------------------------


def threaded_loop(checkpointer: Any) -> Any:
    """A loop whose attempts name their task; scores make each thread stop at its own round."""

    def generate(state: Any) -> str:
        time.sleep(random.uniform(0, 0.01))  # interleave the threads' checkpoint writes
        return f"{state['task']}#{len(state['attempts'])}"

    def evaluate(response: str, state: Any) -> Evaluation:
        task, round_ = response.split("#")
        assert task == state["task"], "an attempt crossed threads"
        rounds_needed = int(task.split()[-1]) % 4
        return Evaluation(score=0.95 if int(round_) >= rounds_needed else 0.2 + 0.1 * int(round_))

    return create_refine_graph(generate, evaluate, max_iterations=5, patience=None).compile(
        checkpointer=checkpointer
    )


def check_thread_state(values: dict[str, Any], i: int) -> None:
    task = f"task {i}"
    assert values["task"] == task
    attempts = values["attempts"]
    assert [a.index for a in attempts] == list(range(i % 4 + 1))
    assert all(a.response.startswith(f"{task}#") for a in attempts)
    assert values["response"] == f"{task}#{i % 4}"


@pytest.fixture
def postgres_pool() -> Iterator[Any]:
    from psycopg.rows import dict_row
    from psycopg_pool import ConnectionPool

    uri = require_postgres()
    kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    with ConnectionPool(uri, min_size=1, max_size=8, kwargs=kwargs, open=True) as pool:
        yield pool


@pytest.mark.postgres
def test_many_threads_on_one_postgres_saver_stay_separate(postgres_pool: Any) -> None:
    from langgraph.checkpoint.postgres import PostgresSaver

    saver = PostgresSaver(postgres_pool)
    saver.setup()
    graph = threaded_loop(saver)
    run = uuid.uuid4().hex
    configs = [{"configurable": {"thread_id": f"{run}-{i}"}} for i in range(8)]

    def one(i: int) -> dict[str, Any]:
        graph.invoke({"task": f"task {i}"}, configs[i], durability="sync")
        values: dict[str, Any] = graph.get_state(configs[i]).values
        return values

    with ThreadPoolExecutor(max_workers=8) as pool:
        states = list(pool.map(one, range(8)))
    for i, values in enumerate(states):
        check_thread_state(values, i)
        # Every checkpoint of the thread's history holds only its own attempts.
        for snapshot in graph.get_state_history(configs[i]):
            for attempt in snapshot.values.get("attempts") or []:
                assert attempt.response.startswith(f"task {i}#")


@pytest.mark.postgres
async def test_abatch_on_one_async_postgres_saver_stays_separate() -> None:
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    uri = require_postgres()

    async def generate(state: Any) -> str:
        await asyncio.sleep(random.uniform(0, 0.01))
        return f"{state['task']}#{len(state['attempts'])}"

    def evaluate(response: str, state: Any) -> Evaluation:
        task, round_ = response.split("#")
        assert task == state["task"], "an attempt crossed threads"
        return Evaluation(score=0.95 if int(round_) >= int(task.split()[-1]) % 4 else 0.3)

    async with AsyncPostgresSaver.from_conn_string(uri) as saver:
        await saver.setup()
        graph = create_refine_graph(generate, evaluate, max_iterations=5, patience=None).compile(
            checkpointer=saver
        )
        run = uuid.uuid4().hex
        configs: list[Any] = [{"configurable": {"thread_id": f"{run}-{i}"}} for i in range(8)]
        outputs = await graph.abatch([{"task": f"task {i}"} for i in range(8)], configs)
        assert [o["response"] for o in outputs] == [f"task {i}#{i % 4}" for i in range(8)]
        for i, config in enumerate(configs):
            check_thread_state((await graph.aget_state(config)).values, i)


def test_worker_module_runs_in_process(tmp_path: Path) -> None:
    # The worker's own logic, without subprocesses: the markers match the calls made.
    markers = tmp_path / "m"
    graph = build(Recorder(str(markers)), InMemorySaver())
    config = {"configurable": {"thread_id": "w"}}
    graph.invoke({"task": "Describe the sea."}, config)
    result = summary(graph.get_state(config).values)
    assert read_lines(markers) == [f"{k} {i}" for i in range(6) for k in ("gen", "eval")]
    assert result["calls"] == 6  # callable evaluators make no model call
    assert result["attempts"][2][1] == "sea v2 (after 0,1)"
    assert os.path.getsize(markers) > 0


# -- a typed run ---------------------------------------------------------------------------


@pytest.mark.slow
def test_a_typed_run_killed_mid_loop_resumes_with_every_object(tmp_path: Path) -> None:
    # Strict msgpack in the worker processes: attempts' objects are plain JSON, no pickle.
    env = {**os.environ, "LANGGRAPH_STRICT_MSGPACK": "true", "PYTHONWARNINGS": "error::UserWarning"}
    markers = tmp_path / "reference"
    graph = build(TypedRecorder(str(markers)), InMemorySaver())
    config = {"configurable": {"thread_id": "typed-reference"}}
    graph.invoke({"task": "Describe the sea."}, config, durability="sync")
    ref, ref_calls = summary(graph.get_state(config).values), read_lines(markers)
    outputs = [attempt[3] for attempt in ref["attempts"]]
    assert outputs[INVALID_INDEX] is None  # the reply that was no object
    assert [o["version"] for o in outputs if o is not None] == [0, 1, 3, 4, 5]
    assert ref["output"] == outputs[-1] and ref["stop_reason"] == "target_reached"

    spec, markers, thread = f"sqlite:{tmp_path / 'typed.sqlite'}", tmp_path / "m", "typed"
    proc = start_worker("start", spec, thread, markers, "--delay", str(DELAY), "--typed", env=env)
    before = kill_at(proc, markers, 7, 0.5 * DELAY)  # SIGKILL inside a later round
    assert any(line == f"gen {INVALID_INDEX}" for line in before)
    result = finish(start_worker("resume", spec, thread, markers, "--typed", env=env))
    check_result(result, ref)  # every attempt's object intact, the invalid one still None
    check_calls(read_lines(markers), ref_calls, interrupted=before[-1:])


# -- a run refining by edits ---------------------------------------------------------------


@pytest.fixture(scope="module")
def edits_reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], list[str]]:
    """An uninterrupted run of the loop that refines by edits (one edit failing)."""
    markers = tmp_path_factory.mktemp("edits-reference") / "markers"
    graph = build(EditRecorder(str(markers)), InMemorySaver())
    config = {"configurable": {"thread_id": "edits-reference"}}
    graph.invoke({"task": "Describe the sea."}, config, durability="sync")
    result = summary(graph.get_state(config).values)
    assert result["stop_reason"] == "target_reached"
    assert result["edits"] == [None, 2, 0, 2, 2, 2]
    failed = result["attempts"][FAILED_EDIT_INDEX]
    assert failed[1] == result["attempts"][FAILED_EDIT_INDEX - 1][1] and failed[2] == 0.0
    assert result["value"] == "sea v5\nwaves: 5\nthe end"
    return result, read_lines(markers)


EDIT_KILL_POINTS = [(2, 0.0), (5, 1.3), (6, 0.5), (9, 0.0)]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("line", "wait"), EDIT_KILL_POINTS, ids=[f"call{k}" for k, _ in EDIT_KILL_POINTS]
)
def test_a_run_refining_by_edits_killed_mid_round_resumes_to_the_same_result(
    tmp_path: Path, edits_reference: Any, line: int, wait: float
) -> None:
    ref, ref_calls = edits_reference
    spec, markers, thread = f"sqlite:{tmp_path / 'edits.sqlite'}", tmp_path / "m", "edits"
    proc = start_worker("start", spec, thread, markers, "--delay", str(DELAY), "--edits")
    before = kill_at(proc, markers, line, wait * DELAY)
    result = finish(start_worker("resume", spec, thread, markers, "--edits"))
    check_result(result, ref)  # every edited text and edit count intact
    check_calls(read_lines(markers), ref_calls, interrupted=before[-1:])

"""Checkpoint growth: bytes a checkpointer stores per round, at 20 rounds versus 4.

Each run is one thread: a loop forced to run N generations of distinct 2 KB attempts
(callable generator, zero-latency evaluator that never reaches the target), compiled
with a real saver. Bytes are what the saver holds for that thread: serialized
checkpoints and metadata, channel blobs, and pending writes (for SQLite and Postgres,
the byte length of those columns in the thread's rows). Storage that re-writes the
whole history every step grows quadratically, so its bytes per round grow with N;
storage that writes only what changed keeps bytes per round flat.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from benchmarks._harness import BenchResult, Figure, md_table
from langgraph_refine import Evaluation, create_refine_graph

TARGET = 1.5
SHORT, LONG = 4, 20
ATTEMPT_CHARS = 2048
POSTGRES_URI_ENV = "LANGGRAPH_REFINE_TEST_POSTGRES_URI"
DEFAULT_POSTGRES_URI = "postgresql://postgres@127.0.0.1:5432/test"


def _attempt_text(index: int) -> str:
    # Distinct text per round, so no layer can deduplicate attempts.
    seed = f"attempt {index}: "
    body = "".join(chr(97 + (index * 7 + i * 13) % 26) for i in range(ATTEMPT_CHARS))
    return (seed + body)[:ATTEMPT_CHARS]


def _generator(state: Any) -> str:
    return _attempt_text(len(state.get("attempts") or []))


def _evaluator(response: str, state: Any) -> Evaluation:
    return Evaluation(score=0.5, feedback="Use more of the required words.")


def _nbytes(value: Any) -> int:
    """Bytes in a saver's in-memory structures: every bytes object, recursively."""
    if isinstance(value, bytes | bytearray | memoryview):
        return len(value)
    if isinstance(value, dict):
        return sum(_nbytes(v) for v in value.values())
    if isinstance(value, tuple | list):
        return sum(_nbytes(v) for v in value)
    return 0


def memory_bytes(saver: Any, thread_id: str) -> int:
    """What an `InMemorySaver` holds for one thread."""
    total = _nbytes(saver.storage.get(thread_id, {}))
    total += sum(_nbytes(v) for k, v in saver.blobs.items() if k[0] == thread_id)
    total += sum(_nbytes(v) for k, v in saver.writes.items() if k[0] == thread_id)
    return total


def sqlite_bytes(saver: Any, thread_id: str) -> int:
    """What a `SqliteSaver` holds for one thread (checkpoint, metadata and write values)."""
    with saver.cursor(transaction=False) as cur:
        cur.execute(
            "SELECT COALESCE(SUM(LENGTH(checkpoint) + LENGTH(metadata)), 0) "
            "FROM checkpoints WHERE thread_id = ?",
            (thread_id,),
        )
        checkpoints = cur.fetchone()[0]
        cur.execute(
            "SELECT COALESCE(SUM(LENGTH(value)), 0) FROM writes WHERE thread_id = ?",
            (thread_id,),
        )
        writes = cur.fetchone()[0]
    return int(checkpoints) + int(writes)


def postgres_bytes(saver: Any, thread_id: str) -> int:
    """What a `PostgresSaver` holds for one thread (checkpoints, blobs and writes)."""
    queries = [
        "SELECT COALESCE(SUM(octet_length(checkpoint::text) + octet_length(metadata::text)), 0) "
        "FROM checkpoints WHERE thread_id = %s",
        "SELECT COALESCE(SUM(octet_length(blob)), 0) FROM checkpoint_blobs WHERE thread_id = %s",
        "SELECT COALESCE(SUM(octet_length(blob)), 0) FROM checkpoint_writes WHERE thread_id = %s",
    ]
    total = 0
    with saver._cursor() as cur:
        for query in queries:
            cur.execute(query, (thread_id,))
            row = cur.fetchone()
            total += int(next(iter(row.values())) if isinstance(row, dict) else row[0])
    return total


@contextmanager
def _memory() -> Iterator[Any]:
    from langgraph.checkpoint.memory import InMemorySaver

    yield InMemorySaver()


@contextmanager
def _sqlite() -> Iterator[Any]:
    from langgraph.checkpoint.sqlite import SqliteSaver

    with (
        tempfile.TemporaryDirectory() as tmp,
        SqliteSaver.from_conn_string(str(Path(tmp) / "growth.sqlite")) as saver,
    ):
        yield saver


@contextmanager
def _postgres() -> Iterator[Any]:
    from langgraph.checkpoint.postgres import PostgresSaver

    uri = os.environ.get(POSTGRES_URI_ENV, DEFAULT_POSTGRES_URI)
    with PostgresSaver.from_conn_string(uri) as saver:
        saver.setup()
        yield saver


SAVERS: dict[str, tuple[Callable[[], Any], Callable[[Any, str], int]]] = {
    "InMemorySaver": (_memory, memory_bytes),
    "SqliteSaver": (_sqlite, sqlite_bytes),
    "PostgresSaver": (_postgres, postgres_bytes),
}


def thread_bytes(saver: Any, measure: Callable[[Any, str], int], rounds: int) -> int:
    """Run one loop of `rounds` generations on a fresh thread; return the bytes stored."""
    graph = create_refine_graph(
        _generator, _evaluator, max_iterations=rounds - 1, patience=None, target_score=1.0
    ).compile(checkpointer=saver)
    thread_id = f"growth-{uuid.uuid4()}"
    config: Any = {"configurable": {"thread_id": thread_id}, "recursion_limit": 10_000}
    final = graph.invoke({"task": "Write one sentence."}, config)
    assert len(graph.get_state(config).values["attempts"]) == rounds, final
    return measure(saver, thread_id)


def growth(saver_name: str) -> dict[int, int]:
    """Bytes stored at SHORT and LONG rounds with one saver."""
    factory, measure = SAVERS[saver_name]
    with factory() as saver:
        return {n: thread_bytes(saver, measure, n) for n in (SHORT, LONG)}


def growth_all() -> dict[str, dict[int, int] | str]:
    """Bytes at SHORT and LONG rounds for every saver (an error message if one fails)."""
    out: dict[str, dict[int, int] | str] = {}
    for name in SAVERS:
        try:
            out[name] = growth(name)
        except Exception as exc:  # a missing database is reported, not fatal
            out[name] = f"{type(exc).__name__}: {exc}"
    return out


def growth_with_plain_reducer() -> dict[str, dict[int, int] | str]:
    """The same measurement with the fallback design, in a fresh interpreter."""
    script = (
        "import json; from benchmarks.checkpoint_growth import growth_all; "
        "print(json.dumps(growth_all()))"
    )
    env = {**os.environ, DELTA_SWITCH: "0"}
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env=env,
        cwd=Path(__file__).resolve().parent.parent,
        timeout=600,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the fallback measurement failed: {done.stderr[-2000:]}")
    raw = json.loads(done.stdout.strip().splitlines()[-1])
    return {
        name: {int(k): v for k, v in sizes.items()} if isinstance(sizes, dict) else sizes
        for name, sizes in raw.items()
    }


def run(quick: bool = False) -> BenchResult:
    from langgraph_refine import _state

    result = BenchResult(
        name="checkpoint_growth",
        title=f"checkpoint bytes per round, {LONG} rounds vs {SHORT}",
    )
    design = getattr(_state, "ATTEMPTS_CHANNEL_DESIGN", "reducer")
    measured = {f"{name} ({design})": sizes for name, sizes in growth_all().items()}
    if design != "reducer":
        fallback = growth_with_plain_reducer()
        measured.update({f"{name} (reducer)": sizes for name, sizes in fallback.items()})
    rows = []
    for label, sizes in measured.items():
        if isinstance(sizes, str):
            result.notes.append(f"{label}: not measured ({sizes}).")
            continue
        per_short, per_long = sizes[SHORT] / SHORT, sizes[LONG] / LONG
        ratio = per_long / per_short
        targeted = label.endswith(f"({design})")
        result.figures.append(
            Figure(
                name=f"bytes per round, {LONG} vs {SHORT} rounds, {label}",
                value=ratio,
                target=f"<= {TARGET}x" if targeted else "",
                passed=(ratio <= TARGET) if targeted else None,
                spread="deterministic",
            )
        )
        rows.append(
            [
                label,
                f"{sizes[SHORT]:,}",
                f"{sizes[LONG]:,}",
                f"{per_short:,.0f}",
                f"{per_long:,.0f}",
                f"{ratio:.2f}x",
            ]
        )
    result.tables.append(
        md_table(
            [
                "saver (attempts channel)",
                f"bytes, {SHORT} rounds",
                f"bytes, {LONG} rounds",
                f"per round ({SHORT})",
                f"per round ({LONG})",
                "ratio",
            ],
            rows,
        )
    )
    result.notes.append(__doc__ or "")
    result.notes.append(DESIGN_NOTE)
    return result


DELTA_SWITCH = "LANGGRAPH_REFINE_DELTA_CHANNEL"
DESIGN_NOTE = """
Design: `attempts` is declared as LangGraph's `DeltaChannel` (beta) with a batch form of
the same reducer (`merge_attempt_batches`), so each step stores only the attempts it
adds and the list is rebuilt from those writes (every saver implements the history
walk; a full snapshot is stored every 100 updates). It is chosen at import, behind a
fallback: without `DeltaChannel` (older LangGraph), or with
`LANGGRAPH_REFINE_DELTA_CHANNEL=0`, `attempts` is the plain reducer channel, which
re-serialises the whole list at every step. Rows marked `(reducer)` measure that
fallback in a separate interpreter in the same run. Switch designs only for new
threads: a thread written with the delta channel keeps most of its history in writes.
"""

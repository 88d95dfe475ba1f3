"""The strategy record's cost per round and per read, against the earlier one-item layout.

A run's round exchanges with the record once: it reads the record (the other runs'
pooled counts) and writes its own counts. The earlier layout kept one item per record
key, updated by `get` + `put` (read-modify-write, which loses rounds across processes);
the current one keeps an item per run and a fold item in a namespace per key, read by
one `search` and written by one `batch` (see `langgraph_refine._records._record_items`). Both are
measured on a record already holding 1, 100 and 1000 runs, in SQLite and PostgreSQL
stores: the time of one round's exchange (median of interleaved repetitions, the two
layouts alternating), the time of reading the record alone (what `strategy_records`
does per key), and the items and bytes a read touches. Each size's repetitions add
their own runs (30 more runs, which is why a read touches about 30 items at "1 run").
The earlier layout is reproduced here from its code (its value: totals, the 128 most
recent runs' own counts, folded counts).

What grows with the record is the fold item's bytes (one entry per run ever counted,
which is what lets readers count each run once without compare-and-swap); the earlier
item stayed near 18 kB because it forgot the ids of all but 128 runs. Each process
parses a fold once and keeps its sum (folds never change), so the time a read adds per
run is the store's own transfer and decoding of those bytes.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from langgraph.store.base import BaseStore

from benchmarks._harness import BenchResult, Figure, md_table, median, spread_text
from langgraph_refine import Attempt, Evaluation
from langgraph_refine._records._record import RecordUpdate, StrategyRecord, _search_all, exchange
from langgraph_refine._records._record_items import read_items, record_namespace

POSTGRES_URI_ENV = "LANGGRAPH_REFINE_TEST_POSTGRES_URI"
DEFAULT_POSTGRES_URI = "postgresql://postgres@127.0.0.1:5432/test"
SIZES = (1, 100, 1000)
REPS = 30
OLD_NAMESPACE = ("langgraph_refine", "strategy_old")  # apart from the current layout's
RECENT_RUNS = 128  # the earlier layout's runs with an entry of their own


def attempts(rounds: int) -> list[Attempt]:
    """One run's attempts: attempt 0, then `rounds` refinements (some raise, some fall)."""
    scores = [0.3 + 0.2 * ((i * 7) % 3) / 2 for i in range(rounds + 1)]
    return [
        Attempt(
            index=i,
            response=f"a{i}",
            parent=None if i == 0 else i - 1,
            move=None if i == 0 else ("refine" if i % 2 else "sample"),
            evaluation=Evaluation(score=s),
        )
        for i, s in enumerate(scores)
    ]


# -- the earlier layout, reproduced ----------------------------------------------------------


def old_exchange(store: BaseStore, key: str, loop_id: str, counts: dict[str, Any]) -> Any:
    """The earlier round: `get` the record's one item, replace this run's entry, `put` it."""
    item = store.get(OLD_NAMESPACE, key)
    value = item.value if item else {"moves": {}, "runs": {}, "earlier": {}, "seq": 0}
    seq = value["seq"] + 1
    runs = {**value["runs"], loop_id: {"seq": seq, "moves": counts}}
    earlier = value["earlier"]
    while len(runs) > RECENT_RUNS:
        oldest = min(runs, key=lambda run: runs[run]["seq"])
        earlier = _add(earlier, runs.pop(oldest)["moves"])
    moves = earlier
    for entry in runs.values():
        moves = _add(moves, entry["moves"])
    new = {"moves": moves, "runs": runs, "earlier": earlier, "seq": seq, "version": 1}
    store.put(OLD_NAMESPACE, key, new, index=False)
    others = dict(earlier)
    for run, entry in runs.items():
        if run != loop_id:
            others = _add(others, entry["moves"])
    return others


def _add(left: dict[str, Any], right: dict[str, Any]) -> dict[str, Any]:
    total = {kind: dict(stats) for kind, stats in left.items()}
    for kind, stats in right.items():
        mine = total.setdefault(kind, {"rounds": 0, "raised": 0, "fell": 0})
        for name, n in stats.items():
            mine[name] = mine.get(name, 0) + n
    return total


def old_read(store: BaseStore, key: str) -> Any:
    """The earlier read of one record: its one item's totals."""
    item = store.get(OLD_NAMESPACE, key)
    return item.value["moves"] if item else {}


def new_read(store: BaseStore, key: str) -> Any:
    """The current read of one record: its namespace's items, one entry per run, summed."""
    return StrategyRecord.from_view(read_items(_search_all(store, record_namespace(key)))).moves


# -- the measurement ---------------------------------------------------------------------


def plain_counts(rounds: int) -> dict[str, Any]:
    update = RecordUpdate("k", "x", attempts(rounds))
    return {kind: stats.to_dict() for kind, stats in update.counts().items()}


def fill(store: BaseStore, key: str, runs: int) -> None:
    """A record of `runs` runs of 3 rounds each, in both layouts."""
    counts = plain_counts(3)
    for run in range(runs):
        loop_id = f"fill{run}"
        exchange(store, RecordUpdate(key, loop_id, attempts(3)))
        old_exchange(store, key, loop_id, counts)


def time_rounds(store: BaseStore, key: str) -> tuple[list[float], list[float]]:
    """Seconds of one round's exchange, current and earlier layout, interleaved."""
    new: list[float] = []
    old: list[float] = []
    for rep in range(REPS):
        loop_id, rounds = f"bench{uuid.uuid4().hex}", 1 + rep % 3
        update = RecordUpdate(key, loop_id, attempts(rounds))
        order: list[tuple[list[float], Callable[[], Any]]] = [
            (new, functools.partial(exchange, store, update)),
            (old, functools.partial(old_exchange, store, key, loop_id, plain_counts(rounds))),
        ]
        for times, call in order if rep % 2 else order[::-1]:
            start = time.perf_counter()
            call()
            times.append(time.perf_counter() - start)
    return new, old


def time_reads(store: BaseStore, key: str) -> tuple[list[float], list[float]]:
    new: list[float] = []
    old: list[float] = []
    for rep in range(max(5, REPS // 3)):
        order = [
            (new, functools.partial(new_read, store, key)),
            (old, functools.partial(old_read, store, key)),
        ]
        for times, call in order if rep % 2 else order[::-1]:
            start = time.perf_counter()
            call()
            times.append(time.perf_counter() - start)
    return new, old


def footprint(store: BaseStore, key: str) -> tuple[int, int, int]:
    """Items and bytes a current read touches; bytes of the earlier layout's item."""
    items = store.search(record_namespace(key), limit=10_000)
    size = sum(len(json.dumps(i.value)) for i in items)
    old = store.get(OLD_NAMESPACE, key)
    return len(items), size, len(json.dumps(old.value)) if old else 0


@contextlib.contextmanager
def sqlite_store() -> Iterator[BaseStore]:
    from langgraph.store.sqlite import SqliteStore

    with (
        tempfile.TemporaryDirectory() as tmp,
        SqliteStore.from_conn_string(str(Path(tmp) / "record.sqlite")) as store,
    ):
        store.setup()
        yield store


@contextlib.contextmanager
def postgres_store() -> Iterator[BaseStore]:
    from langgraph.store.postgres import PostgresStore

    with PostgresStore.from_conn_string(
        os.environ.get(POSTGRES_URI_ENV, DEFAULT_POSTGRES_URI)
    ) as store:
        store.setup()
        yield store


STORES = {"SqliteStore": sqlite_store, "PostgresStore": postgres_store}


def run(quick: bool = False) -> BenchResult:
    global REPS
    if quick:
        REPS = 6
    result = BenchResult(
        name="record",
        title="strategy record: cost of a round's exchange and of a read, vs the one-item layout",
    )
    rows = []
    for store_name, factory in STORES.items():
        try:
            with factory() as store:
                rows += measure(store, store_name, result)
        except Exception as exc:  # a missing database is reported, not fatal
            result.notes.append(f"{store_name}: not measured ({type(exc).__name__}: {exc}).")
    result.tables.append(
        md_table(
            [
                "store",
                "runs in the record",
                "round, current (ms)",
                "round, one-item (ms)",
                "read, current (ms)",
                "read, one-item (ms)",
                "items a read touches",
                "bytes read, current",
                "bytes, one-item",
            ],
            rows,
        )
    )
    paragraphs = (__doc__ or "").split("\n\n")[1:]
    result.notes += [" ".join(p.split()) for p in paragraphs]
    return result


def measure(store: BaseStore, store_name: str, result: BenchResult) -> list[list[Any]]:
    rows = []
    key, filled = f"bench-{uuid.uuid4().hex}", 0
    for size in SIZES:
        fill(store, key, size - filled)
        filled = size
        new, old = time_rounds(store, key)
        read_new, read_old = time_reads(store, key)
        items, size_new, size_old = footprint(store, key)
        ratios = [n / o for n, o in zip(new, old, strict=True)]
        result.figures.append(
            Figure(
                name=f"round's exchange, current / one-item layout, {size} runs, {store_name}",
                value=median(ratios),
                spread=spread_text(ratios),
            )
        )
        rows.append(
            [
                store_name,
                size,
                f"{median(new) * 1000:.2f}",
                f"{median(old) * 1000:.2f}",
                f"{median(read_new) * 1000:.2f}",
                f"{median(read_old) * 1000:.2f}",
                items,
                f"{size_new:,}",
                f"{size_old:,}",
            ]
        )
    return rows

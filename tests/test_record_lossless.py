"""The strategy record loses no round and counts none twice, across processes and compactions.

Real OS processes share one SQLite file or one PostgreSQL database, each making many
explore runs; afterwards the record's counts equal the rounds they made. The layout's
rules (a run replaces its own counts; a compaction folds items and deletes only what it
folded; overlapping folds and a run both folded and present count once) are checked on
the items themselves.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore

from langgraph_refine import Attempt, Evaluation, strategy_records
from langgraph_refine._decisions._strategy import MoveStats
from langgraph_refine._records._record import RecordUpdate, exchange, read_records
from langgraph_refine._records._record_items import COMPACT_AT, record_namespace
from tests.conftest import POSTGRES_URI_ENV, postgres_uri

ROOT = Path(__file__).resolve().parent.parent
PROCESSES = 3
RUNS = 24  # per process: 3 x 24 runs of 1-4 rounds, past the default COMPACT_AT (64)


def total_rounds(store: BaseStore, key: str) -> int:
    """The record's rounds, checked to be the same counted by kind and by state."""
    record = strategy_records(store)[key]
    by_state = record.pop("states", {})
    scores = record.pop("scores", {})
    total = sum(stats["rounds"] for stats in record.values())
    assert sum(s["rounds"] for kinds in by_state.values() for s in kinds.values()) == total
    # Every answer's outcome counts once, attempt 0 included: the rounds and one per run.
    runs = len(read_records(store)[key].runs)
    assert sum(n for bins in scores.values() for n in bins.values()) == total + runs
    return total


@pytest.fixture
def shared(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, BaseStore]]:
    """A store spec the worker processes open, and this process's own view of it."""
    if request.param == "sqlite":
        from langgraph.store.sqlite import SqliteStore

        path = tmp_path / "store.sqlite"
        with SqliteStore.from_conn_string(str(path)) as store:
            store.setup()
            yield f"sqlite:{path}", store
    else:
        uri = postgres_uri()
        if not uri:
            pytest.fail(f"{POSTGRES_URI_ENV} is not set; `make test` sets it")
        from langgraph.store.postgres import PostgresStore

        with PostgresStore.from_conn_string(uri) as store:
            store.setup()
            yield uri, store


# Both stores fold many times over (6); the default threshold on one of them (the
# fourth combination repeated the paths of these three).
@pytest.mark.slow
@pytest.mark.parametrize(
    ("shared", "compact_at"),
    [("sqlite", 6), ("postgres", 6), ("postgres", COMPACT_AT)],
    indirect=["shared"],
)
def test_processes_sharing_a_store_lose_no_round(
    shared: tuple[str, BaseStore], compact_at: int
) -> None:
    spec, store = shared
    key = f"procs-{uuid.uuid4().hex}"
    command = [sys.executable, "-m", "tests.record_worker", "--store", spec, "--key", key]
    command += ["--runs", str(RUNS), "--compact-at", str(compact_at)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    workers = [
        subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for _ in range(PROCESSES)
    ]
    made = 0
    for worker in workers:
        out, err = worker.communicate(timeout=300)
        assert worker.returncode == 0, err.decode()
        assert b"the store failed" not in err, err.decode()
        made += json.loads(out.decode().strip().splitlines()[-1])["rounds"]
    assert made >= PROCESSES * RUNS  # every run made at least one round
    assert total_rounds(store, key) == made
    record = read_records(store)[key]
    assert len(record.runs) == PROCESSES * RUNS
    items = store.search(record_namespace(key), limit=1000)
    # Folded (many times over at 6, at least once at the default): fewer items than runs.
    assert any(i.key.startswith("fold:") for i in items)
    assert len(items) < PROCESSES * RUNS


# -- the layout's rules, item by item --------------------------------------------------------


def attempts(scores: list[float]) -> list[Attempt]:
    """Attempts of one run: attempt 0, then refinements of the latest one."""
    return [
        Attempt(
            index=i,
            response=f"a{i}",
            parent=None if i == 0 else i - 1,
            evaluation=Evaluation(score=score),
        )
        for i, score in enumerate(scores)
    ]


def items(store: BaseStore, key: str) -> dict[str, Any]:
    return {i.key: i.value for i in store.search(record_namespace(key), limit=1000)}


def test_a_run_keeps_one_item_holding_its_latest_counts() -> None:
    store, key = InMemoryStore(), "k"
    for n in range(2, 5):
        exchange(store, RecordUpdate(key, "run1", attempts([0.1, 0.2, 0.3, 0.4][:n])))
    assert list(items(store, key)) == ["run:run1:3"]
    exchange(store, RecordUpdate(key, "run1", attempts([0.1, 0.2, 0.3, 0.4])))  # a replay
    assert list(items(store, key)) == ["run:run1:3"]
    record = strategy_records(store)[key]
    assert set(record.pop("states")) == {"b0/start", "b0/up", "b1/up"}
    assert record.pop("scores") == {
        "sample": {"1": 1},
        "refine@b0": {"+1": 2},
        "refine@b1": {"+1": 1},
    }
    assert record == {"refine": {"rounds": 3, "raised": 3, "fell": 0}}


def test_each_run_reads_the_others_counts_without_its_own() -> None:
    store, key = InMemoryStore(), "k"
    assert exchange(store, RecordUpdate(key, "a", attempts([0.1, 0.2]))) == {}
    others = exchange(store, RecordUpdate(key, "b", attempts([0.1, 0.05])))
    assert others is not None and others["refine"].raised == 1
    again = exchange(store, RecordUpdate(key, "a", attempts([0.1, 0.2, 0.3])))
    assert again is not None and again["refine"].fell == 1 and again["refine"].rounds == 1


def test_a_compaction_folds_every_item_it_read_into_one() -> None:
    store, key = InMemoryStore(), "k"
    for run in range(COMPACT_AT + 1):
        exchange(store, RecordUpdate(key, f"r{run}", attempts([0.1, 0.2])))
    found = items(store, key)
    [fold] = [k for k in found if k.startswith("fold:")]
    assert len(found) == 1  # the last writer folded all 64 items and its own counts
    assert len(found[fold]["fold"]) == COMPACT_AT + 1
    assert total_rounds(store, key) == COMPACT_AT + 1
    exchange(store, RecordUpdate(key, "r0", attempts([0.1, 0.2, 0.3])))  # a folded run goes on
    assert total_rounds(store, key) == COMPACT_AT + 2  # its new item replaces its folded entry


def test_overlapping_folds_and_a_run_both_folded_and_present_count_once() -> None:
    store, key = InMemoryStore(), "k"
    namespace = record_namespace(key)
    moves = {"refine": {"rounds": 2, "raised": 1, "fell": 0}}
    longer = {"refine": {"rounds": 3, "raised": 1, "fell": 1}}
    # Two compactions at once folded runs a and b (one saw a's later counts), and run a
    # is still present with its latest item.
    store.put(namespace, "fold:1", {"fold": {"a": {"n": 2, "moves": moves}}, "version": 2})
    both = {"a": {"n": 3, "moves": longer}, "b": {"n": 2, "moves": moves}}
    store.put(namespace, "fold:2", {"fold": both, "version": 2})
    store.put(namespace, "run:a:3", {"run": "a", "n": 3, "moves": longer, "version": 2})
    assert strategy_records(store)[key] == {"refine": {"rounds": 5, "raised": 2, "fell": 1}}


def test_a_level_beside_moves_is_summed_per_run_the_same_way() -> None:
    # The documented place for a ladder's per-rung counts: summed leaf by leaf, a run's
    # larger entry kept, `cost` allowed to be a fraction.
    from langgraph_refine._records._record_items import read_items

    store, key = InMemoryStore(), "k"
    namespace = record_namespace(key)
    rung = {"small": {"rounds": 2, "raised": 1, "fell": 0, "cost": 0.25}}
    for run in ("a", "b"):
        value = {"run": run, "n": 2, "moves": {}, "rungs": rung, "version": 2}
        store.put(namespace, f"run:{run}:2", value)
    view = read_items(store.search(namespace))
    assert view.total()["rungs"] == {"small": {"rounds": 4, "raised": 2, "fell": 0, "cost": 0.5}}
    store.put(namespace, "run:c:1", {"run": "c", "n": 1, "moves": {"refine": {"rounds": -1}}})
    assert "c" not in read_items(store.search(namespace)).runs  # a negative count: left out


def brute_total(items: list[Any], without: str | None) -> dict[str, dict[str, int]]:
    """The rule, spelled out: per run the entry with the largest n (a tie: the run item's)."""
    best: dict[str, tuple[int, int, dict[str, Any]]] = {}  # run -> (n, is run item, moves)
    for item in items:
        entries = (
            [(r, e["n"], 0, e["moves"]) for r, e in item.value["fold"].items()]
            if "fold" in item.value
            else [(item.value["run"], item.value["n"], 1, item.value["moves"])]
        )
        for run, n, live, moves in entries:
            if run not in best or (n, live) > best[run][:2]:
                best[run] = (n, live, moves)
    total: dict[str, dict[str, int]] = {}
    for run, (_, _, moves) in best.items():
        if run == without:
            continue
        for kind, stats in moves.items():
            mine = total.setdefault(kind, {"rounds": 0, "raised": 0, "fell": 0})
            for name, value in stats.items():
                mine[name] += value
    return total


@pytest.mark.parametrize("folds", [0, 1, 2, 3])
def test_totals_read_from_a_folds_sum_equal_the_run_by_run_rule(folds: int) -> None:
    import random

    from langgraph_refine._records._record_items import read_items

    rng = random.Random(folds)
    for trial in range(30):
        store, namespace = InMemoryStore(), record_namespace(f"k{trial}")

        def moves() -> dict[str, Any]:
            rounds = rng.randint(1, 4)
            kinds = rng.sample(["refine", "sample", "revise"], rng.randint(1, 2))
            return {
                k: {"rounds": rounds, "raised": rng.randint(0, rounds), "fell": 0} for k in kinds
            }

        runs = [f"r{i}" for i in range(12)]
        for f in range(folds):
            folded = {r: {"n": rng.randint(1, 5), "moves": moves()} for r in rng.sample(runs, 8)}
            store.put(namespace, f"fold:{f}", {"fold": folded, "version": 2})
        for run in rng.sample(runs, 6):
            n = rng.randint(1, 5)
            store.put(namespace, f"run:{run}:{n}", {"run": run, "n": n, "moves": moves()})
        items = store.search(namespace, limit=100)
        view = read_items(items)
        for without in [None, *runs]:
            got = view.total(without=without).get("moves", {})
            assert got == brute_total(items, without), (trial, without)


def test_an_item_is_parsed_once_per_process_and_again_if_rewritten() -> None:
    from langgraph_refine._records._record_items import Fold, Live, _parsed

    store, namespace = InMemoryStore(), record_namespace("k")
    value = {"fold": {"a": {"n": 1, "moves": {"refine": {"rounds": 1, "raised": 1, "fell": 0}}}}}
    store.put(namespace, "fold:x", value)
    run = {"run": "b", "n": 1, "moves": {"sample": {"rounds": 1, "raised": 0, "fell": 0}}}
    store.put(namespace, "run:b:1", run)
    fold, live = (_parsed(item) for item in sorted(store.search(namespace), key=lambda i: i.key))
    assert isinstance(fold, Fold) and isinstance(live, Live)
    again = {item.key: _parsed(item) for item in store.search(namespace)}
    assert again["fold:x"] is fold and again["run:b:1"] is live
    value["fold"]["a"]["n"] = 2
    store.put(namespace, "fold:x", value)  # rewritten (a newer updated_at): read afresh
    run["moves"]["sample"]["rounds"] = 2
    store.put(namespace, "run:b:1", run)
    again = {item.key: _parsed(item) for item in store.search(namespace)}
    assert isinstance(again["fold:x"], Fold) and again["fold:x"].entries["a"].n == 2
    assert isinstance(again["run:b:1"], Live)
    assert again["run:b:1"].entry.counts["moves"]["sample"]["rounds"] == 2


def test_items_without_a_namespace_or_time_are_read_all_the_same() -> None:
    # As read through LangGraph Server's HTTP API: only key and value.
    from types import SimpleNamespace

    from langgraph_refine._records._record_items import read_items

    moves = {"refine": {"rounds": 2, "raised": 1, "fell": 0}}
    items = [
        SimpleNamespace(key="run:a:2", value={"run": "a", "n": 2, "moves": moves}),
        SimpleNamespace(key="fold:x", value={"fold": {"b": {"n": 1, "moves": moves}}}),
    ]
    for _ in range(2):
        totals = read_items(items).total()["moves"]
        assert totals == {"refine": {"rounds": 4, "raised": 2, "fell": 0}}


def test_a_cached_item_that_is_unreadable_stays_unreadable() -> None:
    # A bad item raises on every read (never cached), so each read logs and leaves it out.
    from langgraph_refine._records._record_items import read_items

    store, namespace = InMemoryStore(), record_namespace("k")
    store.put(namespace, "run:c:1", {"run": "c", "n": 1, "moves": {"refine": {"rounds": -1}}})
    for _ in range(2):
        view = read_items(store.search(namespace))
        assert view.runs == {} and view.items == ["run:c:1"]


def test_flat_counters_round_trip() -> None:
    from langgraph_refine._records._record_items import flatten, unflatten

    nested = {"moves": {"refine": {"rounds": 2, "raised": 1}}, "rungs": {"m": {"cost": 0.5}}}
    assert unflatten(flatten(nested)) == nested
    assert flatten(nested, flatten(nested), sign=-1) == {path: 0 for path in flatten(nested)}


def test_counts_by_state_survive_a_compaction_and_an_older_record_still_reads() -> None:
    from langgraph_refine._decisions._strategy import state_kind

    store, key = InMemoryStore(), "k"
    namespace = record_namespace(key)
    old = {"refine": {"rounds": 2, "raised": 1, "fell": 0}}
    store.put(namespace, "run:old:2", {"run": "old", "n": 2, "moves": old, "version": 2})
    for run in range(COMPACT_AT + 1):
        exchange(store, RecordUpdate(key, f"r{run}", attempts([0.1, 0.6])))
    others = exchange(store, RecordUpdate(key, "last", attempts([0.1, 0.6])))
    assert any(k.startswith("fold:") for k in items(store, key))
    assert others is not None
    assert others["refine"] == MoveStats(rounds=COMPACT_AT + 3, raised=COMPACT_AT + 2)
    # Every new run's round started from b0/start and raised; the old run has no states.
    assert others[state_kind("refine", "b0/start")] == MoveStats(COMPACT_AT + 1, COMPACT_AT + 1)
    assert strategy_records(store)[key]["states"] == {
        "b0/start": {"refine": {"rounds": COMPACT_AT + 2, "raised": COMPACT_AT + 2, "fell": 0}}
    }

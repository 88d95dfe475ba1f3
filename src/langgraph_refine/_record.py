"""The strategy record: what earlier runs learned about each kind of move, in a LangGraph store.

`strategy="explore"` weighs, at every choice, the counts pooled over earlier runs with
this run's own (see `_strategy`). The pooled counts live in the run's LangGraph store
(`compile(store=...)`, the store LangGraph Server gives every graph, `refine(...,
store=...)`, an agent's store): one item per record key under `RECORD_NAMESPACE`.

The key names what the counts are about: the generator's model (provider and model name
as LangChain reports them, else the class or function name) and the evaluator's kind
(its name, not its arguments), e.g. `"openai:gpt-4o-mini|contains_all"`; `record_key=`
sets it instead.

The item's value (JSON):

    {"moves": {"refine": {"rounds": 12, "raised": 3, "fell": 8}, "sample": {...}},
     "runs": {"<loop id>": {"seq": 41, "moves": {...}}, ...},
     "earlier": {...}, "seq": 41, "version": 1}

`moves` is the record: the totals over every counted run. `runs` holds each recent run's
own counts (as `round_stats` gives them for its attempts so far), `earlier` the folded
counts of runs that dropped out of `runs`; `moves` is always `earlier` plus the sum of
`runs`.

Why this shape:

- Replays do not double count. After every evaluated round a run writes its counts so
  far, replacing its own entry rather than adding to a total: a round replayed after a
  crash, or a resumed run, writes the same counts again.
- Concurrent runs lose no counts in one process. Each update (one `get`, one `put`)
  holds a lock per store and key, so the loops of a batch or of `abatch` cannot
  interleave their read-modify-write. Across processes (server workers) the store offers
  no compare-and-swap; two writers racing can drop the other's latest entry, but since
  every write carries the writer's whole count, a run's next round restores it. Only a
  run's last write can be lost that way.
- The item stays small. Only the `RECENT_RUNS` most recently written runs keep an
  entry; older ones are folded into `earlier`. A run still going when folded would count
  its earlier rounds twice, which needs `RECENT_RUNS` other runs to write in between.

A run is identified by the `loop_id` its `prepare` step writes to state (kept by the
checkpointer, so a resumed run keeps it). A store error is logged and the run goes on
without the record: learning is an optimisation, never a reason to fail a loop.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from langgraph.runtime import get_runtime
from langgraph.store.base import BaseStore

from langgraph_refine._kinds import model_name
from langgraph_refine._options import LoopOptions
from langgraph_refine._state import Attempt
from langgraph_refine._strategy import MoveStats, round_stats

logger = logging.getLogger("langgraph_refine")
T = TypeVar("T")

RECORD_NAMESPACE: tuple[str, ...] = ("langgraph_refine", "strategy")
"""The store namespace of strategy records; each record is one item, keyed by its record key."""

RECENT_RUNS = 128
"""Runs that keep their own entry in a record (older ones are folded into its totals)."""

Counts = dict[str, MoveStats]
"""Counts per kind of move: `{"refine": MoveStats(...), "sample": ...}`."""


# -- the record key ----------------------------------------------------------------------


def compose_key(model: str | None, evaluator: Any, record_key: str | None = None) -> str | None:
    """The record key of a run: `record_key` if set, else `"<model>|<evaluator kind>"`.

    The one place a key is composed (the graph, the middleware and `record_key` use it).
    None when neither `record_key` nor the model is known: such a run keeps no record.
    """
    if record_key is not None:
        return record_key
    return None if not model else f"{model}|{evaluator_kind(evaluator)}"


def record_store(strategy: str, store: BaseStore | None) -> BaseStore | None:
    """The store a run keeps its record in: its own, when it explores; else None.

    The one place that says which runs keep a record (only explore reads or writes it).
    """
    return store if strategy == "explore" else None


def record_key(generator: Any, evaluator: Any) -> str:
    """The default record key: the generator's model and the evaluator's kind.

    Args:
        generator: The loop's generator (chat model, runnable, graph or callable).
        evaluator: The loop's evaluator (any `BaseEvaluator`).

    Returns:
        `"<model>|<evaluator kind>"`, e.g. `"openai:gpt-4o-mini|llm_judge"`.

    Example:
        >>> from langgraph_refine.evaluators import contains_all
        >>> def write(state): return "text"
        >>> record_key(write, contains_all(["a"]))
        'write|contains_all'
    """
    key = compose_key(model_name(generator), evaluator)
    assert key is not None  # every generator has a name
    return key


def evaluator_kind(evaluator: Any) -> str:
    """The evaluator's kind: its name (a combined evaluator: its parts' names).

    Example:
        >>> from langgraph_refine.evaluators import combine, contains_all, word_count
        >>> evaluator_kind(combine(contains_all(["a"]), word_count(1, 5)))
        'combined(contains_all+word_count)'
    """
    parts = getattr(evaluator, "parts", None)
    name = str(getattr(evaluator, "name", None) or type(evaluator).__name__)
    if parts:
        return f"{name}({'+'.join(evaluator_kind(p) for p in parts)})"
    return name


# -- the stored value --------------------------------------------------------------------


@dataclass(frozen=True)
class StrategyRecord:
    """A strategy record as stored: totals, recent runs' own counts, folded counts.

    Attributes:
        moves: The totals per kind of move (what explore and `report` read).
        runs: Recent runs' own counts by loop id, each with the sequence number of its
            latest write.
        earlier: The folded counts of runs no longer in `runs`.
        seq: The sequence number of the latest write.
    """

    moves: Counts = field(default_factory=dict)
    runs: dict[str, tuple[int, Counts]] = field(default_factory=dict)
    earlier: Counts = field(default_factory=dict)
    seq: int = 0

    @classmethod
    def from_value(cls, value: Mapping[str, Any] | None) -> StrategyRecord:
        """Parse a stored value; anything unreadable counts as an empty record."""
        if not isinstance(value, Mapping):
            return cls()
        try:
            runs = {
                str(run): (int(entry["seq"]), _counts(entry["moves"]))
                for run, entry in (value.get("runs") or {}).items()
            }
            return cls(
                moves=_counts(value.get("moves")),
                runs=runs,
                earlier=_counts(value.get("earlier")),
                seq=int(value.get("seq", 0)),
            )
        except (TypeError, ValueError, KeyError, AttributeError):
            logger.warning("strategy record unreadable (%.200r); starting it afresh", value)
            return cls()

    def to_value(self) -> dict[str, Any]:
        """The JSON value to store."""
        return {
            "moves": _plain(self.moves),
            "runs": {
                run: {"seq": seq, "moves": _plain(counts)}
                for run, (seq, counts) in self.runs.items()
            },
            "earlier": _plain(self.earlier),
            "seq": self.seq,
            "version": 1,
        }

    def with_run(self, loop_id: str, counts: Counts) -> StrategyRecord:
        """This record with one run's counts replaced (not added), oldest runs folded."""
        seq = self.seq + 1
        runs = {**self.runs, loop_id: (seq, dict(counts))}
        earlier = dict(self.earlier)
        while len(runs) > RECENT_RUNS:
            oldest = min(runs, key=lambda run: runs[run][0])
            earlier = _sum(earlier, runs.pop(oldest)[1])
        moves = earlier
        for _, run_counts in runs.values():
            moves = _sum(moves, run_counts)
        return StrategyRecord(moves=moves, runs=runs, earlier=earlier, seq=seq)

    def without(self, loop_id: str | None) -> Counts:
        """The totals without one run's own counts (the pooled evidence of the others)."""
        if loop_id is None or loop_id not in self.runs:
            return dict(self.moves)
        others = dict(self.earlier)
        for run, (_, counts) in self.runs.items():
            if run != loop_id:
                others = _sum(others, counts)
        return others


def _counts(value: Any) -> Counts:
    if not value:
        return {}
    return {str(kind): MoveStats.from_dict(stats) for kind, stats in value.items()}


def _plain(counts: Counts) -> dict[str, dict[str, int]]:
    return {kind: stats.to_dict() for kind, stats in sorted(counts.items())}


def _sum(left: Counts, right: Counts) -> Counts:
    total = dict(left)
    for kind, stats in right.items():
        total[kind] = total[kind] + stats if kind in total else stats
    return total


# -- reading and writing -----------------------------------------------------------------


@dataclass(frozen=True)
class RecordUpdate:
    """One run's exchange with the record after an evaluated round.

    Args:
        key: The record key.
        loop_id: This run's id (None: read only, nothing is written).
        attempts: This run's attempts so far (the round just evaluated included).
    """

    key: str
    loop_id: str | None
    attempts: Sequence[Attempt]

    def counts(self) -> Counts:
        """This run's own counts so far."""
        return round_stats(self.attempts)

    def apply(self, value: Mapping[str, Any] | None) -> tuple[StrategyRecord, bool]:
        """The record after this update, and whether it changed (needs a `put`)."""
        record = StrategyRecord.from_value(value)
        if self.loop_id is None:
            return record, False
        counts = self.counts()
        known = record.runs.get(self.loop_id)
        if (known[1] if known else {}) == counts:  # a replay, or a round 0: nothing new
            return record, False
        return record.with_run(self.loop_id, counts), True


def run_record(
    state: Mapping[str, Any],
    attempts: Sequence[Attempt],
    options: LoopOptions,
    key: str | None,
) -> tuple[BaseStore, RecordUpdate] | None:
    """The running graph's store and this round's update, when the run keeps a record.

    A run keeps one when its strategy is `"explore"`, it has a record key, and the graph
    runs with a store; otherwise None (no record, and explore acts as without one).

    Args:
        state: The loop's state (its `loop_id` names this run in the record).
        attempts: The attempts so far, the one just evaluated included.
        options: The run's options (its strategy).
        key: The run's record key (None: no record).
    """
    if key is None:
        return None
    try:
        store = record_store(options.strategy, get_runtime().store)
    except RuntimeError:  # a node called outside a graph run
        return None
    if store is None:
        return None
    return store, RecordUpdate(key, state.get("loop_id"), attempts)


def exchange(store: BaseStore, update: RecordUpdate) -> Counts | None:
    """Write this run's counts to the record and return the others' pooled counts (sync).

    Returns:
        The pooled counts of the other runs, or None if the store failed (logged).
    """
    try:
        with _thread_lock(store, update.key):
            item = store.get(RECORD_NAMESPACE, update.key)
            record, changed = update.apply(item.value if item else None)
            if changed:
                store.put(RECORD_NAMESPACE, update.key, record.to_value(), index=False)
    except Exception as exc:  # the record is an optimisation: the loop goes on without it
        _store_failed(exc, update.key)
        return None
    return record.without(update.loop_id)


async def aexchange(store: BaseStore, update: RecordUpdate) -> Counts | None:
    """Async twin of `exchange`."""
    try:
        async with _async_lock(store, update.key):
            item = await _run(store, store.aget, store.get, RECORD_NAMESPACE, update.key)
            record, changed = update.apply(item.value if item else None)
            if changed:
                await _run(
                    store,
                    store.aput,
                    store.put,
                    RECORD_NAMESPACE,
                    update.key,
                    record.to_value(),
                    index=False,
                )
    except Exception as exc:  # the record is an optimisation: the loop goes on without it
        _store_failed(exc, update.key)
        return None
    return record.without(update.loop_id)


def read_records(store: BaseStore) -> dict[str, StrategyRecord]:
    """Every strategy record in the store, by record key (for reports).

    Args:
        store: The store to read.

    Returns:
        The records, sorted by key.
    """
    found: dict[str, StrategyRecord] = {}
    offset = 0
    while True:
        page = store.search(RECORD_NAMESPACE, limit=100, offset=offset)
        for item in page:
            if tuple(item.namespace) == RECORD_NAMESPACE:
                found[item.key] = StrategyRecord.from_value(item.value)
        if len(page) < 100:
            return dict(sorted(found.items()))
        offset += len(page)


async def aread_records(store: BaseStore) -> dict[str, StrategyRecord]:
    """Async twin of `read_records`."""
    found: dict[str, StrategyRecord] = {}
    offset = 0
    while True:
        page = await store.asearch(RECORD_NAMESPACE, limit=100, offset=offset)
        for item in page:
            if tuple(item.namespace) == RECORD_NAMESPACE:
                found[item.key] = StrategyRecord.from_value(item.value)
        if len(page) < 100:
            return dict(sorted(found.items()))
        offset += len(page)


async def _run(
    store: BaseStore,
    method: Callable[..., Any],
    sync: Callable[..., Any],
    *args: Any,
    **kwargs: Any,
) -> Any:
    """Await a store's async method; a store with only sync methods runs in a worker thread."""
    try:
        return await method(*args, **kwargs)
    except NotImplementedError:  # e.g. the sync SqliteStore under arefine
        return await asyncio.to_thread(sync, *args, **kwargs)


def _store_failed(exc: BaseException, key: str) -> None:
    logger.warning(
        "strategy record %r: the store failed (%s: %s); this round goes on without the record",
        key,
        type(exc).__name__,
        exc,
    )


# One lock per store and record key, so one process never interleaves two updates of the
# same record. Held weakly by store (and, for asyncio locks, by event loop: an asyncio
# lock belongs to one loop).
_THREAD_LOCKS: weakref.WeakKeyDictionary[BaseStore, dict[str, threading.Lock]] = (
    weakref.WeakKeyDictionary()
)
_ASYNC_LOCKS: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, weakref.WeakKeyDictionary[BaseStore, dict[str, asyncio.Lock]]
] = weakref.WeakKeyDictionary()
_GUARD = threading.Lock()


def _thread_lock(store: BaseStore, key: str) -> threading.Lock:
    with _GUARD:
        return _per_store(_THREAD_LOCKS, _THREAD_LOCKS_BY_ID, store).setdefault(
            key, threading.Lock()
        )


def _async_lock(store: BaseStore, key: str) -> asyncio.Lock:
    loop = asyncio.get_running_loop()
    with _GUARD:
        by_store = _ASYNC_LOCKS.setdefault(loop, weakref.WeakKeyDictionary())
        by_id = _ASYNC_LOCKS_BY_ID.setdefault(loop, {})
        return _per_store(by_store, by_id, store).setdefault(key, asyncio.Lock())


def _per_store(
    locks: weakref.WeakKeyDictionary[BaseStore, dict[str, T]],
    by_id: dict[int, dict[str, T]],
    store: BaseStore,
) -> dict[str, T]:
    try:
        return locks.setdefault(store, {})
    except TypeError:  # a store that cannot be weakly referenced or hashed: by identity
        return by_id.setdefault(id(store), {})


_THREAD_LOCKS_BY_ID: dict[int, dict[str, threading.Lock]] = {}
_ASYNC_LOCKS_BY_ID: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, dict[int, dict[str, asyncio.Lock]]
] = weakref.WeakKeyDictionary()

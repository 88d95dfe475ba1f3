"""The strategy record: what earlier runs learned about each kind of move, in a LangGraph store.

`strategy="explore"` weighs, at every choice, the counts pooled over earlier runs with
this run's own (see `_strategy`). The pooled counts live in the run's LangGraph store
(`compile(store=...)`, the store LangGraph Server gives every graph, `refine(...,
store=...)`, an agent's store), laid out so that runs in any number of processes sharing
the store lose no round (see `_record_items`).

The key names what the counts are about: the generator's model (provider and model name
as LangChain reports them, else the class or function name) and the evaluator's kind
(its name, not its arguments), e.g. `"openai:gpt-4o-mini|contains_all"`; `record_key=`
sets it instead.

After every evaluated round a run writes its counts so far (as `round_stats` gives them
for its attempts, by the state each round began in, as `state_stats` gives them, and each
answer's outcome, attempt 0's included, as `score_counts` gives them),
replacing its own earlier counts rather than adding to a total: a round replayed after
a crash, or a resumed run, writes the same counts again and nothing is counted twice.
In the same exchange it reads the record and gets the other runs' pooled counts.

`strategy_records(store)` returns every record in a store as plain counts.

A run is identified by the `loop_id` its `prepare` step writes to state (kept by the
checkpointer, so a resumed run keeps it). A store error is logged and the run goes on
without the record: learning is an optimisation, never a reason to fail a loop.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langgraph.runtime import get_runtime
from langgraph.store.base import BaseStore, Item

from langgraph_refine._decisions._options import LoopOptions
from langgraph_refine._decisions._strategy import (
    RUNG_KIND,
    MoveStats,
    round_stats,
    score_counts,
    scores_as_counts,
    state_kind,
    state_stats,
)
from langgraph_refine._kinds import model_name
from langgraph_refine._records._record_items import (
    PAGE,
    RECORD_NAMESPACE,
    RecordView,
    Writes,
    key_of,
    plan_writes,
    read_items,
    record_namespace,
)
from langgraph_refine._state import Attempt

logger = logging.getLogger("langgraph_refine")

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
    if key is None:  # every generator has a name; say so if one does not
        raise ValueError(f"cannot name the generator {generator!r}; pass record_key=")
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


# -- the record as read --------------------------------------------------------------------


@dataclass(frozen=True)
class StrategyRecord:
    """One strategy record as read: the totals, and each run's own counts.

    Attributes:
        moves: The totals per kind of move (what explore and `report` read).
        runs: Each counted run's own counters (JSON, as stored), by loop id.
        states: The totals per state a round started from (`run_state`), then per kind
            of move.
        scores: The totals of the score counts (`score_counts`): per kind of move (and
            band), how many of its answers had each outcome.
    """

    moves: Counts
    runs: dict[str, dict[str, Any]]
    states: dict[str, Counts] = field(default_factory=dict)
    scores: dict[str, dict[str, int]] = field(default_factory=dict)

    @classmethod
    def from_view(cls, view: RecordView) -> StrategyRecord:
        """The record a read of its namespace found."""
        runs = {run: entry.counts for run, entry in view.runs.items()}
        total = view.total()
        return cls(
            moves=_counts(total.get("moves")),
            runs=runs,
            states=_states(total),
            scores=_scores(total),
        )

    def to_dict(self) -> dict[str, Any]:
        """The totals as plain counts: `{move_kind: {"rounds", "raised", "fell"}}`.

        A ladder's rungs (move kinds `"rung:<model>"` in the stored counts, see
        `_ladder`) come under their own level: `{"rungs": {model: {...}}}`. The counts
        by state come under `{"states": {state: {move_kind: {...}, "rungs": {...}}}}`, and
        the score counts under `{"scores": {"sample": {"7": n}, "refine@b1": {"+2": n}}}`.
        """
        plain = _with_rungs(self.moves)
        if self.states:
            plain["states"] = {
                state: _with_rungs(self.states[state]) for state in sorted(self.states)
            }
        if self.scores:
            plain["scores"] = {
                kind: dict(sorted(bins.items(), key=lambda bin_: int(bin_[0])))
                for kind, bins in sorted(self.scores.items())
            }
        return plain


def _with_rungs(counts: Counts) -> dict[str, Any]:
    plain: dict[str, Any] = {}
    for kind, stats in _plain(counts).items():
        if kind.startswith(RUNG_KIND):
            plain.setdefault("rungs", {})[kind[len(RUNG_KIND) :]] = stats
        else:
            plain[kind] = stats
    return plain


def _states(total: Mapping[str, Any]) -> dict[str, Counts]:
    return {str(state): _counts(kinds) for state, kinds in (total.get("states") or {}).items()}


def _scores(total: Mapping[str, Any]) -> dict[str, dict[str, int]]:
    found = total.get("scores") or {}
    return {
        str(kind): {str(b): int(n) for b, n in bins.items() if n}
        for kind, bins in found.items()
        if any(bins.values())
    }


def _counts(value: Any) -> Counts:
    if not value:
        return {}
    return {str(kind): MoveStats.from_dict(stats) for kind, stats in value.items()}


def _plain(counts: Counts) -> dict[str, dict[str, int]]:
    return {kind: stats.to_dict() for kind, stats in sorted(counts.items())}


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

    def writes(self, view: RecordView) -> Writes:
        """The store writes that record this run's counts, given what it just read."""
        counts = self.counts()
        scores = score_counts(self.attempts)
        if self.loop_id is None or not (counts or scores):  # read only, or nothing evaluated
            return Writes([], [])
        n = sum(stats.rounds for stats in counts.values())
        states = {state: _plain(kinds) for state, kinds in state_stats(self.attempts).items()}
        entry: dict[str, Any] = {"moves": _plain(counts)}
        if states:
            entry["states"] = states
        if scores:
            entry["scores"] = scores
        return plan_writes(record_namespace(self.key), view, self.loop_id, n, entry)

    def others(self, view: RecordView) -> Counts:
        """The pooled counts of every other run, as `choose_next` reads them.

        Per kind of move, per kind and state under `"<kind>@<state>"` keys (`state_kind`),
        and each score count as the rounds of `"<kind>#<outcome>"` (`score_kind`).
        """
        total = view.total(without=self.loop_id)
        counts = _counts(total.get("moves"))
        for state, kinds in _states(total).items():
            counts.update({state_kind(kind, state): stats for kind, stats in kinds.items()})
        counts.update(scores_as_counts(_scores(total)))
        return counts


def run_record(
    loop_id: str | None,
    attempts: Sequence[Attempt],
    options: LoopOptions,
    key: Callable[[], str | None],
) -> tuple[BaseStore, RecordUpdate] | None:
    """The running graph's store and this round's update, when the run keeps a record.

    A run keeps one when its strategy is `"explore"`, it has a record key, and the graph
    runs with a store; otherwise None (no record, and explore acts as without one).

    Args:
        loop_id: Names this run in the record.
        attempts: The attempts so far, the one just evaluated included.
        options: The run's options (its strategy).
        key: Gives the run's record key (None: no record); asked only when the run has
            a store, since composing it reads the evaluator.
    """
    try:
        store = record_store(options.strategy, get_runtime().store)
    except RuntimeError:  # a node called outside a graph run
        return None
    if store is None:
        return None
    name = key()
    if name is None:
        return None
    return store, RecordUpdate(name, loop_id, attempts)


def exchange(store: BaseStore, update: RecordUpdate) -> Counts | None:
    """Write this run's counts to the record and return the others' pooled counts (sync).

    A failed read does not stop the write: the run's counts are written all the same
    (without a compaction), so a store that fails only to read loses no round.

    Returns:
        The pooled counts of the other runs, or None if the store failed (logged).
    """
    view: RecordView | None
    try:
        view = read_items(_search_all(store, record_namespace(update.key)))
    except Exception as exc:  # the record is an optimisation: the loop goes on without it
        view = _store_failed(exc, update.key)  # type: ignore[func-returns-value]
    try:
        for ops in _writes(update, view):
            store.batch(ops)
    except Exception as exc:
        return _store_failed(exc, update.key)  # type: ignore[func-returns-value]
    return update.others(view) if view is not None else None


async def aexchange(store: BaseStore, update: RecordUpdate) -> Counts | None:
    """Async twin of `exchange`."""
    view: RecordView | None
    try:
        view = read_items(await _asearch_all(store, record_namespace(update.key)))
    except Exception as exc:  # the record is an optimisation: the loop goes on without it
        view = _store_failed(exc, update.key)  # type: ignore[func-returns-value]
    try:
        for ops in _writes(update, view):
            await _run(store.abatch, store.batch, ops)
    except Exception as exc:
        return _store_failed(exc, update.key)  # type: ignore[func-returns-value]
    return update.others(view) if view is not None else None


def read_records(store: BaseStore) -> dict[str, StrategyRecord]:
    """Every strategy record in the store, by record key (for reports).

    Args:
        store: The store to read.

    Returns:
        The records, sorted by key.
    """
    return _by_key(_search_all(store, RECORD_NAMESPACE))


async def aread_records(store: BaseStore) -> dict[str, StrategyRecord]:
    """Async twin of `read_records`."""
    return _by_key(await _asearch_all(store, RECORD_NAMESPACE))


def strategy_records(store: BaseStore) -> dict[str, dict[str, Any]]:
    """Every strategy record in a store, as plain counts.

    Runs in several processes sharing the store lose no round: once they finish, each
    record's counts equal the rounds they made.

    Args:
        store: Any LangGraph `BaseStore` explore kept records in.

    Returns:
        `{record_key: {move_kind: {"rounds": int, "raised": int, "fell": int}}}`, sorted
        by key. A ladder of models adds a `"rungs"` level per key: `{"rungs": {model:
        {"rounds", "raised", "fell"}}}`, each rung's rounds (after attempt 0). The same
        rounds by the state each began in (`run_state`) come under `"states"`: `{"states":
        {state: {move_kind: {...}, "rungs": {...}}}}`; every answer's outcome in tenths
        (`score_counts`) under `"scores"`: `{"scores": {"sample": {"5": n}, "refine@b2":
        {"+2": n}}}`.

    Example:
        >>> from langgraph.store.memory import InMemoryStore
        >>> from langgraph_refine import refine
        >>> from langgraph_refine.evaluators import contains_all
        >>> def write(state): return "a city on a river" if state["attempts"] else "a city"
        >>> store = InMemoryStore()
        >>> _ = refine(write, "Describe Paris.", contains_all(["river"]), store=store)
        >>> strategy_records(store)["write|contains_all"]["refine"]
        {'rounds': 1, 'raised': 1, 'fell': 0}
        >>> strategy_records(store)["write|contains_all"]["states"]
        {'b0/start': {'refine': {'rounds': 1, 'raised': 1, 'fell': 0}}}
    """
    return {key: record.to_dict() for key, record in read_records(_check_store(store)).items()}


async def astrategy_records(store: BaseStore) -> dict[str, dict[str, Any]]:
    """Async twin of `strategy_records` (a store with only sync methods runs in a thread)."""
    records = await aread_records(_check_store(store))
    return {key: record.to_dict() for key, record in records.items()}


def _check_store(store: object) -> BaseStore:
    """`store`, if it is a LangGraph store (as `refine(store=...)` requires).

    Raises:
        ValueError: Naming what was passed and what to pass instead.
    """
    if isinstance(store, BaseStore):
        return store
    hint = (
        " (a file a batch kept with --store: open it with langgraph's SqliteStore, or run "
        "`langgraph-refine report ... --store PATH`)"
        if isinstance(store, str | os.PathLike)
        else ""
    )
    raise ValueError(
        "strategy_records needs a LangGraph store, the BaseStore the runs were given "
        f"(e.g. InMemoryStore()), got {type(store).__name__} {store!r:.80}{hint}"
    )


def _by_key(items: list[Item]) -> dict[str, StrategyRecord]:
    """The items of every record namespace, grouped and read per record key."""
    depth = len(RECORD_NAMESPACE) + 1
    views: dict[str, RecordView] = {}
    for item in items:
        namespace = tuple(item.namespace)
        if len(namespace) == depth:  # anything else under the prefix is not a record
            read_items([item], views.setdefault(key_of(namespace), RecordView()))
    return {key: StrategyRecord.from_view(views[key]) for key in sorted(views)}


def _search_all(store: BaseStore, namespace: tuple[str, ...]) -> list[Item]:
    """Every item under `namespace`, page by page."""
    found: list[Item] = []
    while True:
        page = store.search(namespace, limit=PAGE, offset=len(found))
        found.extend(page)
        if len(page) < PAGE:
            return _exact(found, namespace)


async def _asearch_all(store: BaseStore, namespace: tuple[str, ...]) -> list[Item]:
    """Async twin of `_search_all`."""
    found: list[Item] = []
    while True:
        page = await _run(store.asearch, store.search, namespace, limit=PAGE, offset=len(found))
        found.extend(page)
        if len(page) < PAGE:
            return _exact(found, namespace)


def _exact(items: list[Item], namespace: tuple[str, ...]) -> list[Item]:
    """The items in `namespace` or below it (a record's own namespace has none below)."""
    return [i for i in items if tuple(i.namespace)[: len(namespace)] == namespace]


async def _run(
    method: Callable[..., Any], sync: Callable[..., Any], *args: Any, **kwargs: Any
) -> Any:
    """Await a store's async method; a store with only sync methods runs in a worker thread."""
    try:
        return await method(*args, **kwargs)
    except NotImplementedError:  # e.g. the sync SqliteStore under arefine
        return await asyncio.to_thread(sync, *args, **kwargs)


def _writes(update: RecordUpdate, view: RecordView | None) -> list[Any]:
    """The store's batches that write this run's counts, in order (compacting when read)."""
    writes = update.writes(view or RecordView())
    return [ops for ops in (writes.first, writes.then) if ops]


def _store_failed(exc: BaseException, key: str) -> None:
    """Log a store's failure; None: the loop goes on without the record (nothing read)."""
    logger.warning(
        "strategy record %r: the store failed (%s: %s); this round goes on without the record",
        key,
        type(exc).__name__,
        exc,
    )

"""How a strategy record is laid out in a LangGraph store, so that no process loses a round.

The store API offers `get`, `put` (an upsert), `delete` and `search`, and no
compare-and-swap, so a record that is one item updated by read-modify-write loses
counts when runs in several processes (server workers, CLI batches sharing a SQLite
file) write at once. Here no item is ever updated by two writers:

- Each record key has its own namespace, `(*RECORD_NAMESPACE, <key>)` (the key with `.`,
  `%` and `*` percent-encoded, as namespace labels cannot hold a `.`).
- A **run item** holds one run's own counts so far: key `run:<loop id>:<n>`, where `n`
  is the number of rounds the counts cover. After each evaluated round a run writes a
  new run item and deletes its older ones. The item for a given `n` is written by that
  run alone and (a replayed round aside, which writes the same counts) never changes.
- A **fold item** (`fold:<random id>`) holds, per run, the counts of the run items and
  fold items its writer read and then deleted: `{loop id: {"n": ..., "moves": ...}}`.
- A reader takes, for each run, the entry with the largest `n` among all items (a run's
  counts only grow), and sums over runs. A run that is both folded and still present
  (its newer run item, or two fold items written at once) is therefore counted once.

**Compaction.** When a writer reads more than `COMPACT_AT` items it writes one fold item
holding every run it read, and only then deletes the items it read. It deletes only
items whose content it holds (run items of a given `n` and fold items never change), so
a round written meanwhile lands in a new item it did not read and is kept; two
compactions at once write two fold items that overlap, which readers count once. So no
interleaving of any number of writers and compactions loses or doubles a round.

**Cost.** A read is one paged `search` of the key's namespace: between compactions it
touches at most `COMPACT_AT` run items plus the fold items (one, more only while
compactions overlap), however many runs the record holds. A fold item carries one
entry per run ever counted (about 130 bytes each), so the bytes the store sends grow
with the record; the work done on them does not: neither a fold nor a run item ever
changes, so each process parses and checks one once (`PARSED_CACHE`), a fold with its
sum, and a read adds to that sum only the run items it found, as flat counters (one
addition per counter, no walk of nested dicts). A round writes one batch: a `put` of
the new run item and the `delete` of the run's previous one (a compaction adds a `put`
and a batch of deletes).

**Room for more levels.** A run's entry is a dict of counters summed leaf by leaf
(`flatten`), so levels beyond `"moves"` need no new merge rule: the counts by state,
`"states": {<state>: {<kind>: {"rounds", "raised", "fell"}}}` (see `run_state`), sit
beside `"moves"` in each entry and are totalled, folded and compacted exactly as the
moves are (an entry written without them reads as a run with no counts by state); a
ladder of models may add `"rungs": {<model>: {"rounds", "raised", "fell", "cost"}}` the
same way, and the score counts, `"scores": {<kind>[@<band>]: {<outcome>: n}}` (see
`score_counts`), sit there too.

"""

from __future__ import annotations

import functools
import logging
import threading
import uuid
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from langgraph.store.base import Item, PutOp

from langgraph_refine._decisions._strategy import MoveStats

logger = logging.getLogger("langgraph_refine")

RECORD_NAMESPACE: tuple[str, ...] = ("langgraph_refine", "strategy")
"""The store namespace under which each record key has its own namespace."""

COMPACT_AT = 64
"""Items in a record's namespace above which a writer folds them into one fold item."""

PAGE = 500
"""Items per `search` page when reading a record."""

VERSION = 2
"""The layout version written in every item's value."""

Entry = dict[str, Any]
"""One run's counters: `{"moves": {<kind>: {"rounds", "raised", "fell"}}, "states":
{<state>: {<kind>: {...}}}}` (JSON)."""

Flat = dict[tuple[str, ...], Any]
"""Counters by their path: `{("moves", "refine", "rounds"): 3, ...}` (what a read sums)."""


def record_namespace(key: str) -> tuple[str, ...]:
    """The namespace of one record key's items.

    Example:
        >>> record_namespace("openai:gpt-4.1|llm_judge")
        ('langgraph_refine', 'strategy', 'openai:gpt-4%2E1|llm_judge')
    """
    label = key.replace("%", "%25").replace(".", "%2E").replace("*", "%2A")
    return (*RECORD_NAMESPACE, label.replace("\x00", "%00"))


def key_of(namespace: tuple[str, ...]) -> str:
    """The record key a record's namespace stands for (the inverse of `record_namespace`)."""
    label = namespace[len(RECORD_NAMESPACE)]
    for code, char in (("%2E", "."), ("%2A", "*"), ("%00", "\x00"), ("%25", "%")):
        label = label.replace(code, char)
    return label


def flatten(counts: Mapping[str, Any], into: Flat | None = None, sign: int = 1) -> Flat:
    """Add (`sign=-1`: subtract) nested counters into a flat dict keyed by their paths.

    Example:
        >>> flatten({"moves": {"refine": {"rounds": 2}}})
        {('moves', 'refine', 'rounds'): 2}
    """
    flat: Flat = {} if into is None else into
    stack: list[tuple[tuple[str, ...], Mapping[str, Any]]] = [((), counts)]
    while stack:
        prefix, level = stack.pop()
        for name, value in level.items():
            path = (*prefix, name)
            if isinstance(value, Mapping):
                stack.append((path, value))
            else:
                flat[path] = flat.get(path, 0) + sign * value
    return flat


def unflatten(flat: Flat) -> Entry:
    """Nested counters from a flat dict (the inverse of `flatten`)."""
    nested: Entry = {}
    for path, value in flat.items():
        level = nested
        for name in path[:-1]:
            level = level.setdefault(name, {})
        level[path[-1]] = value
    return nested


@dataclass(frozen=True)
class RunEntry:
    """One run's counters as a reader keeps them: the largest `n` seen wins.

    Attributes:
        n: The rounds the counters cover.
        counts: The counters (`Entry`).
        item: The key of the run item it came from (None: from a fold item).
    """

    n: int
    counts: Entry
    item: str | None = None

    @functools.cached_property
    def flat(self) -> Flat:
        """The counters flattened (computed once: an entry never changes)."""
        return flatten(self.counts)


@dataclass(frozen=True)
class Fold:
    """A fold item as read: each run's entry, and their sum (computed once per fold).

    Attributes:
        entries: Each folded run's entry, by loop id.
        total: The entries' counters summed.
    """

    entries: dict[str, RunEntry]
    total: Flat

    @classmethod
    def parse(cls, value: Mapping[str, Any]) -> Fold:
        """Read a fold item's value (`ValueError` and friends if it is malformed)."""
        entries = {str(run): RunEntry(int(e["n"]), _entry(e)) for run, e in value.items()}
        total: Flat = {}
        for entry in entries.values():
            flatten(entry.counts, total)
        return cls(entries, total)


@dataclass(frozen=True)
class Live:
    """A run item as read: its run's id and entry.

    Attributes:
        loop_id: The run's id.
        entry: Its counters.
    """

    loop_id: str
    entry: RunEntry

    @classmethod
    def parse(cls, key: str, value: Mapping[str, Any]) -> Live:
        """Read a run item's value (`ValueError` and friends if it is malformed)."""
        return cls(str(value["run"]), RunEntry(int(value["n"]), _entry(value), key))


PARSED_CACHE = 4096
"""Fold and run items kept parsed per process (an item never changes once written):
more than the items a record holds between compactions, for many records."""

_PARSED: OrderedDict[tuple[Any, ...], Fold | Live] = OrderedDict()
_PARSED_LOCK = threading.Lock()  # the loops of a threaded batch share the cache


def _parsed(item: Item) -> Fold | Live:
    """The parsed item, from the cache when this process read it before.

    Keyed by the item's namespace, key and update time, so an item rewritten in place
    (a replayed round; a foreign writer) is parsed again rather than trusted. An item
    without them (read through an API that leaves them out) is parsed every time.
    """
    namespace, updated = getattr(item, "namespace", None), getattr(item, "updated_at", None)
    if namespace is None or updated is None:
        return _parse(item)
    # A server's store may hand the namespace as a list, and the time as text.
    key = (tuple(namespace), item.key, str(updated))
    with _PARSED_LOCK:
        parsed = _PARSED.get(key)
        if parsed is not None:
            _PARSED.move_to_end(key)
            return parsed
    parsed = _parse(item)  # outside the lock: a big fold may take a while
    with _PARSED_LOCK:
        _PARSED[key] = parsed
        while len(_PARSED) > PARSED_CACHE:
            _PARSED.popitem(last=False)
    return parsed


def _parse(item: Item) -> Fold | Live:
    value = item.value
    if "fold" in value:
        return Fold.parse(value["fold"])
    if "run" in value:
        return Live.parse(item.key, value)
    raise ValueError("not a strategy record item")


@dataclass
class RecordView:
    """What a read of one record's namespace found.

    A run's entry is the one with the largest `n` among the run items and folds (a tie:
    the run item's). With one fold, the totals are the fold's precomputed sum corrected
    for the few runs that also have a run item, so a round's read does work in proportion
    to the items it read, not to the runs the record holds.

    Attributes:
        live: The run items' entries, by loop id.
        folds: The fold items read.
        items: The keys of the run and fold items read (what a compaction deletes).
    """

    live: dict[str, RunEntry] = field(default_factory=dict)
    folds: list[Fold] = field(default_factory=list)
    items: list[str] = field(default_factory=list)

    def add(self, loop_id: str, entry: RunEntry) -> None:
        """Keep a run item's entry if it covers more rounds than the run's kept one."""
        kept = self.live.get(loop_id)
        if kept is None or entry.n >= kept.n:
            self.live[loop_id] = entry

    def entry(self, loop_id: str) -> RunEntry | None:
        """The run's entry as readers count it."""
        best = self.live.get(loop_id)
        for fold in self.folds:
            found = fold.entries.get(loop_id)
            if found is not None and (best is None or found.n > best.n):
                best = found
        return best

    @property
    def runs(self) -> dict[str, RunEntry]:
        """Every run's entry, by loop id (work in proportion to the runs)."""
        merged: dict[str, RunEntry] = {}
        for fold in self.folds:
            for loop_id, entry in fold.entries.items():
                kept = merged.get(loop_id)
                if kept is None or entry.n > kept.n:
                    merged[loop_id] = entry
        for loop_id, entry in self.live.items():
            kept = merged.get(loop_id)
            if kept is None or entry.n >= kept.n:
                merged[loop_id] = entry
        return merged

    def total(self, without: str | None = None) -> Entry:
        """The counters summed over every run, except run `without`."""
        if len(self.folds) > 1:  # overlapping folds (compactions at once): merge run by run
            runs = [e.flat for loop_id, e in self.runs.items() if loop_id != without]
            return unflatten(_summed(runs))
        folded = self.folds[0].entries if self.folds else {}
        total: Flat = dict(self.folds[0].total) if self.folds else {}
        for loop_id, entry in self.live.items():
            stale = folded.get(loop_id)
            if stale is None or entry.n >= stale.n:  # the run item counts, not the fold's
                _add(total, entry.flat)
                if stale is not None:
                    _add(total, stale.flat, -1)
        own = self.entry(without) if without is not None else None
        if own is not None:
            _add(total, own.flat, -1)
        return _pruned(unflatten(total))


def _add(total: Flat, flat: Flat, sign: int = 1) -> None:
    for path, value in flat.items():
        total[path] = total.get(path, 0) + sign * value


def _summed(flats: Iterable[Flat]) -> Flat:
    total: Flat = {}
    for flat in flats:
        _add(total, flat)
    return total


def _pruned(counts: dict[str, Any]) -> dict[str, Any]:
    """`counts` without the dicts left all zero by subtraction (a kind no other run made)."""
    kept: dict[str, Any] = {}
    for name, value in counts.items():
        if isinstance(value, dict):
            value = _pruned(value)
            if value:
                kept[name] = value
        else:
            kept[name] = value
    if kept and all(not isinstance(v, dict) and abs(v) < 1e-12 for v in kept.values()):
        return {}
    return kept


def read_items(items: Iterable[Item], view: RecordView | None = None) -> RecordView:
    """The record view of items read from one record's namespace.

    An item in no known layout, or with a count that is not a non-negative integer, is
    logged and left out (and deleted by the next compaction).
    """
    view = view or RecordView()
    for item in items:
        try:
            _read_item(item, view)
        except (TypeError, ValueError, KeyError, AttributeError):
            logger.warning(
                "strategy record item %r unreadable (%.200r); left out", item.key, item.value
            )
            view.items.append(item.key)
    return view


def _read_item(item: Item, view: RecordView) -> None:
    parsed = _parsed(item)
    if isinstance(parsed, Fold):
        view.folds.append(parsed)
    else:
        view.add(parsed.loop_id, parsed.entry)
    view.items.append(item.key)


def _entry(value: Mapping[str, Any]) -> Entry:
    """A run's counters from an item's value, checked: each a non-negative integer (or cost).

    Raises:
        ValueError: If a count is anything else.
    """
    entry = {name: value[name] for name in value if name not in ("run", "n", "version")}
    _check(entry)
    return entry


def _check(counts: Mapping[str, Any]) -> None:
    for name, value in counts.items():
        if isinstance(value, Mapping):
            _check(value)
        elif name == "cost" and type(value) in (int, float) and value >= 0:
            continue  # dollars (a ladder's rungs): the one count that may be a fraction
        elif type(value) is not int or value < 0:
            # The message `MoveStats.from_dict` gives (a cheaper check, on every entry).
            MoveStats.from_dict({name: value} if name in ("rounds", "raised", "fell") else {})
            raise ValueError(f"strategy record count {name!r} must be a non-negative integer")


@dataclass(frozen=True)
class Writes:
    """The store operations of one run's round: a batch, then (when folding) deletes after it.

    Attributes:
        first: Ops of the first `batch` call (the new run item and the stale own
            item's delete, or the fold item).
        then: Ops of a second `batch` call, made only after the first one succeeded
            (a compaction's deletes: never before the fold item holding their counts).
    """

    first: list[PutOp]
    then: list[PutOp]


def plan_writes(
    namespace: tuple[str, ...], view: RecordView, loop_id: str, n: int, counts: Entry
) -> Writes:
    """The writes that record a run's counts so far (`n` rounds), folding when the record is big.

    Args:
        namespace: The record's namespace.
        view: What the run read of the record just before.
        loop_id: The run's id.
        n: The rounds `counts` cover.
        counts: The run's counters.

    Returns:
        The writes (both lists empty when the run's counts are already stored: a replay).
    """
    kept = view.entry(loop_id)
    if kept is not None and kept.n == n and kept.counts == counts:
        return Writes([], [])
    if len(view.items) + 1 > COMPACT_AT:
        runs = view.runs
        if kept is None or n >= kept.n:
            runs[loop_id] = RunEntry(n, counts)
        folded = {run: {"n": e.n, **e.counts} for run, e in sorted(runs.items())}
        fold = PutOp(
            namespace, f"fold:{uuid.uuid4().hex}", {"fold": folded, "version": VERSION}, False
        )
        return Writes([fold], [PutOp(namespace, key, None) for key in view.items])
    new = f"run:{loop_id}:{n}"
    item = {"run": loop_id, "n": n, **counts, "version": VERSION}
    stale = [
        PutOp(namespace, e.item, None)
        for e in [kept]
        if e is not None and e.item is not None and e.item != new and e.n <= n
    ]
    return Writes([PutOp(namespace, new, item, False), *stale], [])

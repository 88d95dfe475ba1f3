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
entry per run ever counted (about 100 bytes each), so a read's bytes, not its items,
grow with the record. A round writes one batch: a `put` of the new run item and the
`delete` of the run's previous one (a compaction adds a `put` and a batch of deletes).

**Room for more levels.** A run's entry is a dict of counters summed leaf by leaf
(`sum_counts`), so levels beyond `"moves"` need no new merge rule: a ladder of models may
add `"rungs": {<model>: {"rounds", "raised", "fell", "cost"}}` beside `"moves"` in each
entry, and readers total it the same way.

"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from langgraph.store.base import Item, PutOp

from langgraph_refine._strategy import MoveStats

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
"""One run's counters: `{"moves": {<kind>: {"rounds", "raised", "fell"}}}` (JSON)."""


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


def sum_counts(left: Mapping[str, Any], right: Mapping[str, Any]) -> dict[str, Any]:
    """Two counter dicts added leaf by leaf (numbers add, dicts recurse).

    Example:
        >>> sum_counts({"moves": {"refine": {"rounds": 1}}}, {"moves": {"refine": {"rounds": 2}}})
        {'moves': {'refine': {'rounds': 3}}}
    """
    return add_into(add_into({}, left), right)


def add_into(total: dict[str, Any], counts: Mapping[str, Any]) -> dict[str, Any]:
    """Add `counts` into `total` in place (nested dicts of `total` are its own) and return it."""
    for name, value in counts.items():
        if isinstance(value, Mapping):
            add_into(total.setdefault(name, {}), value)
        else:
            total[name] = total.get(name, 0) + value
    return total


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


@dataclass
class RecordView:
    """What a read of one record's namespace found.

    Attributes:
        runs: Every run's entry by loop id (the one with the largest `n`).
        items: The keys of the run and fold items read (what a compaction deletes).
    """

    runs: dict[str, RunEntry] = field(default_factory=dict)
    items: list[str] = field(default_factory=list)

    def add(self, loop_id: str, entry: RunEntry) -> None:
        """Keep `entry` if it covers more rounds than the run's kept one (a tie: a run item's)."""
        kept = self.runs.get(loop_id)
        if kept is None or entry.n > kept.n or (entry.n == kept.n and entry.item is not None):
            self.runs[loop_id] = entry

    def total(self, without: str | None = None) -> Entry:
        """The counters summed over every run, except run `without`."""
        total: Entry = {}
        for loop_id, entry in self.runs.items():
            if loop_id != without:
                add_into(total, entry.counts)
        return total


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
    value = item.value
    if "fold" in value:
        found = {str(run): RunEntry(int(e["n"]), _entry(e)) for run, e in value["fold"].items()}
    elif "run" in value:
        found = {str(value["run"]): RunEntry(int(value["n"]), _entry(value), item.key)}
    else:
        raise ValueError("not a strategy record item")
    view.items.append(item.key)
    for loop_id, entry in found.items():
        view.add(loop_id, entry)


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
    kept = view.runs.get(loop_id)
    if kept is not None and kept.n == n and kept.counts == counts:
        return Writes([], [])
    if len(view.items) + 1 > COMPACT_AT:
        view.add(loop_id, RunEntry(n, counts, item=f"run:{loop_id}:{n}"))
        folded = {run: {"n": e.n, **e.counts} for run, e in sorted(view.runs.items())}
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

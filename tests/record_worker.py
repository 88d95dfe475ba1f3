"""Many explore runs in one process, all keeping one strategy record in a shared store.

For test_record_processes.py: several of these run at once against one SQLite file or
one PostgreSQL database, and the test checks that the record counts every round.

    python -m tests.record_worker --store sqlite:/tmp/x.sqlite --key K --runs 30 --compact-at 6

Every run is `refine` (even-numbered) or `arefine` (odd-numbered) with a plain callable
generator, `strategy="explore"` and 1 to 4 rounds. Prints `{"rounds": <rounds made>}`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import re
from collections.abc import Iterator
from typing import Any

from langgraph.store.base import BaseStore

from langgraph_refine import Evaluation, arefine, refine
from langgraph_refine._records import _record_items

SCORE = re.compile(r"score=([0-9.]+)")


def write(state: Any) -> str:
    """A score that depends on the attempt's index (some rounds raise the best, some fall)."""
    return f"score={0.2 + 0.15 * (len(state['attempts']) % 4):.2f}"


def judge(response: str, state: Any) -> Evaluation:
    found = SCORE.search(response)
    assert found, response
    return Evaluation(score=float(found.group(1)), feedback="better")


@contextlib.contextmanager
def open_store(spec: str) -> Iterator[BaseStore]:
    kind, _, where = spec.partition(":")
    if kind == "sqlite":
        from langgraph.store.sqlite import SqliteStore

        with SqliteStore.from_conn_string(where) as store:
            yield store
    else:
        from langgraph.store.postgres import PostgresStore

        with PostgresStore.from_conn_string(spec) as store:
            yield store


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--store", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--runs", type=int, required=True)
    parser.add_argument("--compact-at", type=int, default=_record_items.COMPACT_AT)
    args = parser.parse_args()
    _record_items.COMPACT_AT = args.compact_at  # fold often, so compactions race
    made = 0
    with open_store(args.store) as store:
        for run in range(args.runs):
            options: dict[str, Any] = {
                "store": store,
                "record_key": args.key,
                "strategy": "explore",
                "max_iterations": 1 + run % 4,
                "patience": None,
                "target_score": 1.0,
            }
            if run % 2:
                result = asyncio.run(arefine(write, "Describe the sea.", judge, **options))
            else:
                result = refine(write, "Describe the sea.", judge, **options)
            made += len(result.attempts) - 1
    print(json.dumps({"rounds": made}))


if __name__ == "__main__":
    main()

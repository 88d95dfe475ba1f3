"""A pairwise-selecting loop in its own process, for the kill-during-selection test.

The loop of tests/durable_worker.py (attempts scored 0.1 ... 0.95), with
`select="pairwise"`: its comparer appends a `cmp A B` marker line per comparison before
its (slowed) work, so the test can kill the process in the middle of the selection.

    python -m tests.select_worker start  --saver sqlite:/tmp/x.sqlite --thread T --markers M
    python -m tests.select_worker resume --saver sqlite:/tmp/x.sqlite --thread T --markers M
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from langgraph_refine import RefineResult, create_refine_graph
from tests.durable_worker import MAX_ITERATIONS, TASK, Recorder, open_saver

# The hidden quality the comparer sees: attempt 4 is truly the best, though 5 scored higher.
QUALITY = {3: 0.5, 4: 0.9, 5: 0.6}


class Comparer:
    """Prefers the truly better attempt; marks each call in the marker file first."""

    def __init__(self, markers: str, delay: float) -> None:
        self.markers = markers
        self.delay = delay

    def __call__(self, task: str, first: str, second: str) -> str:
        a, b = (int(text.split()[1][1:]) for text in (first, second))
        fd = os.open(self.markers, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, f"cmp {a} {b}\n".encode())
        finally:
            os.close(fd)
        time.sleep(self.delay)
        return "first" if QUALITY[a] > QUALITY[b] else "second"


def build(markers: str, delay: float, checkpointer: BaseCheckpointSaver[Any]) -> Any:
    """The loop under test: three candidates (3, 4, 5), six comparisons."""
    recorder = Recorder(markers)
    return create_refine_graph(
        recorder.generate,
        recorder.evaluate,
        max_iterations=MAX_ITERATIONS,
        patience=None,
        retry_policy=None,
        select="pairwise",
        select_top=3,
        select_margin=0.5,
        comparer=Comparer(markers, delay),
    ).compile(checkpointer=checkpointer)


def summary(values: dict[str, Any]) -> dict[str, Any]:
    """What the test compares between a killed-and-resumed run and a clean one."""
    result = RefineResult.from_state(values)
    return {
        "value": result.value,
        "best_index": result.best_index,
        "stop_reason": result.stop_reason,
        "selection": result.metadata.get("selection"),
        "attempts": [[a.index, a.response, a.score] for a in result.attempts],
        "calls": result.usage.calls,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["start", "resume"])
    parser.add_argument("--saver", required=True)
    parser.add_argument("--thread", required=True)
    parser.add_argument("--markers", required=True)
    parser.add_argument("--delay", type=float, default=0.0)
    args = parser.parse_args(argv)
    config = {"configurable": {"thread_id": args.thread}}
    with open_saver(args.saver) as saver:
        graph = build(args.markers, args.delay, saver)
        graph.invoke(
            {"task": TASK} if args.mode == "start" else None, config, durability="sync"
        )
        print(json.dumps(summary(graph.get_state(config).values)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The `attempts` channel: a delta channel (flat checkpoint storage) behind a fallback."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from benchmarks.checkpoint_growth import memory_bytes, postgres_bytes, sqlite_bytes
from langgraph.channels import DeltaChannel

from langgraph_refine import Attempt, Evaluation, _state, create_refine_graph
from langgraph_refine._state import merge_attempt_batches, merge_attempts

ROOT = Path(__file__).resolve().parent.parent


def attempt(index: int, score: float | None = None, text: str = "") -> Attempt:
    evaluation = Evaluation(score=score) if score is not None else None
    return Attempt(index=index, response=text or f"r{index}", evaluation=evaluation)


def test_attempts_is_a_delta_channel_when_langgraph_has_one() -> None:
    assert _state.ATTEMPTS_CHANNEL_DESIGN == "delta"
    graph = create_refine_graph(lambda s: "x", lambda r, s: 1.0).compile()
    channel = graph.channels["attempts"]
    assert isinstance(channel, DeltaChannel)
    assert channel.reducer is merge_attempt_batches


def test_batches_fold_like_single_writes() -> None:
    writes: list[Any] = [
        [attempt(0, 0.1)],
        attempt(1),
        [attempt(1, 0.4)],  # the evaluated version replaces the pending one
        [attempt(2, 0.2), attempt(3, 0.9)],
        {"index": 4, "response": "r4"},  # a JSON update
    ]
    one_by_one: list[Attempt] = []
    for write in writes:
        one_by_one = merge_attempts(one_by_one, write)
    assert [a.index for a in one_by_one] == [0, 1, 2, 3, 4]
    assert one_by_one[1].score == 0.4 and isinstance(one_by_one[4], Attempt)
    # Replaying in any split of batches gives the same list (what DeltaChannel relies on).
    for cut in itertools.combinations(range(1, len(writes)), 2):
        a, b = cut
        split = merge_attempt_batches(
            merge_attempt_batches(merge_attempt_batches([], writes[:a]), writes[a:b]), writes[b:]
        )
        assert split == one_by_one
    assert merge_attempt_batches([], writes) == one_by_one


def test_dicts_become_attempts() -> None:
    merged = merge_attempts([{"index": 0, "response": "a"}], {"index": 1, "response": "b"})  # type: ignore[list-item]
    assert all(isinstance(a, Attempt) for a in merged)
    assert [a.response for a in merged] == ["a", "b"]


def test_fallback_when_langgraph_has_no_delta_channel(monkeypatch: pytest.MonkeyPatch) -> None:
    import langgraph.channels

    monkeypatch.delattr(langgraph.channels, "DeltaChannel")
    assert _state._attempts_channel() is merge_attempts


def test_switch_off_by_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LANGGRAPH_REFINE_DELTA_CHANNEL", "0")
    assert _state._attempts_channel() is merge_attempts
    monkeypatch.setenv("LANGGRAPH_REFINE_DELTA_CHANNEL", "1")
    assert isinstance(_state._attempts_channel(), DeltaChannel)


def test_delta_only_on_a_langgraph_that_reads_it_back_with_the_reducer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # LangGraph 1.2.0-1.2.15 has DeltaChannel but loads a delta-written `attempts` as []
    # once the switch is flipped off: there the plain reducer is written instead.
    import importlib.metadata

    def installed(found: str | None) -> None:
        def version(name: str) -> str:
            assert name == "langgraph"
            if found is None:
                raise importlib.metadata.PackageNotFoundError(name)
            return found

        monkeypatch.setattr(importlib.metadata, "version", version)

    assert _state.ATTEMPTS_CHANNEL_MIN_LANGGRAPH == "1.2.16"
    for older in ("1.2.15", "1.2.0", "1.1.10", "1.0.10"):
        installed(older)
        assert _state._attempts_channel() is merge_attempts, older
    for newer in ("1.2.16", "1.2.16rc1", "1.3.0.dev2", "1.10.0"):
        installed(newer)
        assert isinstance(_state._attempts_channel(), DeltaChannel), newer
    installed(None)  # no package metadata: the design every LangGraph reads back
    assert _state._attempts_channel() is merge_attempts


FALLBACK_RUN = """
from langgraph.channels import BinaryOperatorAggregate
from langgraph.checkpoint.memory import InMemorySaver
from langgraph_refine import _state, create_refine_graph
assert _state.ATTEMPTS_CHANNEL_DESIGN == "reducer", _state.ATTEMPTS_CHANNEL_DESIGN
scores = iter([0.2, 0.5, 0.95])
graph = create_refine_graph(lambda s: "x", lambda r, s: next(scores)).compile(
    checkpointer=InMemorySaver()
)
assert isinstance(graph.channels["attempts"], BinaryOperatorAggregate)
cfg = {"configurable": {"thread_id": "t"}}
graph.invoke({"task": "t"}, cfg)
print([a.score for a in graph.get_state(cfg).values["attempts"]])
"""


def test_fallback_design_runs_a_loop_end_to_end() -> None:
    env = {**os.environ, "LANGGRAPH_REFINE_DELTA_CHANNEL": "off"}
    done = subprocess.run(
        [sys.executable, "-c", FALLBACK_RUN], capture_output=True, text=True, env=env, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[0.2, 0.5, 0.95]"


def _bytes(saver: Any, thread_id: str) -> int:
    kind = type(saver).__name__
    if kind == "InMemorySaver":
        return memory_bytes(saver, thread_id)
    if kind == "SqliteSaver":
        return sqlite_bytes(saver, thread_id)
    return postgres_bytes(saver, thread_id)


def _stored(saver: Any, rounds: int) -> tuple[int, Any, Any]:
    def gen(state: Any) -> str:
        n = len(state["attempts"])
        return f"attempt {n} " + chr(97 + n % 26) * 2000

    graph = create_refine_graph(
        gen, lambda r, s: 0.5, max_iterations=rounds - 1, patience=None, target_score=1.0
    ).compile(checkpointer=saver)
    cfg: Any = {"configurable": {"thread_id": f"growth-{rounds}-{os.urandom(4).hex()}"}}
    graph.invoke({"task": "t"}, cfg)
    return _bytes(saver, cfg["configurable"]["thread_id"]), graph, cfg


def test_storage_per_round_stays_flat(checkpointer: Any) -> None:
    short, _, _ = _stored(checkpointer, 3)
    long, graph, cfg = _stored(checkpointer, 12)
    assert (long / 12) / (short / 3) <= 1.2  # a re-written history would give ~2.5x
    # ...and the full history is still there, in every snapshot of the thread.
    attempts = graph.get_state(cfg).values["attempts"]
    assert [a.index for a in attempts] == list(range(12))
    assert all(a.response.startswith(f"attempt {a.index} ") for a in attempts)
    counts = [len(s.values.get("attempts") or []) for s in graph.get_state_history(cfg)]
    assert counts[0] == 12 and sorted(counts, reverse=True) == counts

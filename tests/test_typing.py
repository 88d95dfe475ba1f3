"""Typed surface: `refine`'s options, the stream events and the review payload."""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path
from typing import get_type_hints

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from langgraph_refine import (
    ReviewPayload,
    RoundEvent,
    StopEvent,
    create_refine_graph,
    refine,
)


def test_the_keyword_options_are_typed_as_refine_options() -> None:
    # Which keys RefineOptions holds is checked against the declaration in
    # test_options_declared_once.py; here, that the keywords are typed by it.
    for function in (create_refine_graph, refine):
        settings = inspect.signature(function).parameters["settings"]
        assert settings.kind is inspect.Parameter.VAR_KEYWORD
        assert "Unpack[RefineOptions]" in str(settings)
    assert "LoopOptions" in str(inspect.signature(refine).parameters["options"])


def test_events_and_payload_have_the_typed_keys() -> None:
    scores = iter([0.4, 0.95])
    graph = create_refine_graph(
        lambda state: "draft", lambda r, s: next(scores), human_review="final"
    ).compile(checkpointer=InMemorySaver())
    cfg = {"configurable": {"thread_id": "typed"}}
    events = list(graph.stream({"task": "t"}, cfg, stream_mode="custom"))
    payload = graph.get_state(cfg).interrupts[0].value
    events += list(graph.stream(Command(resume={"action": "approve"}), cfg, stream_mode="custom"))
    rounds = [e for e in events if e["type"] == "round"]
    [stop] = [e for e in events if e["type"] == "stop"]
    assert len(rounds) == 2
    for event in rounds:  # `stopped_at` only with a cascade
        assert set(event) == set(get_type_hints(RoundEvent)) - {"stopped_at"}
    # The calibration keys are there only with a calibrated judge (test_calibration.py).
    assert set(stop) == set(get_type_hints(StopEvent)) - {"calibration", "untrusted_pass"}
    assert set(payload) == set(get_type_hints(ReviewPayload)) - {"error"}


PROGRAM = """
from langgraph_refine import Budget, RefineOptions, refine

result = refine(lambda state: "x", "task", lambda r, s: 1.0, target_score=0.8, max_iterations=2)
options: RefineOptions = {"budget": Budget(max_calls=4), "strategy": "chain"}
refine(lambda state: "x", "task", None, **options)
"""


@pytest.mark.slow
def test_mypy_checks_refine_options(tmp_path: Path) -> None:
    good = tmp_path / "good.py"
    good.write_text(PROGRAM)
    bad = tmp_path / "bad.py"
    bad.write_text(
        PROGRAM
        + 'refine(lambda state: "x", "task", max_iteration=3)\n'
        + 'refine(lambda state: "x", "task", target_score="high")\n'
        + 'refine(lambda state: "x", "task", strategy="greedy")\n'
    )
    # One mypy run checks both files. It reads our package alone: what a user's call is
    # checked against is ours, and following LangGraph, LangChain and pydantic as well took
    # 20 s of a core instead of 4 (their types become Any, as for untyped libraries).
    (tmp_path / "mypy.ini").write_text(
        "[mypy]\nstrict = True\nincremental = False\nfollow_imports = skip\n"
        "[mypy-langgraph_refine.*]\nfollow_imports = normal\n"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", str(good), str(bad)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    lines = proc.stdout.splitlines()
    assert not [line for line in lines if line.startswith("good.py")], proc.stdout
    errors = "\n".join(line for line in lines if line.startswith("bad.py"))
    assert 'Unexpected keyword argument "max_iteration"' in errors, proc.stdout
    assert '"target_score"' in errors and '"strategy"' in errors, proc.stdout
    assert "Found 3 errors in 1 file (checked 2 source files)" in proc.stdout, proc.stdout

"""A pairwise selection killed with SIGKILL resumes, in a fresh process, to the same result."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from tests.select_worker import build, summary
from tests.test_durable import ROOT, TIMEOUT, finish, read_lines

DELAY = 0.3  # seconds per comparison, so the kill lands inside the selection


def start(mode: str, db: Path, markers: Path) -> Any:
    command = [
        sys.executable, "-m", "tests.select_worker", mode, "--saver", f"sqlite:{db}",
        "--thread", "t", "--markers", str(markers), "--delay", str(DELAY),
    ]  # fmt: skip
    return subprocess.Popen(
        command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


@pytest.mark.slow
def test_a_kill_during_selection_resumes_to_the_uninterrupted_choice(tmp_path: Path) -> None:
    reference_markers = tmp_path / "reference"
    graph = build(str(reference_markers), 0.0, InMemorySaver())
    config = {"configurable": {"thread_id": "reference"}}
    graph.invoke({"task": "Describe the sea."}, config, durability="sync")
    reference = summary(graph.get_state(config).values)
    # Six attempts (the last passes the target), then six comparisons of 3, 4 and 5.
    assert reference["best_index"] == 4 and reference["stop_reason"] == "target_reached"
    assert len(reference["selection"]["comparisons"]) == 3
    assert reference["calls"] == 6 + 6

    markers = tmp_path / "markers"
    proc = start("start", tmp_path / "runs.sqlite", markers)
    deadline = time.monotonic() + TIMEOUT
    while sum(line.startswith("cmp") for line in read_lines(markers)) < 3:
        if proc.poll() is not None:
            pytest.fail(f"worker ended before the selection: {proc.communicate()[1][-2000:]}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail("worker never reached the selection")
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)  # inside the third comparison
    proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == -signal.SIGKILL, "the worker finished before the kill"
    before = read_lines(markers)

    resumed = finish(start("resume", tmp_path / "runs.sqlite", markers))
    assert resumed == reference
    lines = read_lines(markers)
    # The loop's own calls ran once each: only the selection, which the kill cut short,
    # runs again (from its start: it is one step).
    made = Counter(line for line in lines if not line.startswith("cmp"))
    assert set(made.values()) == {1} and len(made) == 12
    assert [line for line in lines[len(before):] if not line.startswith("cmp")] == []
    assert sum(line.startswith("cmp") for line in lines[len(before):]) == 6

"""A pairwise selection killed with SIGKILL resumes, in a fresh process, to the same result.

Against real SQLite and PostgreSQL savers. Completed comparisons are not made again (each
is a durable task), and the resumed run's usage still counts them.
"""

# ruff: noqa: F811 - the saver fixture is imported from test_durable

from __future__ import annotations

import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from tests.select_worker import build, summary
from tests.test_durable import ROOT, TIMEOUT, finish, read_lines, saver_spec  # noqa: F401

DELAY = 0.3  # seconds per comparison, so the kill lands inside the selection


def start(mode: str, spec: str, thread: str, markers: Path) -> Any:
    command = [
        sys.executable, "-m", "tests.select_worker", mode, "--saver", spec,
        "--thread", thread, "--markers", str(markers), "--delay", str(DELAY),
    ]  # fmt: skip
    return subprocess.Popen(
        command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


@pytest.mark.slow
def test_a_kill_during_selection_resumes_to_the_uninterrupted_choice(
    tmp_path: Path, saver_spec: str
) -> None:
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
    thread = uuid.uuid4().hex
    proc = start("start", saver_spec, thread, markers)
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

    resumed = finish(start("resume", saver_spec, thread, markers))
    assert resumed == reference
    lines = read_lines(markers)
    # The loop's own calls ran once each; of the comparisons, only the one the kill cut
    # short ran twice: the two that completed were read back from the checkpoint.
    made = Counter(line for line in lines if not line.startswith("cmp"))
    assert set(made.values()) == {1} and len(made) == 12
    assert [line for line in lines[len(before) :] if not line.startswith("cmp")] == []
    compared = Counter(line for line in lines if line.startswith("cmp"))
    cut_short = [line for line in before if line.startswith("cmp")][-1]
    assert len(compared) == 6 and compared[cut_short] == 2
    assert sum(compared.values()) == 7

"""A thread saved under one `attempts` channel design resumes under the other, every attempt kept.

The design (`DeltaChannel` or the plain reducer) is chosen when `langgraph_refine` is
imported, from `LANGGRAPH_REFINE_DELTA_CHANNEL`, so each side runs in its own process, as
after a redeploy with the switch flipped. Two threads per saver: one cut off by a crash at
attempt 3 (resumed with `invoke(None)`), one paused for a final human review after six
attempts (resumed with an approval). In-memory savers do not outlive a process, so only
SQLite and PostgreSQL are tested, both in each process (a process costs two seconds of
imports).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.test_durable import require_postgres

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT = 120.0

# Runs one side of the upgrade on each saver named: `start` leaves both threads unfinished,
# `resume` reads them back (printing what it found before running anything) and finishes them.
SIDE = """
import json, sys
from langgraph.types import Command
from langgraph_refine import _state, create_refine_graph
from tests.durable_worker import MAX_ITERATIONS, TASK, Recorder, open_saver, summary

mode, thread, markers, *saver_specs = sys.argv[1:]
out = {"design": _state.ATTEMPTS_CHANNEL_DESIGN}
for saver_spec in saver_specs:
    kind, found = saver_spec.split(":")[0], {}
    with open_saver(saver_spec) as saver:
        for case, review in (("crash", None), ("review", "final")):
            fail = "gen:3" if mode == "start" and case == "crash" else None
            recorder = Recorder(f"{markers}.{kind}.{case}", fail=fail)
            graph = create_refine_graph(
                recorder.generate, recorder.evaluate, max_iterations=MAX_ITERATIONS,
                patience=None, retry_policy=None, human_review=review,
            ).compile(checkpointer=saver)
            config = {"configurable": {"thread_id": f"{thread}-{case}"}}
            if mode == "start":
                try:
                    graph.invoke({"task": TASK}, config, durability="sync")
                except RuntimeError as exc:
                    found[f"{case}_error"] = str(exc)
            else:
                state = graph.get_state(config)
                found[f"{case}_read"] = summary(state.values)["attempts"]
                resume = Command(resume={"action": "approve"}) if review else None
                graph.invoke(resume, config, durability="sync")
            state = graph.get_state(config)
            found[case] = {**summary(state.values), "next": list(state.next)}
    out[kind] = found
print(json.dumps(out))
"""


def run_side(
    mode: str, design: str, savers: list[str], thread: str, markers: Path
) -> dict[str, Any]:
    """Run `SIDE` in a fresh process under one channel design; return its JSON line."""
    switch = "1" if design == "delta" else "0"
    env = {**os.environ, "LANGGRAPH_REFINE_DELTA_CHANNEL": switch, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", SIDE, mode, thread, str(markers), *savers],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=TIMEOUT,
    )
    assert done.returncode == 0, done.stderr
    out: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["design"] == design  # the switch really chose this design
    return out


def expected(indexes: range) -> list[list[Any]]:
    """`[index, response, score, output]` per attempt as `tests.durable_worker` writes them.

    The worker's loop is untyped, so every attempt's `output` is None.
    """
    scores = [0.1, 0.3, 0.2, 0.5, 0.6, 0.95]
    return [
        [i, f"sea v{i} (after {','.join(map(str, range(i))) or 'none'})", scores[i], None]
        for i in indexes
    ]


@pytest.mark.slow
@pytest.mark.postgres
@pytest.mark.parametrize(("written", "read"), [("delta", "reducer"), ("reducer", "delta")])
def test_a_thread_resumes_with_every_attempt_under_the_other_design(
    written: str, read: str, tmp_path: Path
) -> None:
    savers = [f"sqlite:{tmp_path / 'checkpoints.sqlite'}", f"postgres:{require_postgres()}"]
    thread, markers = f"upgrade-{uuid.uuid4().hex}", tmp_path / "markers"
    started = run_side("start", written, savers, thread, markers)
    resumed = run_side("resume", read, savers, thread, markers)
    for kind in ("sqlite", "postgres"):
        check_side(started[kind], resumed[kind], markers.parent / f"markers.{kind}.crash")


def check_side(before: dict[str, Any], after: dict[str, Any], crash_calls: Path) -> None:
    """What one saver's threads held when started under one design and resumed under the other."""
    assert before["crash_error"] == "injected failure in gen"
    assert before["crash"]["attempts"] == expected(range(3))
    assert before["review"]["next"] == ["review"]
    assert before["review"]["attempts"] == expected(range(6))
    # Read back before anything runs: every attempt, none empty.
    assert after["crash_read"] == expected(range(3))
    assert after["review_read"] == expected(range(6))
    # The crashed loop continues at attempt 3, its generator seeing attempts 0-2
    # ("sea v3 (after 0,1,2)"), and ends as an uninterrupted run would.
    crash = after["crash"]
    assert crash["attempts"] == expected(range(6))
    assert (crash["stop_reason"], crash["value"], crash["next"]) == (
        "target_reached",
        "sea v5 (after 0,1,2,3,4)",
        [],
    )
    calls = crash_calls.read_text().splitlines()
    started = ["gen 0", "eval 0", "gen 1", "eval 1", "gen 2", "eval 2", "gen 3"]
    resumed = ["gen 3", "eval 3", "gen 4", "eval 4", "gen 5", "eval 5"]
    assert calls == started + resumed  # no attempt regenerated but the one that crashed
    # The approved review keeps all six attempts and the best response.
    review = after["review"]
    assert review["attempts"] == expected(range(6))
    assert (review["stop_reason"], review["value"], review["next"]) == (
        "approved",
        "sea v5 (after 0,1,2,3,4)",
        [],
    )

"""A stopped batch continues its unfinished tasks from their last completed call.

`batch` checkpoints each task's run (`--checkpoint`, by default beside `--out`): a real
batch process is killed with SIGKILL (or stopped with Ctrl-C) while tasks are mid-way,
and the same command rerun pays again for at most the requests that were in flight, on
a scripted server that counts them; no row is lost or written twice.
"""

# ruff: noqa: F811 - pytest fixtures are imported from the helper module

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.test_cli_batch import batch_args, read_jsonl, tasks, write_jsonl
from tests.test_cli_helpers import MODEL_ENV, cli, openai_server, per_task  # noqa: F401

TASKS = 4


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # as in a terminal (see test_cli_honest)


@pytest.mark.slow
@pytest.mark.parametrize(("sig", "code"), [(signal.SIGKILL, -9), (signal.SIGINT, 130)])
def test_a_stopped_batch_repeats_at_most_the_calls_in_flight(
    cli: Any, openai_server: Any, tmp_path: Path, sig: int, code: int
) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", tasks(TASKS))
    reference = openai_server(per_task())
    whole = cli(*batch_args(reference, src, tmp_path / "whole.jsonl", "-c", "2"))
    assert whole.code == 0, whole.err
    paid = len(reference.requests)  # what the batch costs when nothing stops it

    server = openai_server(per_task(), delay=0.15)
    out = tmp_path / "out.jsonl"
    args = batch_args(server, src, out, "-c", "2")
    env = {k: v for k, v in os.environ.items() if k not in MODEL_ENV}
    err = (tmp_path / "stderr.txt").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "langgraph_refine.cli", *args],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=err,
        preexec_fn=_default_sigint,
    )
    try:
        deadline = time.monotonic() + 60
        # Two tasks finished (6 calls each), the other two some calls into their loops.
        while time.monotonic() < deadline and len(server.requests) < 20:
            time.sleep(0.02)
        proc.send_signal(sig)
        assert proc.wait(10) == code
    finally:
        err.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if sig == signal.SIGINT:
        said = (tmp_path / "stderr.txt").read_text()
        assert "unfinished ones continue from their last completed call (kept in " in said
    finished = len(read_jsonl(out))
    assert 1 <= finished < TASKS, "the kill came too late"
    assert (tmp_path / "out.jsonl.checkpoint.sqlite").exists()

    rerun = cli(*args)
    assert rerun.code == 0, rerun.err
    rows = read_jsonl(out)
    assert sorted(r["id"] for r in rows) == [f"t{i}" for i in range(TASKS)]  # each once
    # At most one call in flight per task running (`-c 2`) is paid twice.
    assert len(server.requests) <= paid + 2, (len(server.requests), paid)
    by_id = {r["id"]: r for r in rows}
    whole_rows = {r["id"]: r for r in read_jsonl(tmp_path / "whole.jsonl")}
    for key, row in by_id.items():  # the resumed tasks end as an uninterrupted batch's
        assert row["score_history"] == whole_rows[key]["score_history"]


def test_a_second_batch_on_the_same_checkpoint_is_refused_at_once(
    cli: Any, openai_server: Any, tmp_path: Path
) -> None:
    from langgraph_refine._loop._claim import Lease
    from langgraph_refine.cli._batch import BATCH_CLAIM

    server = openai_server(per_task())
    src = write_jsonl(tmp_path / "in.jsonl", tasks(2))
    out = tmp_path / "out.jsonl"
    running = Lease(str(tmp_path / "out.jsonl.checkpoint.sqlite"), BATCH_CLAIM)
    running.take()  # the claim of a batch still running on this checkpoint
    try:
        second = cli(*batch_args(server, src, out))
    finally:
        running.give_back()
    assert second.code == 1
    assert "is in use by another batch (another run is writing it (process" in second.err
    assert not server.requests and not out.read_text()
    again = cli(*batch_args(server, src, out))
    assert again.code == 0, again.err
